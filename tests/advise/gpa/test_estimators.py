"""Speedup estimators (paper Eqs. 2-10, Theorem 5.1; GPA.md Secs. 1-4)."""
from __future__ import annotations

import math

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from hybridperf.advise.gpa import (
    V100,
    GPAArch,
    GPAParameterError,
    block_increase_speedup,
    issue_rate,
    latency_hiding_speedup,
    parallel_speedup,
    scope_latency_hiding_speedup,
    stall_elimination_speedup,
    thread_increase_speedup,
)
from hybridperf.hardware import load_gpu

counts = st.floats(0, 1e9, allow_nan=False, allow_infinity=False)


@given(counts, counts, st.floats(0, 1))
def test_latency_hiding_bounded_by_two(active, latency, frac):
    t = active + latency
    assume(t > 0)
    s = latency_hiding_speedup(t, active, frac * latency)  # any M_L <= L
    assert 1.0 <= s <= 2.0 + 1e-9  # Theorem 5.1


def test_latency_hiding_accepts_a_bound_rounded_at_the_total_scale():
    # Hypothesis found it: T - A rounds to 46.00000095 for T ~ 5.4e8 while M_L = L = 46.000001.
    t = 536870866.0 + 46.000001
    assert latency_hiding_speedup(t, 536870866.0, 46.000001) == pytest.approx(t / (t - 46.000001))


def test_latency_hiding_cases():
    assert latency_hiding_speedup(100, 40, 30) == pytest.approx(100 / 70)  # M_L <= A: Eq. 3
    assert latency_hiding_speedup(100, 40, 60) == pytest.approx(100 / 60)  # capped at A: Eq. 4
    assert latency_hiding_speedup(100, 50, 50) == 2.0  # the bound is reached at A = L = M_L
    with pytest.raises(GPAParameterError, match="matched_latency_samples"):
        latency_hiding_speedup(100, 40, 61)  # M_L > L = 60


@given(st.floats(1, 1e9), st.floats(0, 1), st.floats(0, 1))
def test_stall_elimination_at_least_one_and_monotone(t, f1, f2):
    lo, hi = sorted((f1 * t, f2 * t))
    s_lo, s_hi = stall_elimination_speedup(t, lo), stall_elimination_speedup(t, hi)
    assert 1.0 <= s_lo <= s_hi


def test_stall_elimination_values():
    assert stall_elimination_speedup(100, 0) == 1.0
    assert stall_elimination_speedup(100, 30) == pytest.approx(100 / 70)
    assert stall_elimination_speedup(100, [10, 20]) == pytest.approx(100 / 70)  # sum of regions
    assert stall_elimination_speedup(100, 100) == math.inf
    for bad in ((0, 0), (100, -1), (100, 101), (math.nan, 1)):
        with pytest.raises(GPAParameterError):
            stall_elimination_speedup(*bad)
    with pytest.raises(GPAParameterError):
        stall_elimination_speedup(100, [10, -5])


@given(st.floats(1, 1e6), st.floats(0.01, 0.99),
       st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=1, max_size=8), st.floats(0, 1))
def test_scoped_latency_hiding_bounded(t, active_share, scopes, cap_share):
    a = t * active_share
    lat = t - a
    n = len(scopes)
    # scope matches partition at most L; scope active samples and the cap are at most A
    pairs = [(m * lat / n, x * a) for m, x in scopes]
    s = scope_latency_hiding_speedup(t, pairs, cap_share * a)
    assert 1.0 <= s <= 2.0 + 1e-9


def test_scoped_latency_hiding_eq5():
    # loop1 nested in loop2: each scope hides at most its own active samples
    assert scope_latency_hiding_speedup(100, [(30, 10), (20, 25)], 40) == pytest.approx(100 / 70)
    assert scope_latency_hiding_speedup(100, [(30, 10), (20, 25)], 15) == pytest.approx(100 / 85)
    assert scope_latency_hiding_speedup(100, [], 40) == 1.0
    with pytest.raises(GPAParameterError):
        scope_latency_hiding_speedup(100, [(-1, 10)], 40)


def test_issue_rate_and_parallel_speedup():
    assert issue_rate(0.5, 2) == pytest.approx(0.75)  # Eq. 8: 1 - (1 - i)^W
    assert issue_rate(0.0, 8) == 0.0 and issue_rate(1.0, 1) == 1.0
    assert parallel_speedup(1.5, 0.5, 2.0) == pytest.approx(6.0)  # Eq. 10
    with pytest.raises(GPAParameterError):
        parallel_speedup(0.0, 1.0)
    with pytest.raises(GPAParameterError):
        issue_rate(1.5, 2)


def test_block_increase_hand_computed():
    # W_SM = 16 -> 4 warps/scheduler; i = 0.2: I = 1 - 0.8^4 = 0.5904, I' = 0.2
    # S = (0.2 / 0.5904) * (16 / 4) / (1 - 0.1)
    s = block_increase_speedup(0.2, 16, 256, 16, 0.1)
    assert s == pytest.approx(0.2 / (1 - 0.8 ** 4) * 4 / 0.9)
    # integer division in the exponent (GPA's code): W_SM = 18 -> floor(4.5) = 4, ratio 18/4
    assert block_increase_speedup(0.2, 18, 256, 16, 0.0) == pytest.approx(0.2 / (1 - 0.8 ** 4) * 4.5)


@pytest.mark.parametrize("args", [
    (0.2, 16, 256, 80, 0.1),   # B = N_SM: enough blocks
    (0.2, 16, 256, 200, 0.1),
    (0.2, 16, 128, 16, 0.1),   # n = 4 * 32: already one warp per scheduler
    (0.2, 16, 64, 16, 0.1),
    (0.0, 16, 256, 16, 0.1),   # no issued samples: undefined
    (0.2, 3, 256, 16, 0.1),    # fewer warps than schedulers
    (0.2, 16, 256, 16, 1.0),   # all samples are throttle samples: undefined
])
def test_block_increase_not_applicable_returns_one(args):
    assert block_increase_speedup(*args) == 1.0


@given(st.floats(0.001, 1), st.floats(4, 64), st.integers(129, 1024), st.integers(1, 79), st.floats(0, 0.99))
def test_block_increase_at_least_one(i, w, n, b, r):
    assert block_increase_speedup(i, w, n, b, r) >= 1.0 - 1e-12


def test_thread_increase_fan2_arithmetic():
    # GPA.md 4.2: Fan2, 16-thread blocks (beta = 2), W_SM = 32 (W = 8):
    # S = 2 * (1 + (1 - i)^8); the paper's 3.32 implies (1 - i)^8 = 0.66.
    i = 1 - 0.66 ** (1 / 8)
    assert thread_increase_speedup(i, 32, 16) == pytest.approx(3.32)
    assert thread_increase_speedup(0.5, 32, 16) == pytest.approx(2 * (1 + 0.5 ** 8))
    # the model caps this case at 2 * beta = 4
    assert thread_increase_speedup(1e-9, 32, 16) == pytest.approx(4.0, rel=1e-6)


def test_thread_increase_cases():
    assert thread_increase_speedup(0.1, 2, 64) == pytest.approx(4 / 2 * 1.0)  # idle schedulers
    assert thread_increase_speedup(0.1, 2, 48) == pytest.approx(2 * 64 / 48)
    assert thread_increase_speedup(0.1, 64, 256) == pytest.approx(1.0)  # full occupancy
    assert thread_increase_speedup(0.0, 16, 256) == 1.0  # GPA's 0/0
    w = 16
    expected = (1 - 0.9 ** 16) / (1 - 0.9 ** (w / 4))
    assert thread_increase_speedup(0.1, w, 256) == pytest.approx(expected)
    with pytest.raises(GPAParameterError, match="active_warps_per_sm"):
        thread_increase_speedup(0.1, 65, 256)
    with pytest.raises(GPAParameterError, match="threads_per_block"):
        thread_increase_speedup(0.1, 16, 0)


@given(st.floats(0, 1), st.floats(0.5, 64), st.integers(1, 1024))
def test_thread_increase_at_least_one(i, w, n):
    assert thread_increase_speedup(i, w, n) >= 1.0 - 1e-12


def test_arch_parameters():
    a100ish = GPAArch.from_spec(load_gpu("a100"))
    assert (a100ish.sm_count, a100ish.schedulers_per_sm, a100ish.max_warps_per_sm) == (108, 4, 64)
    # GPA's V100 constants (paper Sec. 4: 80 SMs, 4 schedulers, 64 warps per SM, warp size 32).
    assert (V100.sm_count, V100.schedulers_per_sm, V100.max_warps_per_sm, V100.warp_size) == (80, 4, 64, 32)
    assert block_increase_speedup(0.2, 16, 256, 100, 0.0, arch=a100ish) > 1.0
    assert block_increase_speedup(0.2, 16, 256, 100, 0.0, arch=V100) == 1.0
    assert V100.latency_cycles("mufu") == 14 and V100.max_latency_cycles == 1200
    with pytest.raises(GPAParameterError):
        GPAArch(name="x", sm_count=0, schedulers_per_sm=4, max_warps_per_sm=64, warp_size=32)
    with pytest.raises(GPAParameterError):
        GPAArch(name="x", sm_count=80, schedulers_per_sm=8, max_warps_per_sm=4, warp_size=32)
    with pytest.raises(GPAParameterError, match="unknown latency class"):
        V100.latency_cycles("warp")
