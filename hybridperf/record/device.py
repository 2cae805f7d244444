"""The CUDA device to record on: detection through CuPy, its provenance, and its GPU spec."""
from __future__ import annotations

import datetime as _dt
import platform
import shutil
import socket
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hybridperf.devices import match_device
from hybridperf.errors import RecordError
from hybridperf.hardware import GPUSpec, list_gpus, load_gpu

__all__ = ["DeviceInfo", "match_gpu_spec", "no_gpu_error", "open_device", "session_provenance"]

_INSTALL = "install cupy-cuda12x and run on a machine with an NVIDIA GPU"


def no_gpu_error(detail: str) -> RecordError:
    """The one-line error raised where no CUDA GPU can be used."""
    detail = " ".join(str(detail).split())[:200] or "unknown reason"
    return RecordError(f"no CUDA GPU found: {detail}; {_INSTALL}")


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """What the CUDA runtime says about the device (clocks in MHz, memory in bytes)."""

    index: int
    name: str
    compute_capability: str
    sm_count: int
    memory_bytes: int
    clock_mhz: float | None = None
    memory_clock_mhz: float | None = None
    pci_bus_id: str = ""
    driver_version: str = ""
    runtime_version: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


def _version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def open_device(index: int = 0) -> DeviceInfo:
    """Import CuPy and describe CUDA device ``index``.

    Raises
    ------
    RecordError
        ``no CUDA GPU found: ...`` (one line) when CuPy is missing, the driver is missing or too
        old, or the runtime sees no device.
    """
    try:
        import cupy
    except ImportError as exc:
        raise no_gpu_error(f"CuPy is not installed ({exc})") from None
    except Exception as exc:  # noqa: BLE001 - a broken CuPy/CUDA install fails in many ways
        raise no_gpu_error(f"CuPy failed to import ({type(exc).__name__}: {exc})") from None
    rt = cupy.cuda.runtime
    try:
        count = rt.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - CUDARuntimeError: no driver, no device, driver too old
        raise no_gpu_error(f"the CUDA runtime reports {type(exc).__name__}: {exc}") from None
    if count < 1:
        raise no_gpu_error("the CUDA runtime sees 0 devices")
    if not 0 <= index < count:
        raise RecordError(f"CUDA device {index} does not exist; this machine has devices 0..{count - 1}")
    try:
        cupy.cuda.Device(index).use()
        props = rt.getDeviceProperties(index)
        driver, runtime = rt.driverGetVersion(), rt.runtimeGetVersion()
    except Exception as exc:  # noqa: BLE001
        raise no_gpu_error(f"device {index} cannot be opened ({type(exc).__name__}: {exc})") from None
    name = props.get("name", b"")
    name = name.decode(errors="replace") if isinstance(name, bytes) else str(name)
    clock = props.get("clockRate")  # kHz; absent from cudaDeviceProp since CUDA 13
    mem_clock = props.get("memoryClockRate")
    pci = ""
    if all(k in props for k in ("pciDomainID", "pciBusID", "pciDeviceID")):
        pci = f"{props['pciDomainID']:08X}:{props['pciBusID']:02X}:{props['pciDeviceID']:02X}.0"
    return DeviceInfo(
        index=index, name=name.strip(), compute_capability=f"{props['major']}.{props['minor']}",
        sm_count=int(props["multiProcessorCount"]), memory_bytes=int(props["totalGlobalMem"]),
        clock_mhz=clock / 1000 if clock else None, memory_clock_mhz=mem_clock / 1000 if mem_clock else None,
        pci_bus_id=pci, driver_version=_version(int(driver)), runtime_version=_version(int(runtime)),
        extra={"cupy_version": getattr(cupy, "__version__", "")},
    )


def match_gpu_spec(device_name: str, compute_capability: str, sm_count: int, memory_bytes: int,
                   specs: Sequence[GPUSpec] | None = None, requested: str | Path | None = None) -> GPUSpec:
    """The GPU spec whose rows the device's timings belong to.

    With ``requested`` (``--gpu``): that spec, refused if its compute capability differs from the
    device's. Otherwise the spec whose name or alias is the device name, else the unique spec
    with the same compute capability and SM count (ties broken by memory size within 10%).

    Raises
    ------
    RecordError
        When no spec or several match; the message says to pass ``--gpu``.
    """
    if requested is not None:
        spec = load_gpu(requested)
        if spec.compute_capability != compute_capability:
            raise RecordError(
                f"--gpu {requested} is compute capability {spec.compute_capability} but the device "
                f"{device_name!r} is {compute_capability}; pass the spec of the GPU you run on")
        return spec
    match = match_device(device_name)
    if match.spec is not None:
        return match.spec
    if match.listed:  # a known device without a spec: its reason beats a guess by SM count
        raise RecordError(f"device {device_name!r}: {match.reason}; or pass --gpu NAME or a spec file")
    specs = list_gpus() if specs is None else list(specs)
    same = [s for s in specs if s.compute_capability == compute_capability and s.sm_count == sm_count]
    if len(same) > 1:
        gib = memory_bytes / 2**30
        close = [s for s in same if abs(s.memory_gib - gib) <= 0.1 * s.memory_gib]
        same = close if close else same
    if len(same) == 1:
        return same[0]
    found = ", ".join(Path(s.path).stem or s.name for s in same) or "none"
    raise RecordError(
        f"cannot tell which GPU spec the device {device_name!r} (cc {compute_capability}, {sm_count} SMs) "
        f"is (candidates: {found}); pass --gpu NAME or a spec file")


def _nvidia_smi(pci_bus_id: str) -> dict[str, str]:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {}
    fields = ("name", "driver_version", "clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem",
              "clocks.applications.graphics", "pstate", "temperature.gpu", "power.limit", "persistence_mode")
    cmd = [exe, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"]
    if pci_bus_id:
        cmd += ["-i", pci_bus_id]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if out.returncode != 0 or not out.stdout.strip():
        return {}
    values = [v.strip() for v in out.stdout.splitlines()[0].split(",")]
    return {f"nvidia_smi.{k}": v for k, v in zip(fields, values)}


def session_provenance(device: DeviceInfo | None, spec: GPUSpec, settings: dict[str, Any]) -> dict[str, Any]:
    """Provenance of one recording session: device, driver, CUDA runtime, clocks, host, date,
    software versions and the recorder settings (JSON-serialisable)."""
    from hybridperf import __version__

    out: dict[str, Any] = {
        "date_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "hybridperf": __version__,
        "gpu_spec": Path(spec.path).stem if spec.path else spec.name,
        "gpu_spec_sha256": spec.sha256,
        "settings": settings,
    }
    if device is not None:
        out.update({
            "gpu_name": device.name, "device_index": device.index,
            "compute_capability": device.compute_capability, "sm_count": device.sm_count,
            "memory_bytes": device.memory_bytes, "clock_mhz": device.clock_mhz,
            "memory_clock_mhz": device.memory_clock_mhz, "pci_bus_id": device.pci_bus_id,
            "driver_version": device.driver_version, "cuda_runtime_version": device.runtime_version,
            **device.extra, **_nvidia_smi(device.pci_bus_id),
        })
    return out
