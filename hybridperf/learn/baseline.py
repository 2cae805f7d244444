"""Choosing the analytical baseline a hybrid model multiplies its residual onto, per kernel."""
from __future__ import annotations

import zlib
from collections.abc import Mapping

import numpy as np
import pandas as pd

from hybridperf.analytical.run import TIME_MODELS
from hybridperf.errors import HybridperfError
from hybridperf.learn.calibration import affine_fit

__all__ = ["BASELINE_COLUMN", "GROUP_COLUMNS", "add_baseline", "add_group_ids", "baseline_column", "choose_baselines",
           "fallback_baseline", "group_id", "size_groups"]

BASELINE_COLUMN = "log_baseline_ms"
# Group ids for the per-(kernel, GPU) scale, then the per-kernel fallback (HybridRegressor.group_columns).
GROUP_COLUMNS = ("id_kernel_gpu", "id_kernel")


def baseline_column(name: str) -> str:
    """Feature column holding the log-ms time of an analytical baseline (a model of TIME_MODELS)."""
    if name not in TIME_MODELS:
        raise HybridperfError(f"unknown baseline {name!r}; choose from {', '.join(TIME_MODELS)}")
    return f"log_{name.replace('-', '_')}_ms"


def _spread(resid: np.ndarray, pairs: np.ndarray) -> float:
    """Std of log residuals after removing each (kernel, gpu) pair's mean: what a scale can't fix."""
    centred = resid - pd.Series(resid).groupby(pairs).transform("mean").to_numpy()
    return float(np.sqrt(np.mean(centred**2)))


def choose_baselines(features: pd.DataFrame, time_ms: np.ndarray, kernels: np.ndarray, gpus: np.ndarray,
                     sizes: np.ndarray | None = None) -> tuple[dict[str, str], str]:
    """Per kernel, the baseline whose shape best fits the measured times once scaled per (kernel, gpu).

    With ``sizes`` (one problem size per row) and at least three distinct sizes in a kernel, the
    score is extrapolation-aware, as the product's main use is unseen larger sizes: each pair's
    calibration is fitted on the smaller two thirds of that kernel's sizes and the median absolute
    log error is measured on the largest third, with the better of the two calibrations the hybrid
    applies, one scale or overhead + scale (:func:`hybridperf.learn.calibration.affine_fit`): a fixed
    per-launch cost (timer, framework) dominates small sizes, and a scale alone fitted there judges
    every baseline by how well it mimics that cost rather than the kernel. Otherwise the score is the
    spread of the log errors after the per-pair scale.
    A kernel whose runs cannot tell shapes apart takes the fallback: one run per (kernel, gpu), which every
    scaled model fits exactly, or every model scoring the same (runs whose counts do not change). Scoring
    them picked the first model of the list, and AIWC's hmm kernels, trained on their tiny class alone,
    were then predicted 70x out in work by MWP-CWP's shape (S2 MAPE 6,666 %).
    Returns the mapping and the fallback for kernels never trained (:func:`fallback_baseline`).
    """
    logy = np.log(np.asarray(time_ms, dtype=np.float64))
    kernels = np.asarray(kernels).astype(str)
    pairs = np.char.add(np.char.add(kernels, "|"), np.asarray(gpus).astype(str))
    fallback = fallback_baseline(features, time_ms, kernels)
    scores: dict[str, dict[str, float]] = {}
    for name in TIME_MODELS:
        base = features[baseline_column(name)].to_numpy(dtype=np.float64)
        resid = logy - base
        for k in np.unique(kernels):
            m = kernels == k
            if not np.all(np.isfinite(resid[m])):
                continue
            if sizes is not None and len(np.unique(sizes[m])) >= 3:
                score = _forward_error(resid[m], base[m], pairs[m], np.asarray(sizes, dtype=np.float64)[m])
            else:
                score = _spread(resid[m], pairs[m])
            scores.setdefault(k, {})[name] = score
    missing = [k for k in np.unique(kernels) if k not in scores]
    if missing:
        raise HybridperfError(f"no analytical baseline is finite on every training row of kernel {missing[0]}")
    single = pd.Series(pairs).groupby(kernels).agg(lambda p: p.is_unique)
    mapping = {}
    for k, s in scores.items():
        values = np.array(list(s.values()))
        mapping[k] = fallback if single[k] or np.ptp(values) <= 1e-12 else min(s, key=s.get)
    return mapping, fallback


def fallback_baseline(features: pd.DataFrame, time_ms: np.ndarray, kernels: np.ndarray) -> str:
    """The baseline for kernels never trained. No calibration exists for such a kernel, so its time is the
    model's own: the model whose uncalibrated times lie closest to the measured ones, by the mean over
    kernels of the median |log(measured / model)| (a model meaningful only once scaled, such as seed 004's
    counts with adjusting weight 1, loses here even where it fits best after scaling)."""
    logy = np.log(np.asarray(time_ms, dtype=np.float64))
    kernels = np.asarray(kernels).astype(str)
    errors = {}
    for name in TIME_MODELS:
        err = np.abs(logy - features[baseline_column(name)].to_numpy(dtype=np.float64))
        per_kernel = [np.median(err[kernels == k]) for k in np.unique(kernels)]
        errors[name] = float(np.mean(per_kernel)) if np.all(np.isfinite(per_kernel)) else np.inf
    if not np.isfinite(min(errors.values())):
        raise HybridperfError("no analytical model is finite on every training row; check the descriptors")
    return min(errors, key=errors.get)


def _forward_error(resid: np.ndarray, base: np.ndarray, pairs: np.ndarray, sizes: np.ndarray) -> float:
    """Median absolute log error on the largest third of sizes after a per-pair calibration fitted on the
    rest: the better of one scale (the mean residual) and overhead + scale
    (:func:`~hybridperf.learn.calibration.affine_fit`, where the pair's runs allow it). A median, because one
    model's tail on a few shapes (e.g. GPUPerf's serialization term) should not outvote its fit everywhere
    else; the better of the two, because an overhead fitted on small sizes can extrapolate worse than a
    scale alone (the overhead soaks up a trend of the small sizes) or much better (a fixed per-launch cost)."""
    cut = np.quantile(np.unique(sizes), 2 / 3)
    fit, test = sizes <= cut, sizes > cut
    scale = np.full(int(test.sum()), float(np.mean(resid[fit])))
    affine = scale.copy()
    for pair in np.unique(pairs[test]):
        f, t = fit & (pairs == pair), (pairs == pair)[test]
        if not f.any():
            continue
        scale[t] = float(np.mean(resid[f]))
        fitted = affine_fit(base[f], resid[f])
        log_s, over = fitted if fitted is not None else (scale[t][0], 0.0)
        with np.errstate(over="ignore"):
            affine[t] = np.log(np.exp(log_s) + over * np.exp(-base[test][t]))
    return min(float(np.median(np.abs(resid[test] - off))) for off in (scale, affine))


def add_baseline(features: pd.DataFrame, kernels: np.ndarray, mapping: Mapping[str, str],
                 fallback: str) -> pd.DataFrame:
    """Copy of ``features`` with :data:`BASELINE_COLUMN`: each row's kernel's chosen baseline (log ms)."""
    out = features.copy(deep=False)  # a new column only: the data is shared, not copied
    col = np.full(len(out), np.nan)
    inv, uniq = pd.factorize(np.asarray(kernels).astype(str))
    chosen = np.array([mapping.get(k, fallback) for k in uniq], dtype=object)[inv]
    for name in set(mapping.values()) | {fallback}:
        sel = chosen == name
        col[sel] = features[baseline_column(name)].to_numpy(dtype=np.float64)[sel]
    out[BASELINE_COLUMN] = col
    return out


def group_id(name: str) -> float:
    """The stable numeric id of a group name (CRC-32: a kernel, or "kernel|gpu") in :data:`GROUP_COLUMNS`, so a
    saved model maps the same names to the same ids."""
    return float(zlib.crc32(str(name).encode()))


def _ids(names: np.ndarray) -> np.ndarray:
    """:func:`group_id` of each name."""
    codes, uniq = pd.factorize(np.asarray(names).astype(str), sort=False)
    return np.array([group_id(u) for u in uniq])[codes]


def add_group_ids(features: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """Copy of ``features`` with the :data:`GROUP_COLUMNS` ids of each row's (kernel, gpu) and kernel."""
    out = features.copy(deep=False)  # a new column only: the data is shared, not copied
    k_codes, kernels = pd.factorize(rows["kernel"].astype(str).to_numpy(dtype=object))
    g_codes, gpus = pd.factorize(rows["gpu"].astype(str).to_numpy(dtype=object))
    ng = max(len(gpus), 1)
    pairs, pair_codes = np.unique(k_codes.astype(np.int64) * ng + g_codes, return_inverse=True)
    names = [f"{kernels[p // ng]}|{gpus[p % ng]}" for p in pairs]
    out[GROUP_COLUMNS[0]] = _ids(np.asarray(names, dtype=object))[pair_codes.reshape(-1)]
    out[GROUP_COLUMNS[1]] = _ids(np.asarray(kernels, dtype=object))[k_codes]
    return out


def size_groups(sizes: np.ndarray | None, n_groups: int = 5) -> np.ndarray | None:
    """Problem-size bands (quantiles of log size) for out-of-fold fits that leave whole size bands
    out, so the stacking weight and the conformal intervals see extrapolation across sizes, not
    only interpolation between configurations. ``None`` when sizes do not vary."""
    if sizes is None:
        return None
    logs = np.log(np.asarray(sizes, dtype=np.float64))
    uniq = np.unique(logs[np.isfinite(logs)])
    if len(uniq) < 3:
        return None
    edges = np.unique(np.quantile(uniq, np.linspace(0, 1, min(n_groups, len(uniq)) + 1)[1:-1]))
    return np.digitize(logs, edges)
