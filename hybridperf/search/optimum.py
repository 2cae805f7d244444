"""The probability that the truly fastest configuration lies in a chosen set, from the prediction intervals."""
# Each configuration's log time is given a predictive distribution by its model prediction and the
# half widths of its conformal interval at several coverages (:data:`LEVELS`; the columns
# :func:`hybridperf.learn.model.predict_rows` adds with ``levels=``): the absolute log error is below
# the half width at coverage c with probability c, linearly in between (from 0 at width 0), and
# symmetric around the prediction; above the widest level the last segment's density continues until
# the mass is 1, which bounds the support. Errors of different configurations are taken as
# independent. A share of the error common to all configurations (a GPU or size the model misjudges
# as a whole) does not change which is fastest, so independence understates how often the
# predicted order holds: the probability is a conservative one.
#
# P(fastest in S) = integral of -d/dt prod_{i in S} (1 - F_i(t)) x prod_{j not in S} (1 - F_j(t)) dt,
# evaluated on a grid of log times up to the smallest upper end of any support (no configuration
# can be fastest above it), so only the configurations whose support reaches below it matter
# (:func:`contenders`).
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = ["LEVELS", "MAX_CONTENDERS", "contenders", "frame_probability", "probability_fastest_in",
           "shortlist_probabilities", "still_contending", "support_ms", "width_columns"]

# Coverages whose half widths describe a configuration's predictive distribution.
LEVELS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
# Dropped configurations that could still be the fastest are kept up to this many (the closest first);
# beyond it the probability is unknown (NaN): the intervals are too wide to say.
MAX_CONTENDERS = 100_000
_GRID = 2049  # log-time points of the integral (its error is well below 1e-3 for these distributions)


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


def _log_survival(t: np.ndarray, mid: np.ndarray, knots: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """Sum over configurations of log P(log time > t), on the grid ``t``."""
    total = np.zeros(len(t))
    for m, k in zip(mid, knots):
        d = t - m
        cdf = 0.5 + 0.5 * np.sign(d) * np.interp(np.abs(d), k, probs)
        with np.errstate(divide="ignore"):
            total += np.log1p(-np.minimum(cdf, 1.0))
    return total


def probability_fastest_in(time_ms: np.ndarray, widths: np.ndarray, in_set: np.ndarray,
                           levels: Sequence[float] = LEVELS) -> float:
    """P(the fastest of the configurations is one of ``in_set``), from predicted times and the half
    widths at ``levels`` (one row per configuration, see the module docstring). NaN when a time or
    width is missing or infinite (no predictive distribution)."""
    time_ms = np.asarray(time_ms, dtype=np.float64)
    widths = np.asarray(widths, dtype=np.float64).reshape(len(time_ms), len(levels))
    in_set = np.asarray(in_set, dtype=bool)
    if len(time_ms) == 0 or not np.all(np.isfinite(time_ms) & (time_ms > 0)) or not np.all(np.isfinite(widths)):
        return float("nan")
    if in_set.all() or not in_set.any():
        return float(in_set.all())
    keep = contenders(time_ms, widths, levels)
    if not (keep & in_set).any():
        return 0.0
    if not (keep & ~in_set).any():
        return 1.0
    knots, probs = _knots(widths[keep], levels)
    mid = np.log(time_ms[keep])
    t = np.linspace(np.min(mid - knots[:, -1]), np.min(mid + knots[:, -1]), _GRID)
    inside = in_set[keep]
    surv_s = np.exp(_log_survival(t, mid[inside], knots[inside], probs))
    surv_d = np.exp(_log_survival(t, mid[~inside], knots[~inside], probs))
    p = np.sum((surv_s[:-1] - surv_s[1:]) * (surv_d[:-1] + surv_d[1:]) / 2)
    return float(np.clip(p, 0.0, 1.0))


def frame_probability(frame: pd.DataFrame, in_set: np.ndarray, levels: Sequence[float] = LEVELS) -> float:
    """:func:`probability_fastest_in` over a table with ``time_ms`` and the :func:`width_columns`."""
    cols = width_columns(levels)
    if not set(cols) <= set(frame.columns):
        return float("nan")
    return probability_fastest_in(frame["time_ms"].to_numpy(dtype=np.float64), frame[cols].to_numpy(np.float64),
                                  in_set, levels)


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


def shortlist_probabilities(kept: pd.DataFrame, contenders: pd.DataFrame | None, shown: np.ndarray,
                            levels: Sequence[float] = LEVELS) -> tuple[float, float]:
    """(P(the fastest is among ``kept``), P(it is among the rows of ``kept`` that ``shown`` marks)),
    with the dropped ``contenders`` as the other configurations that could be the fastest."""
    cols = ["time_ms", *width_columns(levels)]
    if kept.empty or not set(cols) <= set(kept.columns):
        return float("nan"), float("nan")
    others = contenders if contenders is not None else kept.iloc[:0]
    if "index" in others.columns:  # one order whatever the chunking (the sums are then bit-identical)
        others = others.sort_values("index", kind="stable")
    pool = pd.concat([kept[cols], others.reindex(columns=cols)], ignore_index=True)
    in_kept = np.arange(len(pool)) < len(kept)
    in_shown = in_kept & np.concatenate([np.asarray(shown, dtype=bool), np.zeros(len(others), dtype=bool)])
    return frame_probability(pool, in_kept, levels), frame_probability(pool, in_shown, levels)
