"""Acquisition for the measure-next loop: expected improvement, Thompson sampling and the stop rule."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.special import ndtr, ndtri

from hybridperf.arrays import FloatArray
from hybridperf.errors import HybridperfError

__all__ = ["StopDecision", "expected_improvement", "normal_quantile", "select_batch", "stop_rule"]


@dataclass(frozen=True, slots=True)
class StopDecision:
    """Whether measuring more is worth it.

    ``p_better`` is the estimated probability that some unmeasured configuration is faster than
    the best measured one by more than ``gain`` (relative); the rule stops when it is below the
    threshold. ``expected_gain`` = E[max(best - fastest unmeasured, 0)] / best under the same draws.
    """

    stop: bool
    p_better: float
    expected_gain: float
    reason: str


def expected_improvement(log_mu: npt.ArrayLike, sigma: npt.ArrayLike, best_ms: float) -> tuple[FloatArray, FloatArray]:
    """P(T < best) and E[max(best - T, 0)] for log-normal times T = exp(N(log_mu, sigma^2)).

    E[(b - T)+] = b Phi(d) - exp(mu + sigma^2 / 2) Phi(d - sigma), d = (ln b - mu) / sigma (the
    log-normal form of Jones et al.'s expected improvement, J. Global Optim. 1998). Units of
    ``best_ms``; ``best_ms = inf`` (nothing measured yet) gives P = 1 and an infinite gain.
    """
    mu = np.asarray(log_mu, dtype=np.float64)
    s = np.maximum(np.asarray(sigma, dtype=np.float64), 1e-9)
    if not np.isfinite(best_ms):
        return np.ones_like(mu), np.full_like(mu, np.inf)
    d = (np.log(best_ms) - mu) / s
    p = ndtr(d)
    ei = best_ms * p - np.exp(mu + s**2 / 2) * ndtr(d - s)
    return p, np.maximum(ei, 0.0)


def _draw_minima(surfaces: FloatArray, noise: float, draws: int, rng: np.random.Generator) -> FloatArray:
    """Minimum over candidates of ``draws`` sampled surfaces: a member (cycled) plus independent noise.

    Only candidates within 6 noise units of a member's minimum can be a draw's minimum (short of
    a 6-sigma draw), so the others are never sampled: the cost follows the contenders, not the space.
    """
    m = surfaces.shape[0]
    out = []
    for i, s in enumerate(surfaces):
        k = len(range(i, draws, m))  # draws of member i
        near = s[s <= s.min() + 6 * noise]
        out.append((near + noise * rng.standard_normal((k, near.size))).min(axis=1) if noise > 0 else
                   np.full(k, near.min()))
    return np.concatenate(out)


def stop_rule(surfaces: npt.ArrayLike, noise: float, best_ms: float, *, gain: float = 0.01,
              probability: float = 0.05, draws: int = 200, seed: int = 0) -> StopDecision:
    """Stop when P(an unmeasured configuration beats the best measured by more than ``gain``) < ``probability``.

    ``surfaces`` are the members' log-time predictions (members x unmeasured candidates, failures
    predicted by the classifier already left out): each draw takes a member and adds independent
    normal noise of scale ``noise`` per candidate (what a member misses on rows it did not see).
    The members carry the correlated part of the uncertainty (a whole region may be faster than
    thought), the noise the per-configuration part. NaN entries (infeasible) are ignored.
    """
    if not 0.0 < probability < 1.0 or gain < 0:
        raise HybridperfError(f"stop probability must be in (0, 1) and gain >= 0; got {probability}, {gain}")
    S = np.atleast_2d(np.asarray(surfaces, dtype=np.float64))
    S = S[:, np.all(np.isfinite(S), axis=0)]
    if S.shape[1] == 0:
        return StopDecision(True, 0.0, 0.0, "no unmeasured feasible candidate left")
    if not np.isfinite(best_ms):
        return StopDecision(False, 1.0, float("inf"), "nothing measured yet")
    mins = np.exp(_draw_minima(S, noise, draws, np.random.default_rng(seed)))
    p = float(np.mean(mins < best_ms / (1.0 + gain)))
    eg = float(np.mean(np.maximum(best_ms - mins, 0.0)) / best_ms)
    # The chance is compared with ``probability``; the expected gain is said after the verdict (it decides nothing).
    from hybridperf.learn.domain import percent_text

    what = f"P(a configuration > {percent_text(gain)} faster remains) = {percent_text(p, unlike=probability)}"
    gained = f"expected gain {eg:.2%}"
    if p < probability:
        return StopDecision(True, p, eg, f"{what} < {percent_text(probability)}: stop ({gained})")
    return StopDecision(False, p, eg, f"{what} >= {percent_text(probability)}: measure on ({gained})")


def _thompson(S: FloatArray, member: int, noise: float, allowed: npt.NDArray[np.bool_],
              rng: np.random.Generator) -> int:
    """The fastest allowed candidate on member ``member``'s surface plus independent noise."""
    score = S[member] + max(noise, 1e-6) * rng.standard_normal(S.shape[1])
    score[~allowed] = np.inf
    return int(np.argmin(score))


def select_batch(surfaces: npt.ArrayLike, noise: float, best_ms: float, *, batch: int = 8, explore: float = 0.25,
                 local: float = 0.0, regions: Sequence[npt.ArrayLike] = (), rotation: int = 0,
                 p_fail: npt.ArrayLike | None = None, seed: int = 0) -> tuple[npt.NDArray[np.int64], list[str]]:
    """Positions of the next batch: local and global Thompson samples over the members, then expected improvement.

    Of ``n = batch - round(explore * batch)`` Thompson samples (each draws a member, cycled in a
    random order, plus independent noise of scale ``noise``, and takes its fastest unpicked
    candidate), ``round(local * n)`` are restricted to one of the trust ``regions`` (candidate
    positions, e.g. the neighbourhoods of the fastest runs, :mod:`hybridperf.search.local`), the
    regions taken in turn from ``rotation`` on and skipped once exhausted: the batch exploits the
    neighbourhoods of what ran well, where the members are least likely to be wrong by much, and
    spreads the rest over the configurations some plausible surface calls best. The
    ``round(explore * batch)`` others maximise expected improvement over ``best_ms`` (mean and
    spread over the members, with ``noise`` added), times the chance of running (1 - ``p_fail``).
    Candidates with ``p_fail`` > 0.5 or NaN predictions (infeasible) are never picked.
    """
    if batch < 1 or not 0.0 <= explore <= 1.0 or not 0.0 <= local <= 1.0:
        raise HybridperfError(f"batch must be >= 1 and explore, local in [0, 1]; got batch={batch}, "
                              f"explore={explore}, local={local}")
    S = np.atleast_2d(np.asarray(surfaces, dtype=np.float64))
    pf = np.zeros(S.shape[1]) if p_fail is None else np.asarray(p_fail, dtype=np.float64)
    usable = np.all(np.isfinite(S), axis=0) & (pf <= 0.5)
    rng = np.random.default_rng(seed)
    n = min(batch, int(usable.sum()))
    n_explore = min(round(explore * batch), n)
    taken = ~usable
    chosen: list[int] = []
    why: list[str] = []
    order = rng.permutation(S.shape[0])
    masks = []
    for r in regions:
        m = np.zeros(S.shape[1], dtype=bool)
        m[np.asarray(r, dtype=np.int64)] = True
        masks.append(m)
    n_local = round(local * (n - n_explore)) if masks else 0
    for j in range(n - n_explore):
        live = [m & ~taken for m in masks if (m & ~taken).any()] if j < n_local else []
        allowed = live[(j + rotation) % len(live)] if live else ~taken
        pick = _thompson(S, order[j % len(order)], noise, allowed, rng)
        chosen.append(pick)
        taken[pick] = True
        why.append("local: fastest neighbour of a fast run on a sampled surface" if live else
                   "thompson: fastest on a sampled surface")
    if n_explore:
        mu = S.mean(axis=0)
        sd = np.sqrt(S.var(axis=0) + noise**2)
        _, ei = expected_improvement(mu, sd, best_ms)
        if not np.isfinite(best_ms):
            ei = sd - 1e-3 * (mu - np.nanmin(mu))
        score = ei * (1.0 - pf) + 1e-12 * rng.random(S.shape[1])  # random tie-break
        score[taken] = -np.inf
        pick = np.argsort(-score, kind="stable")[:n_explore]
        chosen += [int(p) for p in pick]
        why += ["explore: largest expected improvement"] * len(pick)
    return np.asarray(chosen, dtype=np.int64), why


def normal_quantile(coverage: float) -> float:
    """z such that a normal variable lies within +-z sigma with probability ``coverage``."""
    return float(ndtri(0.5 + coverage / 2))
