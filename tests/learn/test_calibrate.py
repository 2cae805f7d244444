"""calibrate_gpu recovers a machine parameter from runs the model itself generated, and writes a loadable spec."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hybridperf.analytical.run import analyze
from hybridperf.errors import HybridperfError
from hybridperf.hardware import load_gpu
from hybridperf.learn.calibrate import calibrate_gpu, write_gpu_spec


def _runs(gpu, latency: float) -> pd.DataFrame:
    """vecadd and matvec times predicted by MWP-CWP on ``gpu`` with its DRAM latency set to ``latency``."""
    spec = gpu.replace(dram_latency_cycles=latency)
    frames = []
    for kernel in ("seed004-vecadd", "seed004-matvec"):
        sizes = np.geomspace(2**12, 2**22 if kernel.endswith("vecadd") else 2**14, 12).round()
        t = analyze(kernel, spec, {"N": sizes}, models=["mwp-cwp"]).terms["mwp-cwp"]["time_ms"].to_numpy()
        frames.append(pd.DataFrame({"kernel": kernel, "gpu": gpu.key, "size.N": sizes, "time_ms": t,
                                    "status": "ok"}))
    return pd.concat(frames, ignore_index=True)


def test_recovers_the_dram_latency_that_generated_the_runs() -> None:
    gpu = load_gpu("titan-v")
    truth = 1.6 * gpu.dram_latency_cycles
    cal = calibrate_gpu(_runs(gpu, truth), gpu, model="mwp-cwp", parameters=["dram_latency_cycles"])
    assert cal.fitted["dram_latency_cycles"] == pytest.approx(truth, rel=0.05)
    assert cal.log_rmse_after < 0.1 * cal.log_rmse_before
    assert "calibrated" in cal.gpu.sources["model.dram_latency_cycles"]


def test_written_spec_loads_back_with_the_fitted_value(tmp_path) -> None:
    gpu = load_gpu("titan-v")
    cal = calibrate_gpu(_runs(gpu, 700.0), gpu, model="mwp-cwp", parameters=["dram_latency_cycles"])
    path = write_gpu_spec(cal.gpu, tmp_path / "tv.toml", name="TITAN V (calibrated)")
    back = load_gpu(path)
    assert back.dram_latency_cycles == pytest.approx(cal.fitted["dram_latency_cycles"])
    assert back.sm_count == gpu.sm_count and back.key == str(path)


def test_bad_requests_are_refused() -> None:
    gpu = load_gpu("titan-v")
    runs = _runs(gpu, gpu.dram_latency_cycles)
    with pytest.raises(HybridperfError, match="calibration supports"):
        calibrate_gpu(runs, gpu, model="roofline")
    with pytest.raises(HybridperfError, match="cannot calibrate"):
        calibrate_gpu(runs, gpu, parameters=["sm_count"])
    with pytest.raises(HybridperfError, match="at least 2 ok runs"):
        calibrate_gpu(runs.assign(gpu="a100-pcie-40gb"), gpu)
