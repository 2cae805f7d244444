"""Trust regions for the measure-next loop: the neighbourhoods of the fastest runs of distinct basins."""
from __future__ import annotations

import numpy as np
import numpy.typing as npt

from hybridperf.arrays import FloatArray

__all__ = ["hamming_neighbours", "niche_incumbents", "trust_regions"]

# Kernel Tuner's strongest strategies on recorded spaces are local and tabu searches: a configuration that differs
# from a fast one in a single parameter is often fast too. The loop keeps a share of each batch in such
# neighbourhoods (chosen there by the members' Thompson draws), which holds when the members are wrong about the
# space as a whole, and spreads them over distinct basins (incumbents several parameters apart) so that one plateau
# cannot take every local pick.


def _distance(coords: FloatArray, rows: npt.NDArray[np.int64], centre: int) -> npt.NDArray[np.int64]:
    """Parameters in which each of ``rows`` differs from row ``centre`` (``coords``: one column per parameter)."""
    return (coords[rows] != coords[centre]).sum(axis=1)


def hamming_neighbours(coords: FloatArray, centre: int, candidates: npt.NDArray[np.int64],
                       radius: int = 1) -> npt.NDArray[np.int64]:
    """Positions into ``candidates`` of the pool rows that differ from row ``centre`` in 1 to ``radius``
    parameters (any values: a parameter's neighbours are all its values, as in Kernel Tuner's Hamming
    neighbourhood)."""
    d = _distance(coords, np.asarray(candidates, dtype=np.int64), centre)
    return np.flatnonzero((d >= 1) & (d <= radius))


def niche_incumbents(coords: FloatArray, measured: npt.ArrayLike, log_time: npt.ArrayLike, k: int = 3,
                     separation: int = 3) -> npt.NDArray[np.int64]:
    """Up to ``k`` measured rows, fastest first, each differing from every faster one chosen in at least
    ``separation`` parameters: the best run of each of the best distinct basins. Failed runs (NaN
    ``log_time``) never count."""
    idx = np.asarray(measured, dtype=np.int64)
    y = np.asarray(log_time, dtype=np.float64)
    ran = np.isfinite(y)
    chosen: list[int] = []
    for r in idx[ran][np.argsort(y[ran], kind="stable")]:
        if not chosen or _distance(coords, np.asarray(chosen), int(r)).min() >= separation:
            chosen.append(int(r))
            if len(chosen) == k:
                break
    return np.asarray(chosen, dtype=np.int64)


def trust_regions(coords: FloatArray, centres: npt.ArrayLike, candidates: npt.ArrayLike,
                  radius: int = 1) -> list[npt.NDArray[np.int64]]:
    """Per centre, the positions into ``candidates`` within ``radius`` parameters of it; where none is left
    (every neighbour measured or infeasible) the radius grows until some are. Centres with no candidate at
    any radius are left out."""
    cand = np.asarray(candidates, dtype=np.int64)
    out = []
    for c in np.asarray(centres, dtype=np.int64):
        d = _distance(coords, cand, int(c))
        d = d[d >= 1]
        if d.size:
            out.append(hamming_neighbours(coords, int(c), cand, max(radius, int(d.min()))))
    return out
