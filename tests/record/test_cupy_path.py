"""The CuPy path (device detection, GPU matching, compile/launch/error handling) against a fake CuPy."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from hybridperf.errors import RecordError
from hybridperf.hardware import list_gpus
from hybridperf.record import record_sweep
from hybridperf.record.cupy_runner import is_sticky_error
from hybridperf.record.device import match_gpu_spec, open_device
from hybridperf.sweepfile import read_provenance, read_sweep

from .fake_cupy import make_fake_cupy


def _use(monkeypatch: pytest.MonkeyPatch, **kw) -> object:
    fake = make_fake_cupy(**kw)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    return fake


def test_no_cupy_gives_one_line_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy -> ImportError
    with pytest.raises(RecordError) as info:
        record_sweep("seed004-vecadd", {"N": [1024]}, None, tmp_path / "s.csv", progress=False)
    msg = str(info.value)
    assert msg.startswith("no CUDA GPU found: CuPy is not installed")
    assert msg.endswith("install cupy-cuda12x and run on a machine with an NVIDIA GPU") and "\n" not in msg
    assert not (tmp_path / "s.csv").exists()


def test_no_device_gives_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    _use(monkeypatch, no_driver=True)
    with pytest.raises(RecordError, match=r"^no CUDA GPU found: the CUDA runtime reports CUDARuntimeError: "
                                          r"cudaErrorNoDevice.*install cupy-cuda12x"):
        open_device()
    _use(monkeypatch, devices=0)
    with pytest.raises(RecordError, match="^no CUDA GPU found: the CUDA runtime sees 0 devices"):
        open_device()


def test_device_info(monkeypatch: pytest.MonkeyPatch) -> None:
    _use(monkeypatch)
    d = open_device()
    assert (d.name, d.compute_capability, d.sm_count, d.clock_mhz) == ("NVIDIA H100 80GB HBM3", "9.0", 132, 1980.0)
    assert (d.driver_version, d.runtime_version, d.pci_bus_id) == ("12.4", "12.6", "00000000:1B:00.0")


def test_match_gpu_spec() -> None:
    gib = 2**30
    # by name or alias
    assert Path(match_gpu_spec("NVIDIA TITAN V", "7.0", 80, 12 * gib).path).stem == "titan-v"
    # H100 SXM and H200 share cc 9.0 and 132 SMs: memory decides
    assert Path(match_gpu_spec("NVIDIA H100 80GB HBM3", "9.0", 132, 79 * gib).path).stem == "h100-sxm"
    assert Path(match_gpu_spec("NVIDIA H200", "9.0", 132, 140 * gib).path).stem == "h200"
    assert Path(match_gpu_spec("NVIDIA H100 PCIe", "9.0", 114, 80 * gib).path).stem == "h100-pcie"
    with pytest.raises(RecordError, match="pass --gpu NAME or a spec file"):
        match_gpu_spec("NVIDIA L40S", "8.9", 142, 45 * gib)
    with pytest.raises(RecordError, match="--gpu titan-v is compute capability 7.0 but the device"):
        match_gpu_spec("NVIDIA H200", "9.0", 132, 140 * gib, requested="titan-v")
    assert match_gpu_spec("x", "9.0", 132, 0, requested="h200").name.startswith("NVIDIA H200")
    assert len(list_gpus()) > 3


def test_record_through_cupy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = _use(monkeypatch, regs=18)
    out = tmp_path / "s.csv"
    s = record_sweep("seed002-tiled-matmul", {"N": [256]}, {"TILE": [8, 16]}, out, progress=False, warmup=2)
    assert (s.gpu, s.ok) == ("h100-sxm", 2)
    df = read_sweep(out)
    assert list(df["time_ms"]) == [0.5, 0.5] and list(df["counter.registers"]) == [18, 18]
    assert list(df["counter.static_smem_bytes"]) == [1024, 1024] and list(df["counter.local_bytes"]) == [0, 0]
    log = fake.log
    assert log["modules"] == [("-DTILE=8", "-lineinfo"), ("-DTILE=16", "-lineinfo")]  # compiled once per config
    grid, block, types_, smem, stream = log["launches"][0]
    assert grid == (32, 32, 1) and block == (8, 8, 1) and smem == 0 and stream.non_blocking
    assert types_ == ("ndarray", "ndarray", "ndarray", "int32")
    assert len(log["launches"]) == 2 * (2 + 5)  # warm-up + repeats, per config
    # buffers are allocated once per size and reused across configs
    assert log["allocations"] == [("random", 65536, "float32"), ("random", 65536, "float32"),
                                  ("zeros", 65536, "float32")]
    prov = read_provenance(out)["recordings"][0]
    assert prov["gpu_name"] == "NVIDIA H100 80GB HBM3" and prov["driver_version"] == "12.4"
    assert prov["cuda_runtime_version"] == "12.6" and prov["clock_mhz"] == 1980.0


def test_compile_errors_are_failed_rows(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _use(monkeypatch, compile_error="kern.cu(14): error: identifier \"TILE\" is undefined")
    s = record_sweep("seed004-dot", {"N": [1024]}, {"BLOCK": [64]}, tmp_path / "s.csv", progress=False)
    assert s.failed == 1
    reason = read_sweep(tmp_path / "s.csv").loc[0, "reason"]
    assert reason == 'compile error: kern.cu(14): error: identifier "TILE" is undefined'


def test_resource_limit_is_a_failed_row(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _use(monkeypatch, regs=128, max_threads=512)
    record_sweep("seed004-vecadd", {"N": [4096]}, {"BLOCK": [256, 1024]}, tmp_path / "s.csv", progress=False)
    df = read_sweep(tmp_path / "s.csv")
    assert list(df.status) == ["ok", "failed"]
    assert df.loc[1, "reason"] == ("resources: 1024 threads per block but the compiled kernel (128 registers per "
                                   "thread) allows at most 512")
    assert df.loc[1, "counter.registers"] == 128


def test_sticky_launch_error_stops_the_recording(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _use(monkeypatch, launch_error="CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered")
    s = record_sweep("seed004-vecadd", {"N": [4096]}, {"BLOCK": [128, 256]}, tmp_path / "s.csv", progress=False)
    assert s.failed == 1 and "CUDA context was lost" in s.stopped
    _use(monkeypatch, launch_error="CUDA_ERROR_INVALID_VALUE: invalid argument")
    s = record_sweep("seed004-vecadd", {"N": [8192]}, {"BLOCK": [128, 256]}, tmp_path / "t.csv", progress=False)
    assert s.failed == 2 and s.stopped == ""


@pytest.mark.parametrize("message, sticky", [
    ("CUDADriverError: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered", True),
    ("CUDARuntimeError: cudaErrorLaunchFailure: unspecified launch failure", True),
    ("CUDADriverError: CUDA_ERROR_MISALIGNED_ADDRESS: misaligned address", True),
    ("CUDADriverError: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: too many resources requested for launch", False),
    ("CUDADriverError: CUDA_ERROR_INVALID_VALUE: invalid argument", False),
    ("OutOfMemoryError: Out of memory allocating 4,294,967,296 bytes", False),
])
def test_sticky_error_classification(message: str, sticky: bool) -> None:
    assert is_sticky_error(message) is sticky
