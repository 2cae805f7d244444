"""Split-conformal prediction intervals in log space from held-out absolute log errors."""
from __future__ import annotations

import numpy as np

from hybridperf.arrays import BoolArray, FloatArray

__all__ = ["conformal_half_width", "conformity_scores", "outside_training_range"]


def conformity_scores(log_errors: FloatArray) -> FloatArray:
    """Sorted finite absolute log errors (the conformity scores)."""
    scores = np.abs(np.asarray(log_errors, dtype=np.float64))
    return np.sort(scores[np.isfinite(scores)])


def conformal_half_width(scores: FloatArray | None, coverage: float | None) -> float:
    """Log-space half width of the split-conformal interval at ``coverage``: the ceil((n + 1) x
    coverage)-th smallest score (Vovk et al. 2005; Lei et al., JASA 2018); inf when undefined."""
    if coverage is None or scores is None or len(scores) == 0:
        return float("inf")
    scores = scores[np.isfinite(scores)]
    n = len(scores)
    rank = int(np.ceil((n + 1) * coverage))
    return float(scores[rank - 1]) if rank <= n else float("inf")


def outside_training_range(X: FloatArray, mask: BoolArray, low: FloatArray, high: FloatArray) -> BoolArray:
    """Rows whose value in any ``mask`` column lies outside that column's training [low, high]."""
    if not mask.any():
        return np.zeros(X.shape[0], dtype=bool)
    cols = mask
    return ((X[:, cols] > high[cols]) | (X[:, cols] < low[cols])).any(axis=1)
