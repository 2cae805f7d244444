"""Per-group calibration of an analytical baseline in log space: one scale, or overhead + scale."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from hybridperf.arrays import FloatArray

__all__ = ["GroupTable", "affine_fit", "apply_offsets", "fit_offsets", "stack_weight"]

# One table per group column: group id -> (log scale, overhead in the time's unit).
GroupTable = dict[float, tuple[float, float]]


def affine_fit(base: FloatArray, resid: FloatArray) -> tuple[float, float] | None:
    """Fit log(y) = log(s * B + a), B = exp(base), a in [0, min y], in log space; None if too few runs.

    ``base`` is the log baseline and ``resid`` = log(y) - base of one group. Needs 4 runs whose
    baselines span at least 2x; returns (log s, a).
    """
    from scipy.optimize import least_squares

    ok = np.isfinite(base) & np.isfinite(resid)
    base, resid = base[ok], resid[ok]
    if len(base) < 4 or np.ptp(base) < np.log(2.0):
        return None
    y_min = float(np.min(np.exp(base + resid)))
    big = np.exp(-base)

    def f(p: np.ndarray) -> np.ndarray:
        return np.log(np.exp(p[0]) + p[1] * big) - resid

    fit = least_squares(f, x0=[float(np.mean(resid)), 0.0], bounds=([-np.inf, 0.0], [np.inf, y_min]))
    return (float(fit.x[0]), float(fit.x[1])) if fit.success else None


def fit_offsets(groups: Sequence[FloatArray], target: FloatArray, weights: FloatArray | None, base: FloatArray,
                affine: bool) -> tuple[list[GroupTable], float]:
    """Each group column's table of (weighted mean log residual, 0) per group id, and the overall mean.

    ``groups`` holds the group-id columns, most specific first; with ``affine`` each group of the
    first column with enough runs gets :func:`affine_fit`'s (log scale, overhead) instead.
    """
    glob = float(np.average(target, weights=weights))
    levels: list[GroupTable] = []
    for level, col in enumerate(groups):
        frame = pd.DataFrame({"g": col, "t": target, "w": np.ones(len(col)) if weights is None else weights})
        frame = frame[np.isfinite(col)]
        sums = (frame.t * frame.w).groupby(frame.g).sum() / frame.w.groupby(frame.g).sum()
        table = {float(k): (float(v), 0.0) for k, v in sums.items() if np.isfinite(v)}
        if level == 0 and affine:
            for k in table:
                m = col == k
                fit = affine_fit(base[m], target[m])
                if fit is not None:
                    table[k] = fit
        levels.append(table)
    return levels, glob


def apply_offsets(groups: Sequence[FloatArray], levels: Sequence[GroupTable], glob: float,
                  base: FloatArray) -> FloatArray:
    """Per-row log-space calibration log(scale + overhead / baseline) of the row's most specific
    known group, else ``glob``."""
    out = np.full(len(base), np.nan)
    for col, table in zip(groups, levels):
        ids = pd.Series(col)
        log_s = ids.map({k: v[0] for k, v in table.items()}).to_numpy(dtype=np.float64)
        over = ids.map({k: v[1] for k, v in table.items()}).to_numpy(dtype=np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            vals = np.where(over > 0, np.log(np.exp(log_s) + over * np.exp(-base)), log_s)
        fill = np.isnan(out) & ~np.isnan(vals)
        out[fill] = vals[fill]
    out[np.isnan(out)] = glob
    return out


def stack_weight(resid: np.ndarray, pred: np.ndarray, default: float) -> float:
    """Least-squares weight in [0, 1] of out-of-fold residual predictions (``default`` if undefined)."""
    ok = np.isfinite(resid) & np.isfinite(pred)
    den = float(np.sum(pred[ok] ** 2))
    return float(np.clip(np.sum(resid[ok] * pred[ok]) / den, 0.0, 1.0)) if den > 0 else default
