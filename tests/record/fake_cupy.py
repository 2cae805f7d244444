"""A stand-in for the parts of CuPy the recorder uses, so its GPU path runs on CPU in tests.

It mirrors CuPy 13/14's API as the recorder calls it (checked against cupy/_core/raw.pyx):
RawModule(code=, options=).get_function(name) -> RawKernel with num_regs, shared_size_bytes,
local_size_bytes, max_threads_per_block and __call__(grid, block, args, shared_mem=, stream=);
cuda.Event().record(stream) / .synchronize(); cuda.get_elapsed_time(start, end) in ms;
cuda.runtime.getDeviceCount/getDeviceProperties/driverGetVersion/runtimeGetVersion.
"""
from __future__ import annotations

import types
from typing import Any

import numpy as np


class CompileException(Exception):
    pass


class OutOfMemoryError(MemoryError):
    pass


class CUDARuntimeError(RuntimeError):
    pass


class CUDADriverError(RuntimeError):
    pass


def make_fake_cupy(*, devices: int = 1, name: bytes = b"NVIDIA H100 80GB HBM3", cc: tuple[int, int] = (9, 0),
                   sms: int = 132, memory: int = 85_045_870_592, regs: int = 16, max_threads: int = 1024,
                   compile_error: str | None = None, launch_error: str | None = None,
                   elapsed_ms: float = 0.5, no_driver: bool = False) -> types.ModuleType:
    log: dict[str, list[Any]] = {"modules": [], "launches": [], "allocations": []}

    class RawKernel:
        def __init__(self, options: tuple[str, ...]) -> None:
            self.options = options
            self.num_regs, self.shared_size_bytes, self.local_size_bytes = regs, 1024, 0
            self.max_threads_per_block = max_threads

        def __call__(self, grid, block, args, *, shared_mem: int = 0, stream: Any = None) -> None:
            if launch_error:
                raise CUDADriverError(launch_error)
            log["launches"].append((grid, block, tuple(type(a).__name__ for a in args), shared_mem, stream))

    class RawModule:
        def __init__(self, *, code: str, options: tuple[str, ...] = ()) -> None:
            assert isinstance(options, tuple) and all(isinstance(o, str) for o in options)
            self.code, self.options = code, options
            log["modules"].append(options)

        def get_function(self, name: str) -> RawKernel:
            if compile_error:
                raise CompileException(f"{compile_error}\n\n1 error detected in the compilation of kern.cu.")
            assert f"void {name}(" in self.code
            return RawKernel(self.options)

    class Event:
        def record(self, stream: Any = None) -> None:
            pass

        def synchronize(self) -> None:
            pass

    class Stream:
        def __init__(self, null: bool = False, non_blocking: bool = False) -> None:
            self.non_blocking = non_blocking

    class Device:
        def __init__(self, index: int = 0) -> None:
            self.index = index

        def use(self) -> None:
            pass

    def get_device_count() -> int:
        if no_driver:
            raise CUDARuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")
        return devices

    runtime = types.SimpleNamespace(
        getDeviceCount=get_device_count,
        getDeviceProperties=lambda i: {"name": name, "major": cc[0], "minor": cc[1], "multiProcessorCount": sms,
                                       "totalGlobalMem": memory, "clockRate": 1980000, "memoryClockRate": 2619000,
                                       "pciDomainID": 0, "pciBusID": 0x1B, "pciDeviceID": 0},
        driverGetVersion=lambda: 12040, runtimeGetVersion=lambda: 12060,
    )

    def alloc(kind: str):
        def make(n: int, dtype: str = "float32") -> np.ndarray:
            log["allocations"].append((kind, n, dtype))
            return np.zeros(n, dtype=dtype)
        return make

    pool = types.SimpleNamespace(free_all_blocks=lambda: None)
    cuda = types.SimpleNamespace(
        runtime=runtime, Device=Device, Stream=Stream, Event=Event,
        get_elapsed_time=lambda a, b: elapsed_ms,
        compiler=types.SimpleNamespace(CompileException=CompileException),
        memory=types.SimpleNamespace(OutOfMemoryError=OutOfMemoryError),
    )
    mod = types.ModuleType("cupy")
    mod.__version__ = "14.0.0-fake"
    mod.cuda = cuda
    mod.RawModule = RawModule
    mod.random = types.SimpleNamespace(random=lambda n, dtype="float64": alloc("random")(n, dtype))
    mod.zeros = alloc("zeros")
    mod.ones = alloc("ones")
    mod.get_default_memory_pool = lambda: pool
    mod.log = log
    return mod
