"""Seed 004 scaled counts, Ryoo's metrics and the roofline."""
from __future__ import annotations

import numpy as np
import pytest

from hybridperf.analytical.roofline import roofline
from hybridperf.analytical.ryoo import ryoo_metrics
from hybridperf.analytical.scaled_counts import calibrate_adjusting_weight, scaled_counts
from hybridperf.errors import HybridperfError
from hybridperf.evaluation.reproduce import seed004_tables
from hybridperf.hardware import load_gpu
from hybridperf.kernel import load_kernel


def test_ryoo_golden_seed003() -> None:
    r = ryoo_metrics(15150, 769, 2**24, 256, 2).row()
    assert r["efficiency"] == pytest.approx(3.93e-12, rel=5e-3)
    assert r["utilization"] == pytest.approx(226.6, rel=1e-3)
    assert r["w_tb"] == 8


def test_matvec_predicted_column_is_proportional_to_eq4() -> None:
    # MODELS.md 4: predicted(N) proportional to N * (2N*c + (2N+1)*500), c = 1 per seed 004's table.
    t = seed004_tables().query("kernel == 'seed004-matvec'")
    n = t.N.to_numpy(float)
    ratio = t.predicted_ms.to_numpy() / (n * (2 * n + (2 * n + 1) * 500))
    assert ratio.max() / ratio.min() - 1 < 1e-6
    raw = scaled_counts(load_kernel("matvec").profile({"N": n}), load_gpu("titan-v"),
                        latency_gm_cycles=500, latency_sm_cycles=5).raw_time_ms
    ours = raw / (n * (2 * n + (2 * n + 1) * 500))
    assert ours.max() / ours.min() - 1 < 1e-9


def test_adjusting_weight_calibration() -> None:
    raw = np.array([2.0, 4.0, 8.0])
    assert calibrate_adjusting_weight(raw[:1], [1.0]) == 2.0  # one run: predicted / actual (seed 004)
    assert calibrate_adjusting_weight(raw, raw / 3) == pytest.approx(3.0)
    assert calibrate_adjusting_weight(raw, raw / 3, method="linear") == pytest.approx(3.0)
    with pytest.raises(HybridperfError, match="finite and positive"):
        calibrate_adjusting_weight([1.0], [0.0])
    with pytest.raises(HybridperfError, match="equal, non-empty"):
        calibrate_adjusting_weight([1.0, 2.0], [1.0])


def test_scaled_counts_weight_divides_time() -> None:
    prof = load_kernel("vecadd").profile({"N": 1e7})
    gpu = load_gpu("titan-v")
    a = scaled_counts(prof, gpu).time_ms[0]
    b = scaled_counts(prof, gpu, adjusting_weight=2.0).time_ms[0]
    assert b == pytest.approx(a / 2)


def test_roofline_bounds() -> None:
    gpu = load_gpu("a100-pcie-40gb")
    k = load_kernel("vecadd")
    n = np.array([1e5, 1e6, 1e7, 1e8])
    r = roofline(k.profile({"N": n}), gpu)
    assert (r.time_ms >= r.bound_ms).all()
    assert r.memory_bound.all()  # 12 bytes per flop: memory-bound everywhere
    np.testing.assert_allclose(r.memory_ms, 12 * n / (gpu.dram_bandwidth_gbs * 1e9) * 1e3)
    assert (np.diff(r.bound_ms) > 0).all()
