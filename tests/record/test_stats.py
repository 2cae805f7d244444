"""Timing statistics: median, spread, CV and the stop rule, on given raw times (no GPU)."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from hybridperf.errors import RecordError
from hybridperf.record import RunFailed, measure, should_stop, summarize_times


def test_summary_of_known_times() -> None:
    s = summarize_times([1.0, 2.0, 3.0, 4.0, 100.0], target_cv=0.02)
    assert s.median_ms == 3.0 and s.min_ms == 1.0 and s.max_ms == 100.0 and s.repeats == 5
    assert s.std_ms == pytest.approx(np.std([1, 2, 3, 4, 100], ddof=1))
    assert s.cv == pytest.approx(s.std_ms / 3.0)  # CV is std / median, as hybridperf.sweep.noise_floor
    assert not s.converged


def test_single_repeat_has_zero_spread() -> None:
    s = summarize_times([2.5])
    assert (s.median_ms, s.std_ms, s.cv, s.repeats) == (2.5, 0.0, 0.0, 1)


@pytest.mark.parametrize("times", [[], [1.0, 0.0], [1.0, math.nan], [-1.0]])
def test_bad_times_are_refused(times: list[float]) -> None:
    with pytest.raises(RecordError):
        summarize_times(times)


def test_stop_rule() -> None:
    steady = [1.0] * 5
    assert not should_stop(steady[:4], min_repeats=5, max_repeats=50, target_cv=0.02)  # too few
    assert should_stop(steady, min_repeats=5, max_repeats=50, target_cv=0.02)  # CV 0 <= target
    noisy = [1.0, 2.0] * 10
    assert not should_stop(noisy, min_repeats=5, max_repeats=50, target_cv=0.02)
    assert should_stop(noisy, min_repeats=5, max_repeats=20, target_cv=0.02)  # cap reached
    assert should_stop([600.0] * 5, min_repeats=5, max_repeats=50, target_cv=0.0, time_budget_s=2.0)  # budget
    assert not should_stop([600.0] * 4, min_repeats=5, max_repeats=50, target_cv=0.0, time_budget_s=2.0)


def test_measure_stops_early_when_steady_and_discards_warmup() -> None:
    calls = itertools.count()
    seq = [50.0, 40.0, 30.0] + [1.0] * 100  # three slow warm-up runs, then steady

    def once() -> float:
        return seq[next(calls)]

    s = measure(once, warmup=3, min_repeats=5, max_repeats=50, target_cv=0.02)
    assert s.repeats == 5 and s.median_ms == 1.0 and s.converged and s.max_ms == 1.0


def test_measure_hits_the_cap_when_noisy() -> None:
    cycle = itertools.cycle([1.0, 1.5])
    s = measure(lambda: next(cycle), warmup=0, min_repeats=3, max_repeats=12, target_cv=0.01)
    assert s.repeats == 12 and not s.converged and s.median_ms == 1.25


def test_measure_converges_once_noise_settles() -> None:
    seq = itertools.chain([1.0, 3.0, 1.0, 3.0], itertools.repeat(2.0))
    s = measure(lambda: next(seq), warmup=0, min_repeats=4, max_repeats=1000, target_cv=0.05)
    # four outliers of +-1 around 2 ms: CV = 1 / sqrt(n - 1) <= 0.05 from n = 401 on
    assert s.converged and s.repeats == 401


def test_measure_rejects_a_zero_time_as_a_failed_run() -> None:
    with pytest.raises(RunFailed, match="timer returned 0.0 ms"):
        measure(lambda: 0.0, warmup=0)


@pytest.mark.parametrize("kwargs, message", [
    ({"min_repeats": 0}, "min_repeats"),
    ({"min_repeats": 5, "max_repeats": 4}, "max_repeats"),
    ({"target_cv": -1.0}, "target_cv"),
    ({"warmup": -1}, "warmup"),
])
def test_bad_settings(kwargs: dict, message: str) -> None:
    with pytest.raises(RecordError, match=message):
        measure(lambda: 1.0, **kwargs)
