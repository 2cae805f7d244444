"""Acquisition for the measure-next loop: expected improvement, batch selection and the stop rule."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.special import ndtr, ndtri

from hybridperf.arrays import FloatArray
from hybridperf.errors import HybridperfError

__all__ = ["StopDecision", "expected_improvement", "normal_quantile", "select_batch", "should_stop"]


@dataclass(frozen=True, slots=True)
class StopDecision:
    """Whether measuring more is worth it: the best candidate's expected gain against a threshold.

    ``expected_gain`` = E[max(best - fastest unmeasured, 0)] / best = P(improvement) x the mean
    improvement given one, relative to the best measured time; ``p_improve`` = P(improvement).
    """

    stop: bool
    expected_gain: float
    p_improve: float
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


def should_stop(log_mu: npt.ArrayLike, sigma: npt.ArrayLike, best_ms: float, *, threshold: float = 0.005,
                n_measured: int = 0, budget: int | None = None, top: int = 2000, draws: int = 256,
                seed: int = 0) -> StopDecision:
    """Stop when the expected relative gain of measuring on falls below ``threshold``, or at the budget.

    The gain is E[max(best - min_i T_i, 0)] / best over the unmeasured candidates, i.e. P(some
    candidate beats the best) x the mean improvement when one does: estimated by ``draws``
    Monte Carlo draws over the ``top`` candidates with the largest single expected improvement,
    treating candidates as independent (optimistic, so the rule errs towards measuring more;
    one candidate's expected improvement alone badly understates it in large spaces).
    """
    mu = np.asarray(log_mu, dtype=np.float64)
    s = np.broadcast_to(np.asarray(sigma, dtype=np.float64), mu.shape)
    ok = np.isfinite(mu)
    if budget is not None and n_measured >= budget:
        return StopDecision(True, float("nan"), float("nan"), f"budget of {budget} measurements spent")
    if not ok.any():
        return StopDecision(True, 0.0, 0.0, "no unmeasured feasible candidate left")
    if not np.isfinite(best_ms):
        return StopDecision(False, float("inf"), 1.0, "nothing measured yet")
    _, ei = expected_improvement(mu[ok], s[ok], best_ms)
    pick = np.argsort(-ei, kind="stable")[:top]
    z = np.random.default_rng(seed).standard_normal((draws, pick.size))
    fastest = np.exp(mu[ok][pick] + s[ok][pick] * z).min(axis=1)
    gain = float(np.mean(np.maximum(best_ms - fastest, 0.0)) / best_ms)
    p_any = float(np.mean(fastest < best_ms))
    if gain < threshold:
        return StopDecision(True, gain, p_any, f"expected gain {gain:.2%} is below {threshold:.2%} of the best "
                                               f"measured time (P(improvement) {p_any:.0%})")
    return StopDecision(False, gain, p_any, f"expected gain {gain:.2%} >= {threshold:.2%}")


def select_batch(log_mu: npt.ArrayLike, sigma: npt.ArrayLike, best_ms: float, *, batch: int = 8,
                 explore: float = 0.25, seed: int = 0) -> tuple[npt.NDArray[np.int64], list[str]]:
    """Positions of the next batch: the fastest predicted, then the largest expected improvement.

    ``batch - round(explore * batch)`` picks exploit (lowest predicted time); the rest explore
    (highest E[max(best - T, 0)]: a wide interval below the best measured time counts more than
    a narrow one just above it). Exact ties are broken at random (``seed``) so that clusters of
    configurations the model cannot tell apart are sampled rather than swept in index order.
    NaN predictions (infeasible candidates) are never picked.
    """
    if batch < 1 or not 0.0 <= explore <= 1.0:
        raise HybridperfError(f"batch must be >= 1 and explore in [0, 1]; got batch={batch}, explore={explore}")
    mu = np.asarray(log_mu, dtype=np.float64)
    s = np.broadcast_to(np.asarray(sigma, dtype=np.float64), mu.shape)
    rng = np.random.default_rng(seed)
    shuffle = rng.permutation(len(mu))
    finite = np.isfinite(mu[shuffle])
    order = shuffle[finite][np.argsort(mu[shuffle][finite], kind="stable")]
    n_explore = round(explore * batch)
    chosen = list(order[: max(batch - n_explore, 0)])
    why = ["exploit: fastest predicted"] * len(chosen)
    rest = np.setdiff1d(order, chosen, assume_unique=True)
    if n_explore and rest.size:
        _, ei = expected_improvement(mu[rest], s[rest], best_ms)
        if not np.isfinite(best_ms):  # nothing measured: prefer the widest intervals among the fastest
            ei = s[rest] - 1e-3 * (mu[rest] - mu[rest].min())
        pick = rest[np.argsort(-ei, kind="stable")[:n_explore]]
        chosen += list(pick)
        why += ["explore: largest expected improvement"] * len(pick)
    return np.asarray(chosen, dtype=np.int64), why


def normal_quantile(coverage: float) -> float:
    """z such that a normal variable lies within +-z sigma with probability ``coverage``."""
    return float(ndtri(0.5 + coverage / 2))
