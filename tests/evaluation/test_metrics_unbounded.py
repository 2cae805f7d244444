"""Interval metrics of unbounded intervals: a shift training could not measure gives lo 0 and hi inf."""
from __future__ import annotations

import numpy as np
import pytest

from hybridperf.evaluation.evaluate import interval_metrics


def test_an_unbounded_interval_covers_with_infinite_width_and_score() -> None:
    m = interval_metrics(np.array([0.0, 0.0]), np.array([np.inf, np.inf]), np.array([1.0, 5.0]), 0.9)
    assert m == {"cover": 100.0, "hilo": np.inf, "winkler": np.inf}


def test_bounded_rows_by_hand_and_rows_without_an_interval() -> None:
    # [1, 2] holds 1.5 and misses 3: Winkler = log 2 + (log 2 + 20 log 1.5) over two rows; a NaN interval
    # (an infeasible row) is not covered and stays out of the ratio and score.
    lo, hi, y = np.array([1.0, 1.0, np.nan]), np.array([2.0, 2.0, np.nan]), np.array([1.5, 3.0, 2.0])
    m = interval_metrics(lo, hi, y, 0.9)
    assert m["cover"] == pytest.approx(100 / 3)
    assert m["hilo"] == 2.0
    assert m["winkler"] == pytest.approx((2 * np.log(2) + 20 * np.log(1.5)) / 2)
    none = interval_metrics(np.array([np.nan]), np.array([np.nan]), np.array([1.0]), 0.9)
    assert all(np.isnan(v) for v in none.values())
