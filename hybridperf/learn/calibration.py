"""Per-group calibration of an analytical baseline in log space: one scale, or overhead + scale."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from hybridperf.arrays import FloatArray

__all__ = ["GroupTable", "affine_fit", "apply_offsets", "fit_offsets", "shared_scale_fit", "stack_weight"]

# One table per group column: group id -> (log scale, overhead in the time's unit).
GroupTable = dict[float, tuple[float, float]]


def affine_fit(base: FloatArray, resid: FloatArray) -> tuple[float, float] | None:
    """Fit log(y) = log(s * B + a), B = exp(base), a in [0, min y], in log space; None if too few runs.

    ``base`` is the log baseline and ``resid`` = log(y) - base of one group. Needs 4 runs whose
    baselines span at least 2x; returns (log s, a).
    """
    fit = shared_scale_fit(base, resid, np.zeros(len(base)))
    return None if fit is None else (fit[0], fit[1][0.0])


def shared_scale_fit(base: FloatArray, resid: FloatArray, pairs: FloatArray,
                     start: tuple[float, float] | None = None) -> tuple[float, dict[float, float]] | None:
    """Fit log(y) = log(s * B + a_p) in log space with one scale s for all rows and one overhead a_p per
    pair ``p`` (0 <= a_p <= the pair's fastest run); None under 4 runs or with baselines spanning under 2x
    (:func:`affine_fit` is its one-pair case).

    ``base`` is the log baseline, ``resid`` = log(y) - base and ``pairs`` each row's pair id (e.g. the GPU a
    kernel ran on); ``start`` an initial (log s, a) such as :func:`affine_fit`'s pooled one. Returns
    (log s, {pair: a_p}). The overhead is what a run costs beyond the modelled kernel: the launch, the
    framework's dispatch, the timing method, properties of the machine and software a run was recorded on,
    which the GPU's datasheet does not tell, while the scale is how far the GPU runs from its model.
    """
    from scipy.optimize import least_squares

    ok = np.isfinite(base) & np.isfinite(resid) & np.isfinite(pairs)
    base, resid, pairs = base[ok], resid[ok], pairs[ok]
    if len(base) < 4 or np.ptp(base) < np.log(2.0):
        return None
    ids, inv = np.unique(pairs, return_inverse=True)
    y_min = pd.Series(np.exp(base + resid)).groupby(inv).min().to_numpy()
    big = np.exp(-base)
    log_s0, a0 = start if start is not None else (float(np.mean(resid)), 0.0)

    def f(p: np.ndarray) -> np.ndarray:
        return np.log(np.exp(p[0]) + p[1:][inv] * big) - resid

    x0 = np.concatenate([[log_s0], np.minimum(a0, y_min)])
    fit = least_squares(f, x0=x0, bounds=(np.concatenate([[-np.inf], np.zeros(len(ids))]),
                                          np.concatenate([[np.inf], y_min])))
    if not fit.success:
        return None
    return float(fit.x[0]), {float(k): float(a) for k, a in zip(ids, fit.x[1:])}


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
