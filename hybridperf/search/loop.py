"""The measure-next loop's step: from what is measured and a prior, the next batch and the stop estimate."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from hybridperf.arrays import FloatArray
from hybridperf.errors import HybridperfError
from hybridperf.search.acquisition import StopDecision, select_batch, stop_rule
from hybridperf.search.ensemble import FeaturePool, fit_bag
from hybridperf.search.local import niche_incumbents, trust_regions
from hybridperf.search.prior import Prior
from hybridperf.search.start import batch_size, initial_design, start_size

__all__ = ["LoopOptions", "Step", "failure_probability", "next_batch", "prior_offset", "prospective_error"]

# Per-candidate noise, as a multiple of the members' out-of-bag spread: Thompson sampling's tie-breaker, and the
# stop rule's independent part. 1.0 for the stop rule: on replays of the 10 Kernel Tuner caches (10 seeds, budget
# 50) 0.5 left a better configuration at 4% of the P < 5% decisions with a transfer prior but at 33% without a
# prior; 1.0 left none in either (experiments/results/tuner_vs_kernel_tuner.md has the calibration tables).
THOMPSON_NOISE = 0.25
STOP_NOISE = 1.0
FREE_SHARE = 0.2  # members that ignore the prior's offset (see _surfaces) ...
FREE_MAX = 0.6  # ... rising to this share when the best has not improved for FREE_STALL_BATCHES batches
FREE_STALL_BATCHES = 2.0
FREE_BLIND = True  # free members do not even see the prior as a feature
# Local picks come from the neighbourhoods (one parameter changed) of up to LOCAL_CENTRES fast runs, each at least
# LOCAL_SEPARATION parameters away from the faster ones (the best of distinct basins; see hybridperf.search.local).
LOCAL_CENTRES = 3
LOCAL_SEPARATION = 3


@dataclass(frozen=True, slots=True)
class LoopOptions:
    """The loop's settings.

    batch, start : configurations per refit and before the first fit (None: scaled to the budget,
        see :func:`hybridperf.search.start.batch_size` and :func:`~hybridperf.search.start.start_size`).
    explore : share of each batch chosen by expected improvement; the rest are Thompson samples.
    local : share of the Thompson samples taken from the neighbourhoods of the fastest runs
        (configurations that differ from one in a single parameter; see
        :func:`hybridperf.search.acquisition.select_batch`).
    members : bagged boosters (the surfaces Thompson sampling and the stop rule draw from).
    stop_probability, stop_gain : stop when P(a configuration more than ``stop_gain`` faster than
        the best measured remains) < ``stop_probability``.
    """

    batch: int | None = None
    start: int | None = None
    explore: float = 0.25
    local: float = 0.5
    members: int = 5
    stop_probability: float = 0.05
    stop_gain: float = 0.01

    def __post_init__(self) -> None:
        bad = [f"{k}={v}" for k, v in (("batch", self.batch), ("start", self.start)) if v is not None and v < 1]
        if bad or self.members < 1 or not 0.0 <= self.explore <= 1.0 or not 0.0 <= self.local <= 1.0:
            raise HybridperfError(f"loop options out of range ({', '.join(bad) or 'members/explore/local'}): batch "
                                  f"and start >= 1, members >= 1 (got {self.members}), explore and local in [0, 1] "
                                  f"(got {self.explore}, {self.local})")
        if not 0.0 < self.stop_probability < 1.0 or self.stop_gain < 0:
            raise HybridperfError(f"stop probability must be in (0, 1) and stop gain >= 0; got "
                                  f"{self.stop_probability}, {self.stop_gain}")

    def batch_for(self, budget: int | None) -> int:
        return self.batch or batch_size(budget)

    def start_for(self, budget: int | None, informative: bool) -> int:
        return self.start or start_size(budget, informative)


@dataclass(frozen=True, slots=True)
class Step:
    """The next batch (pool positions, why each) and, once the loop has fitted a model, its predictions
    for them (``log_mu``, ``log_sigma``, ``p_fail``) and the stop decision (None during the start)."""

    positions: npt.NDArray[np.int64]
    why: list[str]
    stop: StopDecision | None
    log_mu: FloatArray = field(repr=False)
    log_sigma: FloatArray = field(repr=False)
    p_fail: FloatArray = field(repr=False)


def prior_offset(prior: Prior, idx: npt.NDArray[np.int64], y: FloatArray, pseudo_rows: float = 2.0) -> float:
    """Scale b of the prior on this GPU: least squares of the measured log times ``y`` (pool rows ``idx``) on
    the prior's, shrunk towards 1 with the weight of ``pseudo_rows`` rows, clipped to [0, 2]."""
    p = prior.log_time[idx]
    ok = np.isfinite(p) & np.isfinite(y)
    if not prior.informative or ok.sum() < 2:
        return 1.0 if prior.informative else 0.0
    v = prior.log_time[np.isfinite(prior.log_time)]
    s2 = float(np.var(v)) * pseudo_rows
    pc, yc = p[ok] - p[ok].mean(), y[ok] - y[ok].mean()
    return float(np.clip((pc @ yc + s2) / (pc @ pc + s2), 0.0, 2.0))


def failure_probability(pool: FeaturePool, prior: Prior, idx: npt.NDArray[np.int64], failed: npt.NDArray[np.bool_],
                        cand: npt.NDArray[np.int64], seed: int = 0) -> FloatArray:
    """P(a candidate fails to run) from the measured rows (``failed`` per ``idx``) and the prior's classifier.

    No failure measured: the prior's probability (0 without one). Otherwise a small boosted
    classifier of the measured outcomes, started from the prior's log-odds (or the observed rate).
    """
    base = prior.p_fail[cand] if prior.p_fail is not None else np.zeros(cand.size)
    if not failed.any():
        return base
    import xgboost as xgb

    rate = (failed.sum() + 0.5) / (failed.size + 1.0)
    def logit(p: FloatArray) -> FloatArray:
        p = np.clip(p, 0.01, 0.99)
        return np.log(p / (1 - p))
    m_meas = logit(prior.p_fail[idx]) if prior.p_fail is not None else np.full(idx.size, logit(np.array(rate)))
    m_cand = logit(base) if prior.p_fail is not None else np.full(cand.size, logit(np.array(rate)))
    d = xgb.DMatrix(pool.varying[idx], label=failed.astype(np.float64), base_margin=m_meas, nthread=1)
    clf = xgb.train({"objective": "binary:logistic", "max_depth": 3, "eta": 0.3, "min_child_weight": 0.5,
                     "tree_method": "exact", "nthread": 1, "seed": seed}, d, 20)
    trees = clf.inplace_predict(pool.varying[cand], predict_type="margin", base_margin=np.zeros(cand.size))
    return 1.0 / (1.0 + np.exp(-(m_cand + trees)))


def _design(pool: FeaturePool, prior: Prior, idx: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
    """Pool rows' design matrix with the prior's log time as one more column (the members may split on it)."""
    if not prior.informative:
        return pool.varying[idx]
    return np.column_stack([pool.varying[idx], prior.log_time[idx].astype(np.float32)])


def _free_share(stall: int, batch: int) -> float:
    """Share of members that ignore the prior: FREE_SHARE, rising to FREE_MAX as the best stalls
    (measurements since it last improved by more than 1%, in batches)."""
    return FREE_SHARE + (FREE_MAX - FREE_SHARE) * min(1.0, stall / (FREE_STALL_BATCHES * batch))


def _stall(y: FloatArray) -> int:
    """Measurements since the best log time last improved by more than 1%."""
    best, since = np.inf, 0
    for v in y:
        if np.isfinite(v) and v < best - np.log(1.01):
            best, since = v, 0
        else:
            best, since = min(best, v) if np.isfinite(v) else best, since + 1
    return since


def _surfaces(pool: FeaturePool, prior: Prior, idx: npt.NDArray[np.int64], y: FloatArray,
              cand: npt.NDArray[np.int64], options: LoopOptions, seed: int, free_share: float
              ) -> tuple[FloatArray, float]:
    """Member surfaces (members x candidates) and their out-of-bag spread.

    With an informative prior, most members learn the log time around the scaled prior
    (:func:`prior_offset`); a share ``FREE_SHARE`` learn it from the measurements alone (the
    prior only as a feature), so that a prior that is wrong where it matters cannot hold the
    whole batch: Thompson sampling draws from both.
    """
    Xm, Xc = _design(pool, prior, idx), _design(pool, prior, cand)
    n_free = round(free_share * options.members) if prior.informative else 0
    out, sig, w = [], 0.0, 0
    if options.members - n_free > 0:
        b = prior_offset(prior, idx, y)
        offset = np.nan_to_num(b * prior.log_time, nan=0.0)
        bag = fit_bag(Xm, y, offset[idx], members=options.members - n_free, seed=seed)
        out.append(bag.predict(Xc, offset[cand]))
        sig, w = sig + bag.sigma_oob * len(bag.boosters), w + len(bag.boosters)
    if n_free:
        Xm, Xc = (pool.varying[idx], pool.varying[cand]) if FREE_BLIND else (Xm, Xc)
        bag = fit_bag(Xm, y, np.zeros(idx.size), members=n_free, seed=seed + 7919)
        out.append(bag.predict(Xc, np.zeros(cand.size)))
        sig, w = sig + bag.sigma_oob * len(bag.boosters), w + len(bag.boosters)
    return np.concatenate(out), sig / w


def prospective_error(pool: FeaturePool, prior: Prior, idx: npt.NDArray[np.int64], y: FloatArray,
                       options: LoopOptions, seed: int, free: float, k: int) -> float:
    """RMS error of the members' mean on the last ``k`` runs (``idx`` in the order measured) when fitted
    without them; 0 with fewer than 5 others.

    The out-of-bag error measures how far a member misses a run drawn at random from those it was
    not fitted on; the last batch is where the loop expected to improve, so its error is the one
    that matters for "nothing faster remains". With the out-of-bag error alone, the rule's P < 5%
    left a better configuration at 40 of 77 decisions with the analytical prior and 11 of 55
    without a prior (10 Kernel Tuner caches, 10 seeds, budgets 10-100; with the transfer prior 2 of
    91); experiments/results/tuner_vs_kernel_tuner.md has the calibration with this check.
    """
    if idx.size - k < 5:
        return 0.0
    S, _ = _surfaces(pool, prior, idx[:-k], y[:-k], idx[-k:], options, seed + 1, free)
    return float(np.sqrt(np.mean((S.mean(axis=0) - y[-k:]) ** 2)))


def next_batch(pool: FeaturePool, prior: Prior, measured: npt.ArrayLike, log_time: npt.ArrayLike, *,
               candidates: npt.ArrayLike | None = None, budget: int | None = None,
               options: LoopOptions | None = None, seed: int = 0) -> Step:
    """The next configurations to measure from pool rows ``candidates`` (default: feasible, unmeasured).

    ``measured`` are pool positions measured so far, ``log_time`` their log times (NaN: the run
    failed). Until :meth:`LoopOptions.start_for` rows are measured (or fewer than 3 ran), the
    batch comes from :func:`~hybridperf.search.start.initial_design`. Then the bagged members are
    fitted to the log times around the prior (scaled by :func:`prior_offset`), failures are
    predicted (:func:`failure_probability`), and :func:`~hybridperf.search.acquisition.select_batch`
    picks the batch, a share of it (``options.local``) in the neighbourhoods of the fastest runs of
    distinct basins (:func:`~hybridperf.search.local.niche_incumbents`, taken in turn from batch to
    batch); :func:`~hybridperf.search.acquisition.stop_rule` says whether to stop.
    """
    options = options or LoopOptions()
    idx = np.asarray(measured, dtype=np.int64)
    y = np.asarray(log_time, dtype=np.float64)
    if candidates is None:
        free = pool.feasible.copy()
        free[idx] = False
        cand = np.flatnonzero(free)
    else:
        cand = np.setdiff1d(np.asarray(candidates, dtype=np.int64), idx)
        cand = cand[pool.feasible[cand]]
    ran = np.isfinite(y)
    n0 = options.start_for(budget, prior.informative)
    n = options.batch_for(budget) if idx.size >= n0 else n0 - idx.size
    if budget is not None:
        n = min(n, budget - idx.size)
    empty = np.zeros(0)
    if n <= 0 or cand.size == 0:
        return Step(np.zeros(0, dtype=np.int64), [], None, empty, empty, empty)
    if idx.size < n0 or ran.sum() < 3:
        pos, why = initial_design(pool.coords, prior, cand, n, seed)
        return Step(pos, why, None, np.full(pos.size, np.nan), np.full(pos.size, np.nan), np.full(pos.size, np.nan))
    free = _free_share(_stall(y), options.batch_for(budget))
    surfaces, sigma = _surfaces(pool, prior, idx[ran], y[ran], cand, options, seed, free)
    p_fail = failure_probability(pool, prior, idx, ~ran, cand, seed)
    best = float(np.exp(np.min(y[ran])))
    live = p_fail <= 0.5
    stop = stop_rule(surfaces[:, live], STOP_NOISE * sigma, best, gain=options.stop_gain,
                     probability=options.stop_probability, seed=seed)
    if stop.stop:  # before stopping, check the members against the runs they did not see (see prospective_error)
        miss = prospective_error(pool, prior, idx[ran], y[ran], options, seed, free, options.batch_for(budget))
        if miss > STOP_NOISE * sigma:
            stop = stop_rule(surfaces[:, live], miss, best, gain=options.stop_gain,
                             probability=options.stop_probability, seed=seed)
    centres = niche_incumbents(pool.coords, idx, y, LOCAL_CENTRES, LOCAL_SEPARATION)
    pos, why = select_batch(surfaces, THOMPSON_NOISE * sigma, best, batch=n, explore=options.explore,
                            local=options.local, regions=trust_regions(pool.coords, centres, cand),
                            rotation=(idx.size - n0) // n, p_fail=p_fail, seed=seed)
    sd = np.sqrt(surfaces[:, pos].var(axis=0) + sigma ** 2)
    return Step(cand[pos], why, stop, surfaces[:, pos].mean(axis=0), sd, p_fail[pos])
