"""The CuPy runner: compile a benchmark's CUDA source with NVRTC, allocate buffers, time with events."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from hybridperf.record.bench import BenchSetup, LaunchPlan
from hybridperf.record.plan import PlannedRow
from hybridperf.record.ptx import define_flags
from hybridperf.record.runner import ContextLost, RunFailed

__all__ = ["CupyLaunch", "CupyRunner", "is_sticky_error"]

# Errors after which the CUDA context is unusable (every later call fails): CUDA driver/runtime
# error names and messages, matched case-insensitively.
_STICKY = ("illegal", "misaligned", "launch failure", "launch_failed", "launchfailure", "launch_timeout",
           "launchtimeout", "timed out", "hardware stack", "hardware_stack", "hardwarestack", "ecc", "assert",
           "context is destroyed", "not_permitted", "device-side")


def is_sticky_error(message: str) -> bool:
    """Whether a CUDA error message means the context is lost (CUDA Runtime API, "Error Handling")."""
    m = message.lower()
    return any(s in m for s in _STICKY)


def _short(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:300]


def _compile_message(exc: BaseException) -> str:
    # NVRTC logs read "kernel.cu(12): error: ..."; keep the first error line.
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    first = next((ln for ln in lines if "error" in ln.lower()), lines[0] if lines else type(exc).__name__)
    return f"compile error: {first}"[:300]


class CupyLaunch:
    """One configuration ready to run: compiled function, device buffers, arguments, events."""

    def __init__(self, cupy: Any, fn: Any, launch: LaunchPlan, args: tuple[Any, ...], stream: Any,
                 events: tuple[Any, Any], counters: Mapping[str, float]) -> None:
        self._cp, self._fn, self._args, self._stream = cupy, fn, args, stream
        self._grid, self._block, self._smem = launch.grid, launch.block, launch.dynamic_smem_bytes
        self._start, self._end = events
        self.counters = dict(counters)

    def time_ms(self) -> float:
        """One launch between two events on the runner's stream; the elapsed time in ms."""
        try:
            self._start.record(self._stream)
            self._fn(self._grid, self._block, self._args, shared_mem=self._smem, stream=self._stream)
            self._end.record(self._stream)
            self._end.synchronize()
            return float(self._cp.cuda.get_elapsed_time(self._start, self._end))
        except Exception as exc:  # noqa: BLE001 - CUDADriverError/CUDARuntimeError: classify, record
            msg = _short(exc)
            if is_sticky_error(msg):
                raise ContextLost(f"launch error: {msg}", self.counters) from None
            raise RunFailed(f"launch error: {msg}", self.counters) from None

    def close(self) -> None:
        """Nothing to release: buffers and compiled modules stay cached in the runner."""


class CupyRunner:
    """Prepares launches of one benchmark on the current CuPy device (see :class:`~hybridperf.record.runner.Runner`).

    Parameters
    ----------
    bench : BenchSetup
        The CUDA source, entry function and argument setup.
    options : sequence of str
        Extra NVRTC options; config parameters are always passed as ``-DNAME=VALUE``.
    """

    def __init__(self, bench: BenchSetup, options: Sequence[str] = ("-lineinfo",)) -> None:
        import cupy

        self._cp = cupy
        self._bench = bench
        self._code = bench.code()
        self._options = tuple(options)
        self._functions: dict[tuple[tuple[str, float], ...], Any] = {}
        self._buffers: dict[str, tuple[tuple[str, int, str], Any]] = {}
        self._stream = cupy.cuda.Stream(non_blocking=True)
        self._events = (cupy.cuda.Event(), cupy.cuda.Event())

    def function(self, defines: Mapping[str, float]) -> Any:
        """The compiled entry function for these defines (compiled once, then cached)."""
        key = tuple(sorted(defines.items()))
        if key not in self._functions:
            cp = self._cp
            options = (*define_flags(defines), *self._options)
            try:
                module = cp.RawModule(code=self._code, options=options)
                fn = module.get_function(self._bench.entry)
                _ = fn.num_regs  # forces compilation and loading now, not at the first launch
            except cp.cuda.compiler.CompileException as exc:
                raise RunFailed(_compile_message(exc)) from None
            except Exception as exc:  # noqa: BLE001 - module load failures (driver too old, bad PTX)
                msg = _short(exc)
                if is_sticky_error(msg):
                    raise ContextLost(f"module load error: {msg}") from None
                raise RunFailed(f"module load error: {msg}") from None
            self._functions[key] = fn
        return self._functions[key]

    def _buffer(self, name: str, dtype: str, elements: int, init: str) -> Any:
        cp = self._cp
        spec = (dtype, elements, init)
        cached = self._buffers.get(name)
        if cached is not None and cached[0] == spec:
            return cached[1]
        try:
            if init == "random" and dtype in ("float32", "float64"):
                arr = cp.random.random(elements, dtype=dtype)
            elif init == "ones":
                arr = cp.ones(elements, dtype=dtype)
            else:
                arr = cp.zeros(elements, dtype=dtype)
        except cp.cuda.memory.OutOfMemoryError:
            raise RunFailed(f"out of device memory allocating buffer {name} "
                            f"({elements * np.dtype(dtype).itemsize / 2**30:.3g} GiB)") from None
        self._buffers[name] = (spec, arr)
        return arr

    def _release_unneeded(self, launch: LaunchPlan) -> None:
        wanted = {name: (dtype, n, init) for name, dtype, n, init in launch.buffers}
        stale = [name for name, (spec, _) in self._buffers.items() if wanted.get(name) != spec]
        for name in stale:
            del self._buffers[name]
        if stale:
            self._cp.get_default_memory_pool().free_all_blocks()

    def __call__(self, row: PlannedRow, launch: LaunchPlan) -> CupyLaunch:
        """Compile (cached), check resources, allocate buffers (cached per size) and return the launch."""
        fn = self.function(launch.defines)
        counters = {"registers": float(fn.num_regs), "static_smem_bytes": float(fn.shared_size_bytes),
                    "local_bytes": float(fn.local_size_bytes)}
        max_threads = int(fn.max_threads_per_block)
        if launch.threads_per_block > max_threads:
            raise RunFailed(f"resources: {launch.threads_per_block} threads per block but the compiled kernel "
                            f"({fn.num_regs} registers per thread) allows at most {max_threads}", counters)
        self._release_unneeded(launch)
        arrays = {name: self._buffer(name, dtype, n, init) for name, dtype, n, init in launch.buffers}
        args: list[Any] = []
        for a in launch.args:
            if a[0] == "buffer":
                args.append(arrays[a[1]])
            else:
                value, dtype = a[1], np.dtype(a[2])
                args.append(dtype.type(int(value) if dtype.kind in "iu" else value))
        return CupyLaunch(self._cp, fn, launch, tuple(args), self._stream, self._events, counters)

    def close(self) -> None:
        """Free the cached buffers and modules."""
        self._buffers.clear()
        self._functions.clear()
        self._cp.get_default_memory_pool().free_all_blocks()
