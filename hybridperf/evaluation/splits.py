"""The evaluation splits S1-S5 of EVALUATION.md: which rows train and which test."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from hybridperf.errors import HybridperfError
from hybridperf.sweep import size_metric

__all__ = ["SPLITS", "SPLIT_DESCRIPTIONS", "split_indices"]

SPLITS = ("S1", "S2", "S3", "S4", "S5", "S6")
# What each split asks of a model (EVALUATION.md), for help texts and reports.
SPLIT_DESCRIPTIONS = {
    "S1": "interpolation: random held-out configurations at trained sizes",
    "S2": "size extrapolation: train on the smaller sizes, test on larger ones",
    "S3": "leave one kernel out",
    "S4": "leave one GPU out, with a few calibration runs of it in training",
    "S5": "budget: train on a small random fraction of a sweep, rank the rest",
    "S6": "zero-shot GPU: leave one GPU out with no runs on it, predict from its spec alone",
}


def _s5_test(n: int, budget_fraction: float, rng: np.random.Generator) -> np.ndarray:
    """S5's test mask: all but a random ``budget_fraction`` of the ``n`` runs (at least 2 trained, 1 tested)."""
    if n < 3:
        raise HybridperfError(f"split S5 samples at least 2 training runs and tests the rest; the data hold {n} "
                              "ok runs: give three or more")
    test = np.ones(n, dtype=bool)
    test[rng.choice(n, size=min(max(2, int(round(budget_fraction * n))), n - 1), replace=False)] = False
    return test


def split_indices(sweep: pd.DataFrame, split: str, *, test_fraction: float = 0.2, train_max_size: float | None = None,
                  size_fraction: float = 0.25, holdout: str | None = None, calibration_runs: int = 0,
                  budget_fraction: float = 0.01, seed: int = 0,
                  sizes: Mapping[str, Sequence[str]] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Row positions (train, test) of a split, over the given (ok) rows.

    S1 random configurations (``test_fraction``); S2 train on sizes <= ``train_max_size`` or, per
    kernel, <= ``size_fraction`` x its largest size (and always its smallest size: a kernel whose size
    never changes has nothing to extrapolate and trains), test on the rest, a row's size being its largest
    size.* value or, for the kernels ``sizes`` names, the largest of their columns there (the descriptor's
    sizes, :func:`hybridperf.learn.domain.size_columns`: AIWC's size.class is a label, its work is in its
    counters); S3 leave kernel ``holdout``
    out; S4 leave GPU ``holdout`` out, moving ``calibration_runs`` random rows of it into training;
    S5 train on a random ``budget_fraction`` of rows, test on the rest; S6 leave GPU ``holdout``
    out with no runs of it in training (S4 without calibration runs).
    """
    n = len(sweep)
    rng = np.random.default_rng(seed)
    pos = np.arange(n)
    if split == "S1":
        test = rng.random(n) < test_fraction
    elif split == "S2":
        if train_max_size is not None:
            test = size_metric(sweep) > train_max_size
        else:
            size = size_metric(sweep, sizes)
            per_kernel = pd.Series(size).groupby(sweep["kernel"].to_numpy())
            kmax, kmin = per_kernel.transform("max").to_numpy(), per_kernel.transform("min").to_numpy()
            test = (size > kmax * size_fraction) & (size > kmin)
    elif split in ("S3", "S4", "S6"):
        col = "kernel" if split == "S3" else "gpu"
        if holdout is None or holdout not in set(sweep[col]):
            have = ", ".join(sorted(set(sweep[col])))
            raise HybridperfError(f"{split} needs --holdout naming a {col} in the data; have: {have}")
        test = (sweep[col] == holdout).to_numpy().copy()  # pandas may hand out a read-only view
        if split == "S4" and calibration_runs:
            cal = rng.choice(pos[test], size=min(calibration_runs, int(test.sum()) - 1), replace=False)
            test[cal] = False
    elif split == "S5":
        test = _s5_test(n, budget_fraction, rng)
    else:
        raise HybridperfError(f"unknown split {split!r}; choose from {', '.join(SPLITS)}")
    if test.all() and split in ("S3", "S4", "S6"):
        col = "kernel" if split == "S3" else "gpu"
        raise HybridperfError(f"split {split} holds out every row: the data have one {col} ({holdout}); it needs "
                              f"runs of two or more, one to hold out and one to train on (or use S1, S2 or S5)")
    if test.all() or not test.any():
        which = "no training" if test.all() else "no test"
        raise HybridperfError(f"split {split} leaves {which} rows; adjust its options")
    return pos[~test], pos[test]
