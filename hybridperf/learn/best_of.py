"""The chance that the fastest of n configurations is among the predicted-fastest k, for a model of given accuracy."""
# The model: over a space, the measured and the predicted order of the configurations are those of a bivariate
# normal pair with correlation rho (a Gaussian copula: only ranks matter). The fastest configuration is the maximum
# z_(n) of n standard normals; its prediction is rho z_(n) + s e (s = sqrt(1 - rho^2)), the concomitant of the
# largest order statistic (David & Nagaraja, Order Statistics, 3rd ed., 2003, Sec. 6.8). Given (z_(n), e), each
# other configuration, a normal conditioned below z_(n), is predicted faster with probability
# q = P(Z < z_(n), W > p) / Phi(z_(n)) for (Z, W) standard bivariate normal with correlation rho, which Owen's T
# function gives in closed form (Owen 1956, Ann. Math. Statist. 27(4), Eq. 2.1 / 3.1); the number predicted faster
# is Binomial(n - 1, q) and the fastest is kept when that number is below k. The expectation over z_(n) (its
# quantiles u^(1/n)) and e (a grid of 265 points) is a fixed quadrature: within Monte Carlo noise of brute-force
# simulation and exact at n = 2 (1/2 + arcsin(rho) / pi) (tests/learn/test_best_of.py); at rho = 0, k / n within
# 0.002 up to n = 10^7 (the grid's step in e limits a Binomial this sharp).
#
# Why: the held-out curve (:mod:`hybridperf.learn.shortlist`) measures the hit rate on halves of tens to hundreds
# of training runs, and `rank` states it for spaces of thousands; the fastest of a larger space lies further in
# the tail, where even a rough order finds it, so the halves' rate stated as is erred low (0.716 stated against
# 0.891 kept over 55 ranking cases, a Brier score worse than the base rate's). A correlation fitted to the halves'
# rates (:func:`fit_order_correlation`) carries the rate to the space's size (experiments/results/shortlist_odds.md).
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import optimize, special, stats

__all__ = ["RHO_RANGE", "best_in_top_k", "fit_order_correlation"]

RHO_RANGE = (-0.9, 0.999)  # a perfect order (rho = 1) is a step the quadrature cannot hold
_U = 48  # quantiles of the maximum
_E = np.linspace(-5.0, 6.0, 265)  # the fastest's prediction error (beyond: under 3e-7 of its weight)
_E_W = stats.norm.pdf(_E) / stats.norm.pdf(_E).sum()


def _bivariate_cdf(h: np.ndarray, k: np.ndarray, rho: float) -> np.ndarray:
    """P(Z <= h, W <= k) for standard normals of correlation ``rho`` (|rho| < 1), by Owen's T function."""
    h = np.where(h == 0, 1e-12, h)
    k = np.where(k == 0, 1e-12, k)
    s = np.sqrt(1.0 - rho * rho)
    both = special.owens_t(h, (k - rho * h) / (h * s)) + special.owens_t(k, (h - rho * k) / (k * s))
    return 0.5 * (special.ndtr(h) + special.ndtr(k)) - both - np.where(h * k < 0, 0.5, 0.0)


def best_in_top_k(rho: float, n: int, k: int | Sequence[int] | np.ndarray) -> np.ndarray:
    """P(the fastest of ``n`` configurations is among the predicted-fastest ``k``) for each ``k``, when measured and
    predicted order correlate as a bivariate normal with correlation ``rho`` (clipped to :data:`RHO_RANGE`)."""
    kk = np.atleast_1d(np.asarray(k, dtype=np.float64))
    n = int(n)
    if not 1 <= n < 2**31:  # scipy's bdtr takes a C int
        raise ValueError(f"n must be at least 1 and below 2^31, got {n}")
    rho = float(np.clip(rho, *RHO_RANGE))
    s = np.sqrt(1.0 - rho * rho)
    u = (np.arange(_U) + 0.5) / _U
    zb = -special.ndtri(-np.expm1(np.log(u) / n))[:, None]  # quantiles of the maximum of n standard normals
    pb = rho * zb + s * _E[None, :]  # (U, E): the fastest's prediction
    # P(Z < zb, W > pb) = P(W > pb) - P(Z > zb, W > pb), the second by symmetry a lower-left corner.
    faster = special.ndtr(-pb) - _bivariate_cdf(-zb, -pb, rho)
    q = np.clip(faster / special.ndtr(zb), 0.0, 1.0)
    kept = special.bdtr(kk[None, None, :] - 1, n - 1, q[:, :, None])  # fewer than k predicted faster
    out = np.tensordot(np.full(_U, 1.0 / _U)[:, None] * _E_W[None, :], kept, axes=([0, 1], [0, 1]))
    return np.where(kk >= n, 1.0, np.where(kk < 1, 0.0, np.clip(out, 0.0, 1.0)))


def fit_order_correlation(samples: Sequence[tuple[int, np.ndarray, np.ndarray, float]]) -> float:
    """The ``rho`` whose :func:`best_in_top_k` best matches measured hit rates: ``samples`` of ``(m, k, rate,
    weight)``, a pool of ``m`` runs, the predicted-fastest counts ``k`` and the share of draws whose fastest run was
    among them (least squares, weighted; within :data:`RHO_RANGE`)."""
    parts = [(int(m), np.asarray(k, dtype=np.float64), np.asarray(r, dtype=np.float64), float(w))
             for m, k, r, w in samples if len(k)]
    if not parts:
        raise ValueError("no hit rates to fit")
    for m, k, r, w in parts:
        if not (m >= 1 and len(k) == len(r) and np.all(np.isfinite(k) & np.isfinite(r)) and np.all((r >= 0) & (r <= 1))
                and np.isfinite(w) and w > 0):
            raise ValueError(f"hit rates must be finite shares in [0, 1], one per k, with a positive finite weight: "
                             f"got m={m}, k={k.tolist()}, rates={r.tolist()}, weight={w}")

    def loss(rho: float) -> float:
        return sum(w * float(np.sum((best_in_top_k(rho, m, k) - r) ** 2)) for m, k, r, w in parts)

    # A coarse grid first (the loss need not have one minimum), then the best grid point's neighbourhood.
    grid = np.linspace(*RHO_RANGE, 8)
    i = int(np.argmin([loss(r) for r in grid]))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    res = optimize.minimize_scalar(loss, bounds=(lo, hi), method="bounded", options={"xatol": 3e-3})
    return float(res.x) if res.fun <= loss(grid[i]) else float(grid[i])
