"""Pareto fronts: brute-force reference, ties, directions, NaN, permutation and chunk invariance."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from hybridperf.errors import HybridperfError
from hybridperf.search.pareto import ParetoError, merge_fronts, pareto_mask, pareto_ranks


def brute_force(obj: np.ndarray, maximize) -> np.ndarray:
    """O(n^2) reference straight from the definition (minimise after negating maximised columns)."""
    a = np.asarray(obj, dtype=float)
    flags = np.broadcast_to(np.asarray(maximize, dtype=bool), (a.shape[1],))
    loss = np.where(flags, -a, a)
    n = len(loss)
    out = np.ones(n, dtype=bool)
    for i in range(n):
        for j in range(n):
            if np.all(loss[j] <= loss[i]) and np.any(loss[j] < loss[i]):
                out[i] = False
                break
    return out


# Small integer grids make ties and duplicates common; floats cover the general case.
small_ints = st.integers(1, 3).flatmap(
    lambda d: arrays(np.float64, st.tuples(st.integers(0, 40), st.just(d)), elements=st.integers(-3, 3).map(float)))
floats = st.integers(1, 4).flatmap(
    lambda d: arrays(np.float64, st.tuples(st.integers(0, 30), st.just(d)),
                     elements=st.floats(-1e6, 1e6, allow_nan=False, allow_subnormal=False)))
directions = st.one_of(st.booleans(), st.lists(st.booleans(), min_size=4, max_size=4))


def _flags(maximize, d):
    return maximize if isinstance(maximize, bool) else maximize[:d]


@settings(max_examples=150, deadline=None)
@given(obj=st.one_of(small_ints, floats), maximize=directions)
def test_matches_brute_force(obj, maximize) -> None:
    flags = _flags(maximize, obj.shape[1])
    np.testing.assert_array_equal(pareto_mask(obj, flags), brute_force(obj, flags))


@settings(max_examples=80, deadline=None)
@given(obj=small_ints, maximize=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_permutation_invariant(obj, maximize, seed) -> None:
    perm = np.random.default_rng(seed).permutation(len(obj))
    np.testing.assert_array_equal(pareto_mask(obj, maximize)[perm], pareto_mask(obj[perm], maximize))


@settings(max_examples=80, deadline=None)
@given(obj=st.one_of(small_ints, floats), cuts=st.lists(st.integers(0, 40), max_size=4), maximize=st.booleans())
def test_front_of_chunk_fronts_is_global_front(obj, cuts, maximize) -> None:
    chunks = np.split(obj, sorted(c for c in cuts if c <= len(obj)))
    fronts = [c[pareto_mask(c, maximize)] if len(c) else c for c in chunks]
    merged = merge_fronts(fronts, maximize)
    got = np.concatenate([f[m] for f, m in zip(fronts, merged)]) if fronts else obj[:0]
    want = obj[pareto_mask(obj, maximize)]
    key = lambda a: sorted(map(tuple, a))
    assert key(got) == key(want)


def test_ties_and_duplicates_are_kept() -> None:
    obj = np.array([[1.0, 5.0], [1.0, 5.0], [2.0, 4.0], [2.0, 3.0], [0.5, 5.0]])
    # Maximise both: the duplicated (1, 5) stays twice; (2, 3) and (0.5, 5) are dominated.
    np.testing.assert_array_equal(pareto_mask(obj, maximize=True), [True, True, True, False, False])


def test_directions() -> None:
    obj = np.array([[1.0, 1.0], [2.0, 2.0], [1.0, 2.0], [2.0, 1.0]])
    np.testing.assert_array_equal(pareto_mask(obj), [True, False, False, False])
    np.testing.assert_array_equal(pareto_mask(obj, maximize=True), [False, True, False, False])
    np.testing.assert_array_equal(pareto_mask(obj, maximize=[True, False]), [False, False, False, True])
    np.testing.assert_array_equal(pareto_mask(obj, maximize=[False, True]), [False, False, True, False])


def test_signed_zero_and_inf() -> None:
    obj = np.array([[0.0, 1.0], [-0.0, 1.0], [np.inf, 0.0], [1.0, -np.inf]])
    np.testing.assert_array_equal(pareto_mask(obj, maximize=True), brute_force(obj, True))
    np.testing.assert_array_equal(pareto_mask(obj, maximize=True)[:2], [True, True])


def test_one_objective_and_empty() -> None:
    np.testing.assert_array_equal(pareto_mask([3.0, 1.0, 1.0, 2.0]), [False, True, True, False])
    assert pareto_mask(np.zeros((0, 2))).shape == (0,)
    assert merge_fronts([]) == []
    assert [m.tolist() for m in merge_fronts([np.zeros((0, 2)), [[1.0, 1.0]]])] == [[], [True]]


def test_nan_rejected_with_a_clear_error() -> None:
    with pytest.raises(ParetoError, match="NaN in 1 rows .*row 1"):
        pareto_mask([[1.0, 2.0], [np.nan, 1.0]])
    assert issubclass(ParetoError, HybridperfError)


def test_bad_shapes_rejected() -> None:
    with pytest.raises(ParetoError, match="2-D"):
        pareto_mask(np.zeros((2, 2, 2)))
    with pytest.raises(ParetoError, match="3 flags for 2 objectives"):
        pareto_mask(np.zeros((2, 2)), maximize=[True, True, False])
    with pytest.raises(ParetoError, match="different numbers of objectives"):
        merge_fronts([np.zeros((1, 2)), np.zeros((1, 3))])


@settings(max_examples=60, deadline=None)
@given(obj=small_ints, maximize=st.booleans())
def test_ranks_peel_fronts(obj, maximize) -> None:
    ranks = pareto_ranks(obj, maximize)
    np.testing.assert_array_equal(ranks == 0, pareto_mask(obj, maximize))
    for r in range(1, int(ranks.max(initial=0)) + 1):
        layer = ranks >= r
        np.testing.assert_array_equal(ranks[layer] == r, pareto_mask(obj[layer], maximize))
    capped = pareto_ranks(obj, maximize, max_rank=1)
    np.testing.assert_array_equal(capped, np.minimum(ranks, 1))


def test_large_two_objective_front_is_fast() -> None:
    rng = np.random.default_rng(0)
    obj = rng.random((1_000_000, 2))
    mask = pareto_mask(obj, maximize=True)
    assert 1 <= mask.sum() < 100
