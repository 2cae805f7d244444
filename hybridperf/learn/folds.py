"""Held-out splits for out-of-fold fits: random or grouped folds, and forward splits over ordered groups."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
from sklearn.model_selection import GroupKFold, KFold

from hybridperf.progress import track

__all__ = ["HOLDOUT_ROWS", "Split", "forward_shift", "forward_splits", "held_out_parts", "oof_splits"]

HOLDOUT_ROWS = 20_000  # above this, without groups, one 20% holdout replaces the k folds
Split = tuple[np.ndarray, np.ndarray]


def forward_splits(groups: npt.ArrayLike) -> list[Split] | None:
    """Each ordered group (e.g. a size band) as a test set, trained on the smaller groups (at least
    two rows); None with fewer than three groups."""
    g = np.asarray(groups, dtype=np.float64)
    bands = np.unique(g[np.isfinite(g)])
    if len(bands) < 3:
        return None
    splits = [(np.flatnonzero(g < b), np.flatnonzero(g == b)) for b in bands[1:]]
    return [(tr, te) for tr, te in splits if len(tr) >= 2]


def oof_splits(n: int, n_splits: int, groups: npt.ArrayLike | None, random_state: int | None) -> list[Split] | None:
    """Out-of-fold splits of ``n`` rows: whole groups left out when ``groups`` is given, else shuffled
    k folds (one 20% holdout above :data:`HOLDOUT_ROWS` rows); None when fewer than two folds fit."""
    k = min(n_splits, n)
    index = np.zeros((n, 1))
    if groups is None and n > HOLDOUT_ROWS:
        te = np.random.default_rng(random_state).random(n) < 0.2
        return [(np.flatnonzero(~te), np.flatnonzero(te))]
    if groups is not None:
        g = np.asarray(groups)
        k = min(k, len(np.unique(g)))
        return list(GroupKFold(n_splits=k).split(index, None, g)) if k >= 2 else None
    return list(KFold(n_splits=k, shuffle=True, random_state=random_state).split(index)) if k >= 2 else None


def held_out_parts(splits: list[Split], X: np.ndarray, target: np.ndarray, w: np.ndarray | None,
                   fit_core: Callable[..., tuple[Any, float, Any]],
                   offsets: Callable[..., np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(offset, regressor) parts of each split's test rows from ``fit_core`` on its training rows
    (NaN for rows in no test part): a hybrid estimator's held-out log prediction, in two parts."""
    off = np.full(len(target), np.nan)
    reg_part = np.full(len(target), np.nan)
    for tr, te in track(splits, "held-out fits"):
        levels, glob, reg = fit_core(X[tr], target[tr], None if w is None else w[tr])
        off[te] = offsets(X[te], levels, glob)
        reg_part[te] = reg.predict(X[te]) if reg is not None else 0.0
    return off, reg_part


def forward_shift(X: np.ndarray, mask: np.ndarray, splits: list[Split]) -> np.ndarray:
    """How far each split's test rows lie beyond the training rows' maximum in the ``mask`` columns
    (largest over the columns; NaN for rows in no test part)."""
    cols = np.flatnonzero(mask)
    shift = np.full(X.shape[0], np.nan)
    for tr, te in splits:
        top = _nanmax(X[np.ix_(tr, cols)], axis=0)  # NaN: a size no training row of the split has
        shift[te] = _nanmax(X[np.ix_(te, cols)] - top, axis=1)
    return shift


def _nanmax(a: np.ndarray, axis: int) -> np.ndarray:
    """``np.nanmax`` that gives NaN for an all-NaN slice without a warning: sweeps that mix kernels
    with different size parameters leave a size column empty for whole folds."""
    m = np.max(np.where(np.isnan(a), -np.inf, a), axis=axis, initial=-np.inf)
    return np.where(np.isneginf(m), np.nan, m)
