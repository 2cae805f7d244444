"""Which dropped configurations could still be the fastest, from the prediction intervals."""
# Each configuration's log time is given a predictive distribution by its model prediction and the
# half widths of its conformal interval at several coverages (:data:`LEVELS`; the columns
# :func:`hybridperf.learn.model.predict_rows` adds with ``levels=``): the absolute log error is below
# the half width at coverage c with probability c, linearly in between (from 0 at width 0), and
# symmetric around the prediction; above the widest level the last segment's density continues until
# the mass is 1, which bounds the support. A configuration whose support starts above the smallest
# upper end of any support cannot be the fastest; `rank` counts the dropped ones that can
# (``n_contenders``). The chance that the fastest is kept is not computed from these distributions:
# taken as independent they stated 0.1-20 % where the fastest was kept 97 % of the time
# (experiments/results/shortlist_odds.md); :mod:`hybridperf.learn.shortlist` measures it instead.
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = ["LEVELS", "MAX_CONTENDERS", "contenders", "still_contending", "support_ms", "width_columns"]

# Coverages whose half widths describe a configuration's predictive distribution.
LEVELS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
# Dropped configurations that could still be the fastest are kept up to this many (the closest first);
# beyond it the rest are only counted.
MAX_CONTENDERS = 100_000


def width_columns(levels: Sequence[float] = LEVELS) -> list[str]:
    """The prediction columns holding the half widths at ``levels``."""
    from hybridperf.learn.model import half_width_column

    return [half_width_column(c) for c in levels]


def _knots(widths: np.ndarray, levels: Sequence[float] = LEVELS) -> tuple[np.ndarray, np.ndarray]:
    """(half widths, probabilities) of the piecewise-linear CDF of |log error|, one row per configuration:
    0 at 0, each level at its width, 1 at the end of the continued last segment."""
    w = np.maximum.accumulate(np.maximum(np.asarray(widths, dtype=np.float64), 0.0), axis=1)
    c = np.asarray(levels, dtype=np.float64)
    w = w + np.arange(1, w.shape[1] + 1) * 1e-12  # strictly increasing knots (np.interp)
    with np.errstate(invalid="ignore"):  # an unbounded interval (inf widths) gives NaN: callers treat it as no support
        last = w[:, -1] + (w[:, -1] - w[:, -2]) * (1 - c[-1]) / (c[-1] - c[-2])
    knots = np.column_stack([np.zeros(len(w)), w, last + 1e-12])
    return knots, np.concatenate([[0.0], c, [1.0]])


def support_ms(time_ms: np.ndarray, widths: np.ndarray, levels: Sequence[float] = LEVELS) -> tuple[np.ndarray,
                                                                                                      np.ndarray]:
    """The (lowest, highest) time each configuration's predictive distribution allows (ms)."""
    knots, _ = _knots(widths, levels)
    mid = np.log(np.asarray(time_ms, dtype=np.float64))
    return np.exp(mid - knots[:, -1]), np.exp(mid + knots[:, -1])


def contenders(time_ms: np.ndarray, widths: np.ndarray, levels: Sequence[float] = LEVELS) -> np.ndarray:
    """Which configurations could be the fastest: their support starts below the smallest upper end."""
    lo, hi = support_ms(time_ms, widths, levels)
    ok = np.isfinite(lo) & np.isfinite(hi)
    if not ok.any():
        return ok
    return ok & (lo <= np.min(hi[ok]))


def still_contending(kept: pd.DataFrame, dropped: pd.DataFrame,
                     levels: Sequence[float] = LEVELS) -> tuple[pd.DataFrame, int]:
    """The rows of ``dropped`` (``index``, ``time_ms`` and the width columns) that could be faster
    than every configuration of ``kept`` and ``dropped``: their support starts below the smallest
    upper end of any support among them; at most :data:`MAX_CONTENDERS` (those starting lowest).
    Returns (the rows, how many contenders the cap left out). Exact when applied again to the
    union of parts: a row left out here starts above an upper end that stays among the rows."""
    cols = ["index", "time_ms", *width_columns(levels)]
    if dropped.empty or not set(cols) <= set(dropped.columns):
        return dropped.iloc[:0].reindex(columns=cols), 0
    both = pd.concat([kept[cols], dropped[cols]], ignore_index=True) if not kept.empty else dropped[cols]
    lo, hi = support_ms(both["time_ms"].to_numpy(np.float64), both[cols[2:]].to_numpy(np.float64), levels)
    ok = np.isfinite(hi)
    if not ok.any():
        return dropped.iloc[:0][cols], 0
    lo_d = lo[len(both) - len(dropped):]
    keep = np.flatnonzero(np.isfinite(lo_d) & (lo_d <= np.min(hi[ok])))
    lost = max(0, len(keep) - MAX_CONTENDERS)
    if lost:
        keep = keep[np.argsort(lo_d[keep], kind="stable")[:MAX_CONTENDERS]]
    return dropped.iloc[np.sort(keep)][cols].reset_index(drop=True), lost
