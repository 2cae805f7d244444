"""Choosing the analytical baseline a hybrid model multiplies its residual onto, per kernel."""
from __future__ import annotations

from collections.abc import Mapping

import zlib

import numpy as np
import pandas as pd

from hybridperf.errors import HybridperfError
from hybridperf.features import BASELINES, baseline_column

__all__ = ["BASELINE_COLUMN", "GROUP_COLUMNS", "add_baseline", "add_group_ids", "choose_baselines"]

BASELINE_COLUMN = "log_baseline_ms"
# Group ids for the per-(kernel, GPU) scale, then the per-kernel fallback (HybridRegressor.group_columns).
GROUP_COLUMNS = ("id_kernel_gpu", "id_kernel")


def _spread(resid: np.ndarray, pairs: np.ndarray) -> float:
    """Std of log residuals after removing each (kernel, gpu) pair's mean: what a scale can't fix."""
    centred = resid - pd.Series(resid).groupby(pairs).transform("mean").to_numpy()
    return float(np.sqrt(np.mean(centred**2)))


def choose_baselines(features: pd.DataFrame, time_ms: np.ndarray, kernels: np.ndarray,
                     gpus: np.ndarray) -> tuple[dict[str, str], str]:
    """Per kernel, the baseline whose log error varies least once scaled per (kernel, gpu).

    Returns the mapping and the overall best (the fallback for kernels never trained). The scale
    per pair is what the residual learner removes first; the remaining spread is what it must
    learn, so the smallest spread is the best shape (MODELS.md section 6: calibrate, then correct).
    """
    logy = np.log(np.asarray(time_ms, dtype=np.float64))
    kernels = np.asarray(kernels).astype(str)
    pairs = np.char.add(np.char.add(kernels, "|"), np.asarray(gpus).astype(str))
    scores: dict[str, dict[str, float]] = {}
    for name, col in BASELINES.items():
        resid = logy - features[col].to_numpy(dtype=np.float64)
        for k in np.unique(kernels):
            m = kernels == k
            if np.all(np.isfinite(resid[m])):
                scores.setdefault(k, {})[name] = _spread(resid[m], pairs[m])
    missing = [k for k in np.unique(kernels) if k not in scores]
    if missing:
        raise HybridperfError(f"no analytical baseline is finite on every training row of kernel {missing[0]}")
    mapping = {k: min(s, key=s.get) for k, s in scores.items()}
    totals = {n: sum(s.get(n, np.inf) for s in scores.values()) for n in BASELINES}
    return mapping, min(totals, key=totals.get)


def add_baseline(features: pd.DataFrame, kernels: np.ndarray, mapping: Mapping[str, str],
                 fallback: str) -> pd.DataFrame:
    """Copy of ``features`` with :data:`BASELINE_COLUMN`: each row's kernel's chosen baseline (log ms)."""
    out = features.copy()
    col = np.full(len(out), np.nan)
    kernels = np.asarray(kernels).astype(str)
    for name in set(mapping.values()) | {fallback}:
        sel = np.array([mapping.get(k, fallback) == name for k in kernels])
        col[sel] = features[baseline_column(name)].to_numpy(dtype=np.float64)[sel]
    out[BASELINE_COLUMN] = col
    return out


def _ids(names: np.ndarray) -> np.ndarray:
    """Stable numeric ids of names (CRC-32), so a saved model maps the same names to the same ids."""
    uniq, inv = np.unique(names.astype(str), return_inverse=True)
    return np.array([float(zlib.crc32(u.encode())) for u in uniq])[inv]


def add_group_ids(features: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """Copy of ``features`` with the :data:`GROUP_COLUMNS` ids of each row's (kernel, gpu) and kernel."""
    out = features.copy()
    kern = rows["kernel"].astype(str).to_numpy()
    out[GROUP_COLUMNS[0]] = _ids(np.char.add(np.char.add(kern, "|"), rows["gpu"].astype(str).to_numpy()))
    out[GROUP_COLUMNS[1]] = _ids(kern)
    return out
