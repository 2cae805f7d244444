"""Per-group calibration: affine fits recover overhead + scale; unseen groups fall back level by level."""
from __future__ import annotations

import numpy as np

from hybridperf.learn.calibration import affine_fit, apply_offsets, fit_offsets


def test_affine_fit_recovers_overhead_and_scale() -> None:
    base = np.log(np.geomspace(0.01, 10.0, 40))  # baseline times 0.01..10 ms
    y = 0.05 + 2.5 * np.exp(base)  # 0.05 ms fixed cost + 2.5 x baseline
    log_s, over = affine_fit(base, np.log(y) - base)
    assert np.isclose(np.exp(log_s), 2.5, rtol=1e-4) and np.isclose(over, 0.05, rtol=1e-3)


def test_affine_fit_needs_enough_spread() -> None:
    assert affine_fit(np.log([1.0, 1.1, 1.2]), np.zeros(3)) is None  # 3 runs
    assert affine_fit(np.log([1.0, 1.1, 1.2, 1.3, 1.4]), np.zeros(5)) is None  # span < 2x


def test_offsets_fall_back_from_pair_to_kernel_to_global() -> None:
    pair = np.array([1.0, 1.0, 2.0, 2.0, 3.0])
    kernel = np.array([10.0, 10.0, 10.0, 10.0, 20.0])
    target = np.array([0.1, 0.3, 1.0, 1.2, -0.5])
    base = np.zeros(5)
    levels, glob = fit_offsets([pair, kernel], target, None, base, affine=False)
    assert np.isclose(glob, target.mean())
    assert np.isclose(levels[0][1.0][0], 0.2) and np.isclose(levels[1][10.0][0], 0.65)
    probe_pair = np.array([1.0, 9.0, 9.0])  # known pair, unknown pair of a known kernel, unknown both
    probe_kernel = np.array([10.0, 10.0, 99.0])
    out = apply_offsets([probe_pair, probe_kernel], levels, glob, np.zeros(3))
    np.testing.assert_allclose(out, [0.2, 0.65, target.mean()])
