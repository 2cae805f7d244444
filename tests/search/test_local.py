"""Trust regions: Hamming neighbourhoods, incumbents of distinct basins, and the local picks of a batch."""
from __future__ import annotations

import itertools

import numpy as np

from hybridperf.search.acquisition import select_batch
from hybridperf.search.local import hamming_neighbours, niche_incumbents, trust_regions

# A 3 x 3 x 2 grid of three parameters (value ranks as coordinates).
COORDS = np.array(list(itertools.product([0, 0.5, 1], [0, 0.5, 1], [0, 1])), dtype=np.float64)


def _brute_distance(a: int, b: int) -> int:
    return int(sum(x != y for x, y in zip(COORDS[a], COORDS[b], strict=True)))


def test_neighbours_differ_in_one_to_radius_parameters() -> None:
    cand = np.arange(len(COORDS))
    for centre in (0, 7, 17):
        for radius in (1, 2):
            got = set(cand[hamming_neighbours(COORDS, centre, cand, radius)])
            assert got == {c for c in cand if 1 <= _brute_distance(c, centre) <= radius}
    assert len(hamming_neighbours(COORDS, 0, cand)) == 2 + 2 + 1  # every other value of each parameter


def test_incumbents_are_the_best_of_distinct_basins() -> None:
    rows = np.arange(len(COORDS))
    y = np.log(1.0 + rows.astype(float))  # row 0 fastest, then 1, 2, ...
    y[3] = np.nan  # a failed run is never an incumbent
    got = niche_incumbents(COORDS, rows, y, k=3, separation=2)
    assert got[0] == 0 and np.isfinite(y[got]).all()
    assert all(_brute_distance(a, b) >= 2 for a, b in itertools.combinations(got, 2))
    # each is the fastest row far enough from the faster ones chosen (brute force)
    expect: list[int] = []
    for r in rows[np.isfinite(y)][np.argsort(y[np.isfinite(y)])]:
        if all(_brute_distance(r, c) >= 2 for c in expect):
            expect.append(int(r))
    assert list(got) == expect[:3]


def test_trust_regions_grow_when_the_neighbourhood_is_measured() -> None:
    cand = np.array([r for r in range(len(COORDS)) if _brute_distance(r, 0) >= 2])  # every neighbour measured
    (region,) = trust_regions(COORDS, [0], cand)
    assert {_brute_distance(c, 0) for c in cand[region]} == {2}
    assert trust_regions(COORDS, [0], np.array([0])) == []  # nothing but the centre itself


def test_local_picks_stay_in_the_regions_taken_in_turn() -> None:
    S = np.log(np.array([[0.1, 1.0, 2.0, 2.1, 3.0, 3.1, 0.2, 0.3]]))  # rows 0, 6, 7 are predicted fastest
    regions = [np.array([2, 3]), np.array([4, 5])]
    pos, why = select_batch(S, 1e-3, 1.0, batch=4, explore=0.0, local=0.5, regions=regions, seed=0)
    assert list(pos[:2]) == [2, 4] and all(w.startswith("local") for w in why[:2])  # fastest of each, in turn
    assert set(pos[2:]) == {0, 6} and all(w.startswith("thompson") for w in why[2:])
    pos, _ = select_batch(S, 1e-3, 1.0, batch=4, explore=0.0, local=0.5, regions=regions, rotation=1, seed=0)
    assert list(pos[:2]) == [4, 2]
    pos, why = select_batch(S, 1e-3, 1.0, batch=6, explore=0.0, local=1.0, regions=regions, seed=0)
    assert set(pos[:4]) == {2, 3, 4, 5} and why[4].startswith("thompson")  # regions exhausted: global picks
