"""How often a model's predicted-fastest share of configurations holds the truly fastest one, on held-out runs."""
# Why not from the prediction intervals: taking each configuration's interval as an independent error (the
# product's first method) stated a 0.1-20 % chance that the fastest configuration was kept where it was kept in
# 97 % of the cases, and 99 % where it was kept in 68 % (11 recorded sweeps x 5 seeds, a model trained on 1 % of
# each; experiments/results/shortlist_odds.md). A model's errors on neighbouring configurations are not
# independent: thousands of dropped configurations each with a small chance of beating the shortlist do not add up
# as independent chances do; and an interval calibrated for one configuration's time says little about whether the
# model orders the fastest few correctly.
#
# Instead, at training time, within each (kernel, GPU, sizes) group of training runs: the runs' out-of-fold
# predictions (each predicted by a fit that did not see it, :meth:`HybridRegressor.held_out_log_predict`'s random
# folds) rank random halves of the group as ``rank`` ranks a space, and a hit is the half's measured-fastest run
# being among the predicted-fastest ``k = floor(f x m)`` of its ``m`` runs. At each fraction ``f`` of
# :data:`FRACTIONS` the hit rate, averaged over the kernel's groups (each counted once, only where ``k >= 1``: a
# share finer than one run of a half is not measured), is the curve's ``p``, and the share those groups measured,
# the mean of their ``k / m``, its ``q``: :func:`hit_probability` reads the curve at the shortlist's share of the
# feasible configurations. (``q`` was ``f`` itself, a share at least as large as any group measured: then a
# shortlist of 10 among 108, rank's default fill, was "finer than the runs resolve" where halves of 15 runs had
# measured 1 in 15.) It says how the model did on
# runs like the user's (same kernel, a GPU and size it trained on); the fits that made the out-of-fold predictions
# saw four fifths of the runs, and a half holds fewer, less extreme configurations than the space, both of which
# make the curve err low: read as is at the space's share it stated 0.716 where 0.891 happened. The curve's ``rho``
# (:mod:`hybridperf.learn.best_of`), fitted to the halves' rates at their own sizes, carries them to the space's
# size instead: 0.936 stated where 0.891 happened, a Brier score of 0.086 against 0.143 (55 ranking cases).
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from hybridperf.learn.best_of import best_in_top_k, fit_order_correlation

__all__ = ["FRACTIONS", "MIN_GROUP_RUNS", "held_out_hit_curves", "hit_probability"]

# Shares of a group's configurations the curves are measured at.
FRACTIONS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5)
# Groups with fewer held-out runs do not count (a half of them would hold at most 4).
MIN_GROUP_RUNS = 10
_HALVES = 200  # random halves per group
_MAX_GROUP_RUNS = 4000
_MAX_POOLS = 6  # distinct half sizes fitted exactly (see _order_correlation)


def held_out_hit_curves(rows: pd.DataFrame, held_out_log_pred: np.ndarray, log_y: np.ndarray,
                        random_state: int = 0, correlation: bool = True) -> dict[str, dict[str, Any]]:
    """Per kernel of ``rows`` (training rows with ``kernel``, ``gpu`` and ``size.*`` columns): ``{"q": shares,
    "p": hit rates, "groups": groups measured at each share, "rho": the order correlation fitted to the groups'
    rates}`` at the fractions of :data:`FRACTIONS` that at least one group resolves, ``q`` the mean share those
    groups measured there (see the module docstring); kernels without a group of :data:`MIN_GROUP_RUNS` runs are
    absent. ``correlation=False`` leaves ``rho`` out (0.2-2.5 s a kernel: :func:`_order_correlation`)."""
    pred = np.asarray(held_out_log_pred, dtype=np.float64)
    logy = np.asarray(log_y, dtype=np.float64)
    ok = np.isfinite(pred) & np.isfinite(logy)
    rows = rows.reset_index(drop=True)
    keys = ["kernel", "gpu", *sorted(c for c in rows.columns if str(c).startswith("size."))]
    # dropna=False: rows of several kernels hold NaN in each other's size columns.
    codes = rows[keys].groupby(keys, sort=False, dropna=False).ngroup().to_numpy()
    codes = np.where(ok, codes, -1)
    kernel = rows["kernel"].astype(str).to_numpy()
    rng = np.random.default_rng(random_state)
    fractions = np.asarray(FRACTIONS)
    hits: dict[str, list[tuple[int, np.ndarray]]] = {}  # per kernel, per group: (runs in a half, rates)
    counts = np.bincount(codes[codes >= 0]) if (codes >= 0).any() else np.zeros(0, dtype=np.int64)
    big = np.flatnonzero(counts >= MIN_GROUP_RUNS)
    in_big = np.isin(codes, big)
    members = pd.Series(np.flatnonzero(in_big)).groupby(codes[in_big])
    for _, positions in members:
        idx = positions.to_numpy()
        if len(idx) > _MAX_GROUP_RUNS:  # bounded memory; halves of 2,000 still resolve the finest share
            idx = np.sort(rng.choice(idx, _MAX_GROUP_RUNS, replace=False))
        m = len(idx) // 2
        # Each row of `halves` is one random half of the group: positions into idx.
        halves = np.argsort(rng.random((_HALVES, len(idx))), axis=1)[:, :m]
        p, y = pred[idx][halves], logy[idx][halves]
        order = np.argsort(p, axis=1, kind="stable")
        best = np.argmin(y, axis=1)  # position (in the half) of the half's measured-fastest run
        rank_of_best = np.argmax(order == best[:, None], axis=1)  # 0 = predicted fastest
        k = np.floor(fractions * m).astype(int)
        rate = np.where(k >= 1, (rank_of_best[:, None] < k[None, :]).mean(axis=0), np.nan)
        hits.setdefault(kernel[idx[0]], []).append((m, rate))
    out: dict[str, dict[str, Any]] = {}
    for name, parts in hits.items():
        r = np.vstack([rate for _, rate in parts])
        n = np.isfinite(r).sum(axis=0)
        keep = n > 0
        if keep.any():
            mean = np.nanmean(r[:, keep], axis=0)
            # Increasing: a group's k / m grows with f (each f at least doubles the one before it, so k does once it
            # is 1), and a group first counted at f measured 1 / m > the fraction before it, which bounds every
            # share measured there.
            measured = [np.where(np.isfinite(rate), np.floor(fractions * m) / m, np.nan) for m, rate in parts]
            share = np.nanmean(np.vstack(measured)[:, keep], axis=0)
            out[name] = {"q": share.tolist(), "p": np.maximum.accumulate(mean).tolist(),
                         "groups": n[keep].astype(float).tolist()}
            if correlation:
                out[name]["rho"] = _order_correlation(parts)
    return out


def _order_correlation(pools: list[tuple[int, np.ndarray]]) -> float:
    """The order correlation (:func:`hybridperf.learn.best_of.fit_order_correlation`) of a kernel's groups: each
    group's halves of ``m`` runs and hit rates at :data:`FRACTIONS`. Groups of the same ``m`` pool; past
    :data:`_MAX_POOLS` distinct sizes, groups pool in :data:`_MAX_POOLS` bins of log ``m`` (at their median ``m``),
    so that the fit's cost stays bounded (0.2-0.4 s a pool). Each group weighs once: a pool's weight, its groups,
    is shared among the shares it resolves (halves of 2,000 resolve 9, halves of 5 two)."""
    fractions = np.asarray(FRACTIONS)
    sizes = np.array([m for m, _ in pools], dtype=np.float64)
    if len(np.unique(sizes)) <= _MAX_POOLS:
        keys = sizes.astype(np.int64)
    else:
        edges = np.geomspace(sizes.min(), sizes.max(), _MAX_POOLS + 1)
        keys = np.clip(np.searchsorted(edges, sizes, side="right") - 1, 0, _MAX_POOLS - 1)
    samples = []
    for key in np.unique(keys):
        members = [pools[i] for i in np.flatnonzero(keys == key)]
        m = int(np.median([mm for mm, _ in members]))
        stack = np.vstack([r for _, r in members])
        seen = np.isfinite(stack).sum(axis=0)
        rate = np.where(seen > 0, np.where(np.isfinite(stack), stack, 0.0).sum(axis=0) / np.maximum(seen, 1), np.nan)
        k = np.floor(fractions * m)
        use = (k >= 1) & np.isfinite(rate)
        if use.any():
            samples.append((m, k[use], rate[use], len(members) / int(use.sum())))
    return round(fit_order_correlation(samples), 4)


def hit_probability(curve: Mapping[str, Any] | None, share: float, pool: int | None = None) -> float:
    """The curve's chance that the fastest configuration is among the predicted-fastest ``share`` of a space of
    ``pool`` configurations: with the curve's order correlation ``rho`` and a ``pool``, the fastest of ``pool``
    among its predicted-fastest ``round(share x pool)`` (:func:`hybridperf.learn.best_of.best_in_top_k`); else (a
    model file from before ``rho``) the curve as measured, interpolated in log share between measured shares, rising
    linearly to 1 at share 1. NaN below the finest measured share (the held-out runs cannot resolve it: there the
    correlation's normal tails promised 0.61-0.77 at 0.2-1 % of the space where 0.27-0.45 happened, 55 ranking
    cases, experiments/results/shortlist_odds.md) or without a curve."""
    if curve is None or not np.isfinite(share) or share <= 0:
        return float("nan")
    if share >= 1:
        return 1.0
    q = np.asarray(curve["q"], dtype=np.float64)
    p = np.asarray(curve["p"], dtype=np.float64)
    if not len(q) or share < q[0] * (1 - 1e-9):
        return float("nan")
    if curve.get("rho") is not None and pool is not None and pool >= 1:
        return float(best_in_top_k(float(curve["rho"]), int(pool), max(1, round(share * pool)))[0])
    if share >= q[-1]:
        return float(p[-1] + (1.0 - p[-1]) * (share - q[-1]) / (1.0 - q[-1]))
    return float(np.interp(np.log(share), np.log(q), p))
