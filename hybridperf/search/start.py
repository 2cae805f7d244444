"""The measure-next loop's start: how many configurations first, and which (prior's best + space-filling)."""
from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from hybridperf.errors import HybridperfError
from hybridperf.search.acquisition import normal_quantile
from hybridperf.search.prior import Prior

__all__ = ["batch_size", "initial_design", "prior_ties", "start_size"]

_MAXIMIN_POOL = 3000  # candidates the space-filling step considers (a random subset beyond)
START_BEST = 0.5  # share of the start that is the prior's best predicted
START_GLOBAL = 0.25   # share that fills the whole space (the rest fills the prior's plausible best)


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


def _thompson_best(prior: Prior, order: npt.NDArray[np.int64], k: int, rng: np.random.Generator) -> list[int]:
    """``k`` picks, each the fastest of one draw from the prior's predictive distribution (normal in log
    space, ``log_sigma`` per row) among those not yet picked: the prior's best ``k`` (``order[:k]``) when
    its intervals are narrow or unknown, spread over the rows whose intervals reach as low when wide."""
    if prior.log_sigma is None:
        return [int(i) for i in order[:k]]
    mu, s = prior.log_time[order], np.nan_to_num(prior.log_sigma[order], nan=0.0)
    free = np.isfinite(mu)
    out: list[int] = []
    for _ in range(min(k, int(free.sum()))):
        draw = np.where(free, mu + s * rng.standard_normal(mu.size), np.inf)
        j = int(np.argmin(draw))
        out.append(int(order[j]))
        free[j] = False
    return out


def prior_ties(prior: Prior, candidates: npt.NDArray[np.int64], coverage: float = 0.9
               ) -> npt.NDArray[np.int64] | None:
    """The candidates the prior cannot tell from its best: their ``coverage`` interval (from
    ``prior.log_sigma``) overlaps the interval of the candidate with the best predicted time. Without
    intervals (``log_sigma`` None or NaN), the prior's best ``max(10 n, 5%)`` stand in (see
    :func:`initial_design`); this returns None then."""
    if prior.log_sigma is None:
        return None
    mu, s = prior.log_time[candidates], prior.log_sigma[candidates]
    ok = np.isfinite(mu) & np.isfinite(s)
    if not ok.any():
        return None
    z = normal_quantile(coverage)
    b = int(np.argmin(np.where(ok, mu, np.inf)))
    return candidates[ok & (mu - z * s <= mu[b] + z * s[b])]


def initial_design(coords: npt.NDArray[np.float64], prior: Prior, candidates: npt.ArrayLike, n: int,
                   seed: int = 0) -> tuple[npt.NDArray[np.int64], list[str]]:
    """The first ``n`` pool positions to measure, from ``candidates`` (unmeasured, feasible positions), and why.

    With an informative prior: ``ceil(n/2)`` Thompson draws from the prior (each the fastest of one
    draw from its predictive distribution, :func:`_thompson_best`: where it has intervals, narrow ones
    give its best predicted configurations, exploit, and wide ones spread the draws, explore), then
    farthest-point picks (L1 on the pool's ``coords``) within the prior's *plausible best* up to
    ``round(3n/4)`` in all, then farthest-point picks over the whole space (explore). The plausible
    best are, where the prior has intervals (``log_sigma``, e.g. a trained model's), the candidates
    whose 90% interval overlaps that of the best predicted (:func:`prior_ties`): narrow intervals
    keep the start on the prior's best, wide ones (out of the model's domain) spread it. Without
    intervals they are the prior's best ``max(10 n, 5%)``: the prior is trusted for where to look,
    not for the exact spot. Without a prior: farthest-point picks over the whole space (a random
    subset of 3,000 candidates when larger). Candidates the prior expects to fail (p_fail > 0.5)
    are skipped.
    """
    cand = np.asarray(candidates, dtype=np.int64)
    if prior.p_fail is not None:
        cand = cand[prior.p_fail[cand] <= 0.5]
    rng = np.random.default_rng(seed)
    n = min(n, cand.size)
    if n <= 0:
        return np.zeros(0, dtype=np.int64), []
    if not prior.informative:
        picks = _maximin(coords, cand, [], n, rng)
        return np.asarray(picks, dtype=np.int64), ["start: space-filling (no prior)"] * len(picks)
    v = prior.log_time[cand]
    order = cand[np.lexsort((rng.random(cand.size), np.where(np.isfinite(v), v, np.inf)))]
    best = _thompson_best(prior, order, math.ceil(n * START_BEST), rng)
    n_top = max(round(n * (1 - START_GLOBAL)), len(best))
    ties = prior_ties(prior, cand)
    plausible = order[: max(10 * n, round(0.05 * cand.size))] if ties is None else ties
    top = _maximin(coords, plausible, best, n_top, rng)
    picks = _maximin(coords, cand, top, n, rng)
    region = "interval overlaps the prior's best" if ties is not None else "among the prior's best 5%"
    first = "the prior's best predicted (exploit)" if prior.log_sigma is None else \
        "fastest on a draw from the prior's intervals"
    why = [f"start: {first}"] * len(best) + \
        [f"start: spread over the plausible best ({region}; explore)"] * (len(top) - len(best)) + \
        ["start: space-filling over the whole space (explore)"] * (len(picks) - len(top))
    return np.asarray(picks, dtype=np.int64), why
