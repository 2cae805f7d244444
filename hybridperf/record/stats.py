"""Timing statistics of repeated kernel runs: median, spread, and when to stop repeating."""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from hybridperf.errors import RecordError
from hybridperf.record.runner import RunFailed

__all__ = ["TimingStats", "check_repeat_settings", "measure", "should_stop", "summarize_times"]


@dataclass(frozen=True, slots=True)
class TimingStats:
    """Summary of one configuration's repeats (all times in ms).

    ``cv`` is the coefficient of variation, sample standard deviation / median (the definition
    :func:`hybridperf.sweep.noise_floor` uses); ``converged`` says whether it reached the target
    before the repeat cap or the time budget stopped the loop.
    """

    median_ms: float
    std_ms: float
    min_ms: float
    max_ms: float
    cv: float
    repeats: int
    converged: bool


def summarize_times(times_ms: Sequence[float], target_cv: float = math.inf) -> TimingStats:
    """Median, sample standard deviation (ddof = 1; 0 for one repeat), min, max and CV of the repeats."""
    t = np.asarray(times_ms, dtype=np.float64)
    if t.size == 0:
        raise RecordError("no timing repeats to summarise; run the kernel at least once")
    if not np.all(np.isfinite(t)) or np.any(t <= 0):
        raise RecordError(f"kernel times must be positive and finite, got {t[~(np.isfinite(t) & (t > 0))][0]!r} ms")
    median = float(np.median(t))
    std = float(np.std(t, ddof=1)) if t.size > 1 else 0.0
    cv = std / median
    return TimingStats(median_ms=median, std_ms=std, min_ms=float(t.min()), max_ms=float(t.max()), cv=cv,
                       repeats=int(t.size), converged=t.size > 1 and cv <= target_cv)


def should_stop(times_ms: Sequence[float], *, min_repeats: int, max_repeats: int, target_cv: float,
                time_budget_s: float = math.inf) -> bool:
    """Stop rule: at least ``min_repeats`` repeats and CV <= ``target_cv``, or ``max_repeats``
    repeats, or (after ``min_repeats``) the repeats have used ``time_budget_s`` seconds of GPU time."""
    n = len(times_ms)
    if n >= max_repeats:
        return True
    if n < min_repeats:
        return False
    if sum(times_ms) / 1000.0 >= time_budget_s:
        return True
    return summarize_times(times_ms).cv <= target_cv


def check_repeat_settings(min_repeats: int, max_repeats: int, target_cv: float, warmup: int) -> None:
    """Refuse settings the stop rule cannot honour (one-line ValueError naming the fix)."""
    if not isinstance(min_repeats, int) or min_repeats < 1:
        raise RecordError(f"min_repeats must be a whole number >= 1, got {min_repeats!r}")
    if not isinstance(max_repeats, int) or max_repeats < min_repeats:
        raise RecordError(f"max_repeats must be a whole number >= min_repeats ({min_repeats}), got {max_repeats!r}")
    if not (isinstance(target_cv, (int, float)) and target_cv >= 0):
        raise RecordError(f"target_cv must be a number >= 0 (e.g. 0.02 for 2%), got {target_cv!r}")
    if not isinstance(warmup, int) or warmup < 0:
        raise RecordError(f"warmup must be a whole number >= 0, got {warmup!r}")


def measure(time_once: Callable[[], float], *, warmup: int = 3, min_repeats: int = 5, max_repeats: int = 50,
            target_cv: float = 0.02, time_budget_s: float = math.inf) -> TimingStats:
    """Run ``time_once`` (one timed launch, returns ms) ``warmup`` times unrecorded, then repeat it
    until :func:`should_stop`; returns the summary of the recorded repeats.

    Raises
    ------
    RunFailed
        If a repeat returns a non-positive or non-finite time (errors of ``time_once`` pass through).
    """
    check_repeat_settings(min_repeats, max_repeats, target_cv, warmup)
    for _ in range(warmup):
        time_once()
    times: list[float] = []
    while not should_stop(times, min_repeats=min_repeats, max_repeats=max_repeats, target_cv=target_cv,
                          time_budget_s=time_budget_s):
        t = float(time_once())
        if not (math.isfinite(t) and t > 0):
            raise RunFailed(f"the timer returned {t!r} ms; the kernel may be too short to time with events")
        times.append(t)
    return summarize_times(times, target_cv)
