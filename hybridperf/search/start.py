"""The measure-next loop's start: how many configurations first, and which (prior's best + space-filling)."""
from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from hybridperf.errors import HybridperfError
from hybridperf.search.prior import Prior

__all__ = ["batch_size", "initial_design", "start_size"]

_MAXIMIN_POOL = 3000  # candidates the space-filling step considers (a random subset beyond)
START_BEST = 0.5  # share of the start that is the prior's best predicted
START_GLOBAL = 0.25   # share that fills the whole space (the rest fills the prior's best 5%)


def start_size(budget: int | None, informative: bool = True) -> int:
    """Configurations measured before the first fit: about 12% of the budget (16% without an
    informative prior, which has more to learn), at least 3 and at most 16. No budget: 8."""
    if budget is None:
        return 8
    if budget < 1:
        raise HybridperfError(f"budget must be >= 1, got {budget}")
    share = 0.12 if informative else 0.16
    return int(min(max(round(share * budget), 3), 16, budget))


def batch_size(budget: int | None) -> int:
    """Configurations per refit: a tenth of the budget, 2 to 8 (small budgets refit more often). No budget: 8."""
    return 8 if budget is None else int(min(max(round(budget / 10), 2), 8))


def _maximin(coords: npt.NDArray[np.float64], pool: npt.NDArray[np.int64], start: list[int], n: int,
             rng: np.random.Generator) -> list[int]:
    """Greedy farthest-point picks from ``pool`` (given ``start``), ties broken at random."""
    if pool.size > _MAXIMIN_POOL:
        pool = rng.choice(pool, _MAXIMIN_POOL, replace=False)
    pool = np.setdiff1d(pool, start)
    chosen = list(start)
    if not chosen and pool.size:
        chosen.append(int(rng.choice(pool)))
        pool = pool[pool != chosen[0]]
    if pool.size == 0:
        return chosen
    d = np.min(np.abs(coords[pool][:, None, :] - coords[chosen][None, :, :]).sum(axis=2), axis=1)
    while len(chosen) < n and pool.size:
        k = int(np.argmax(d + 1e-9 * rng.random(d.size)))
        chosen.append(int(pool[k]))
        d = np.minimum(d, np.abs(coords[pool] - coords[pool[k]]).sum(axis=1))
        keep = np.arange(pool.size) != k
        pool, d = pool[keep], d[keep]
    return chosen


def initial_design(coords: npt.NDArray[np.float64], prior: Prior, candidates: npt.ArrayLike, n: int,
                   seed: int = 0) -> npt.NDArray[np.int64]:
    """The first ``n`` pool positions to measure, from ``candidates`` (unmeasured, feasible positions).

    With an informative prior: its ``ceil(n/2)`` best predicted configurations, then
    farthest-point (L1 on the pool's ``coords``) picks among its best ``max(10 n, 5%)``:
    the prior is trusted for where to look but not for the exact spot. Without one: farthest-point
    picks over the whole space (a random subset of 3,000 candidates when larger). Candidates the
    prior expects to fail (p_fail > 0.5) are skipped.
    """
    cand = np.asarray(candidates, dtype=np.int64)
    if prior.p_fail is not None:
        cand = cand[prior.p_fail[cand] <= 0.5]
    rng = np.random.default_rng(seed)
    n = min(n, cand.size)
    if n <= 0:
        return np.zeros(0, dtype=np.int64)
    if not prior.informative:
        return np.asarray(_maximin(coords, cand, [], n, rng), dtype=np.int64)
    v = prior.log_time[cand]
    order = cand[np.lexsort((rng.random(cand.size), np.where(np.isfinite(v), v, np.inf)))]
    best = [int(i) for i in order[: math.ceil(n * START_BEST)]]
    n_top = max(round(n * (1 - START_GLOBAL)), len(best))
    top = _maximin(coords, order[: max(10 * n, round(0.05 * cand.size))], best, n_top, rng)
    return np.asarray(_maximin(coords, cand, top, n, rng), dtype=np.int64)
