"""Per-group calibration: affine fits recover overhead + scale; unseen groups fall back level by level."""
from __future__ import annotations

import numpy as np

from hybridperf.learn.calibration import affine_fit, apply_offsets, fit_offsets, shared_scale_fit


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


def test_shared_scale_fit_recovers_one_scale_and_each_pairs_overhead() -> None:
    rng = np.random.default_rng(0)
    base = np.log(np.geomspace(0.001, 10.0, 60))
    overheads = {1.0: 0.025, 2.0: 0.045, 3.0: 0.0}  # three machines' fixed costs (ms), one without any
    pairs = np.repeat(list(overheads), len(base))
    b = np.tile(base, 3)
    y = 1.7 * np.exp(b) + np.array([overheads[p] for p in pairs])
    y *= np.exp(rng.normal(0, 0.002, len(y)))
    log_s, per_pair = shared_scale_fit(b, np.log(y) - b, pairs)
    assert np.isclose(np.exp(log_s), 1.7, rtol=0.01)
    for p, a in overheads.items():
        assert abs(per_pair[p] - a) < 0.002
    assert shared_scale_fit(b[:3], np.zeros(3), pairs[:3]) is None  # too few runs, as affine_fit
