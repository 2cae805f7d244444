"""What to measure next: batch selection, retraining, a stop rule, and replay on recorded sweeps."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.special import ndtr, ndtri

from hybridperf.errors import HybridperfError
from hybridperf.learn.baseline import (
    BASELINE_COLUMN,
    GROUP_COLUMNS,
    add_baseline,
    add_group_ids,
    choose_baselines,
)
from hybridperf.learn.estimator import HybridRegressor, default_booster
from hybridperf.learn.features import sweep_features
from hybridperf.learn.model import TrainedModel, predict_rows, train_model, training_rows

__all__ = [
    "LOOP_BOOSTER",
    "FeaturePool",
    "StopDecision",
    "Suggestion",
    "Trajectory",
    "expected_improvement",
    "replay",
    "replay_pool",
    "select_batch",
    "should_stop",
    "suggest_next",
    "update",
]

FloatArray = npt.NDArray[np.float64]
# A lighter booster for the loop's bagged members: refitted every batch, on a few hundred rows.
LOOP_BOOSTER: dict[str, Any] = {"n_estimators": 100, "learning_rate": 0.1, "max_depth": 5, "n_jobs": 1}
_SIGMA_DEFAULT = 0.3  # log-space spread assumed when there is nothing to estimate it from


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


@dataclass(frozen=True, slots=True)
class Suggestion:
    """The next batch to measure (``table``: candidate rows + predictions + why) and the stop rule."""

    table: pd.DataFrame
    stop: StopDecision
    best_measured_ms: float
    n_candidates: int
    n_measured: int


@dataclass(frozen=True, slots=True)
class Trajectory:
    """A replayed tuning run: per batch, measurements used, best found and fraction of the optimum."""

    steps: pd.DataFrame
    optimum_ms: float
    strategy: str
    seed: int
    space_size: int
    stopped_at: int | None

    def measurements_to(self, fraction: float = 0.99) -> int | None:
        """Measurements used when ``optimum / best found`` first reached ``fraction`` (None: never)."""
        hit = self.steps.loc[self.steps["fraction_of_optimum"] >= fraction, "n_measured"]
        return int(hit.iloc[0]) if len(hit) else None


# ---------------------------------------------------------------------------------------------
# Pure selection math

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


# ---------------------------------------------------------------------------------------------
# Models for the loop

def _keys(df: pd.DataFrame) -> list[str]:
    return ["kernel", "gpu", *sorted(c for c in df.columns if c.startswith(("size.", "config.")))]


def _key_frame(df: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    out = df[list(keys)].copy()
    for c in keys:
        out[c] = pd.to_numeric(out[c], errors="coerce").astype(np.float64) if c.startswith(("size.", "config.")) \
            else out[c].astype(str)
    return out


def _shared_keys(candidates: pd.DataFrame, measured: pd.DataFrame, keys: Sequence[str]) -> list[str]:
    """Key columns to match on: a column the measured file lacks is ignored when the candidates hold a
    single value in it (e.g. a parameter the recorder left at its default), else it is an error."""
    missing = [k for k in keys if k not in measured.columns and candidates[k].nunique(dropna=False) > 1]
    if missing:
        raise HybridperfError(f"measured sweep lacks column {missing[0]!r}, which varies among the candidates; "
                              "record every size.* and config.* parameter")
    return [k for k in keys if k in measured.columns]


def _measured_mask(candidates: pd.DataFrame, measured: pd.DataFrame | None) -> npt.NDArray[np.bool_]:
    if measured is None or measured.empty:
        return np.zeros(len(candidates), dtype=bool)
    keys = _shared_keys(candidates, measured, _keys(candidates))
    m = _key_frame(measured, keys).drop_duplicates()
    m["_seen"] = True
    hit = _key_frame(candidates, keys).merge(m, on=keys, how="left")["_seen"]
    return hit.fillna(False).to_numpy(dtype=bool)


def _best_measured(candidates: pd.DataFrame, measured: pd.DataFrame | None) -> float:
    group = [c for c in _keys(candidates) if not c.startswith("config.")]
    cand_groups = _key_frame(candidates, group).drop_duplicates()
    if len(cand_groups) > 1:
        raise HybridperfError(f"candidates span {len(cand_groups)} (kernel, gpu, sizes) groups; suggest for one "
                              "problem at a time")
    if measured is None or measured.empty:
        return float("inf")
    status_ok = measured["status"].eq("ok") if "status" in measured.columns else True
    ok = measured.loc[status_ok & (pd.to_numeric(measured["time_ms"], errors="coerce") > 0)]
    if ok.empty:
        return float("inf")
    group = _shared_keys(candidates, ok, group)
    same = _key_frame(ok, group).merge(_key_frame(cand_groups, group).assign(_g=True), on=group, how="left")["_g"]
    t = ok["time_ms"].to_numpy(dtype=np.float64)[same.fillna(False).to_numpy(dtype=bool)]
    return float(t.min()) if len(t) else float("inf")


def _z(coverage: float) -> float:
    return float(ndtri(0.5 + coverage / 2))


@dataclass(frozen=True, slots=True)
class FeaturePool:
    """Rows (sweep format) and their features (``sweep_features``), computed once, reused by every refit.

    ``matrices`` caches the full design matrix per (baseline choice, feature columns): refits
    that pick the same baselines reuse it, so each refit only runs the boosters.
    """

    rows: pd.DataFrame
    feats: pd.DataFrame
    matrices: dict[Any, npt.NDArray[np.float64]] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, rows: pd.DataFrame) -> FeaturePool:
        rows = rows.reset_index(drop=True)
        return cls(rows=rows, feats=sweep_features(rows).reset_index(drop=True))

    def matrix(self, model: TrainedModel) -> npt.NDArray[np.float64]:
        """The model's design matrix for every pool row (predict_rows' steps, features not rebuilt)."""
        key = (model.baseline, tuple(sorted(dict(model.metadata.get("baselines", {})).items())),
               tuple(model.feature_columns))
        if key not in self.matrices:
            if len(self.matrices) > 4:  # bounded: a few baseline choices at most
                self.matrices.clear()
            feats = self.feats
            if model.baseline is not None:
                feats = add_baseline(feats, self.rows["kernel"].astype(str).to_numpy(),
                                     model.metadata.get("baselines", {}), model.baseline)
            feats = add_group_ids(feats, self.rows)
            self.matrices[key] = feats.reindex(columns=list(model.feature_columns)).to_numpy(dtype=np.float64)
        return self.matrices[key]


def _log_predict(model: TrainedModel, pool: FeaturePool, idx: npt.ArrayLike) -> FloatArray:
    """log of predict_rows' ``time_ms`` for pool rows ``idx``."""
    X = pd.DataFrame(pool.matrix(model)[np.asarray(idx, dtype=np.int64)], columns=list(model.feature_columns))
    with np.errstate(divide="ignore"):
        return np.log(model.estimator.predict(X))


def _fit_member(pool: FeaturePool, idx: npt.NDArray[np.int64], seed: int,
                booster_params: Mapping[str, Any] | None) -> TrainedModel:
    """One hybrid model on pool rows ``idx`` (repeats allowed), built like train_model's (per-kernel
    baseline, per-group scales, boosted residual) from the precomputed features, without the
    out-of-fold refits train_model spends on intervals: the bag provides the spread instead."""
    rows, feats = pool.rows.iloc[idx], pool.feats.iloc[idx]
    y = rows["time_ms"].to_numpy(dtype=np.float64)
    kernels = rows["kernel"].astype(str).to_numpy()
    mapping, base = choose_baselines(feats, y, kernels, rows["gpu"].to_numpy())
    feats = add_group_ids(add_baseline(feats, kernels, mapping, base), rows)
    columns = tuple(c for c in feats.columns if c != "feasible")
    reg = default_booster(seed, n_jobs=1)
    reg.set_params(**{**LOOP_BOOSTER, **dict(booster_params or {})})
    est = HybridRegressor(regressor=reg, baseline_column=BASELINE_COLUMN, coverage=None, random_state=seed,
                          group_columns=list(GROUP_COLUMNS))
    est.fit(feats.loc[:, list(columns)].reset_index(drop=True).astype(np.float64), y)
    return TrainedModel(estimator=est, feature_columns=columns, baseline=base, metadata={"baselines": mapping})


def _fit_bag(pool: FeaturePool, train: npt.NDArray[np.int64], members: int, seed: int,
             booster_params: Mapping[str, Any] | None) -> tuple[list[TrainedModel], float]:
    """Bootstrap members on pool rows ``train``, and the out-of-bag log error spread (a robust
    sigma: median |residual| / 0.6745)."""
    rng = np.random.default_rng(seed)
    n = len(train)
    y = np.log(pool.rows["time_ms"].to_numpy(dtype=np.float64)[train])
    oob_sum, oob_n = np.zeros(n), np.zeros(n)
    bag = []
    for i in range(members):
        take = rng.integers(0, n, n)
        m = _fit_member(pool, train[take], seed + i, booster_params)
        bag.append(m)
        oob = np.setdiff1d(np.arange(n), take)
        if oob.size:
            oob_sum[oob] += _log_predict(m, pool, train[oob])
            oob_n[oob] += 1
    seen = oob_n > 0
    resid = oob_sum[seen] / np.maximum(oob_n[seen], 1) - y[seen]
    sigma = float(np.median(np.abs(resid)) / 0.6745) if seen.sum() >= 5 else _SIGMA_DEFAULT
    return bag, max(sigma, 1e-3)


def _bag_predict(bag: Sequence[TrainedModel], pool: FeaturePool, idx: npt.ArrayLike,
                 sigma_oob: float) -> tuple[FloatArray, FloatArray]:
    """Mean log prediction and per-candidate sigma: the OOB sigma, scaled up where the members' spread
    exceeds its median."""
    logs = np.stack([_log_predict(m, pool, idx) for m in bag])
    mu = logs.mean(axis=0)
    spread = logs.std(axis=0)
    med = float(np.nanmedian(spread)) if np.isfinite(spread).any() else 0.0
    # Never more confident than the typical out-of-bag error; wider where the members disagree more.
    sigma = sigma_oob * np.maximum(spread / med, 1.0) if med > 0 else np.full_like(mu, sigma_oob)
    return mu, sigma


def update(model_or_training_sweep: TrainedModel | pd.DataFrame, measured: pd.DataFrame, *,
           candidates: pd.DataFrame | None = None, pseudo_rows: int = 2000, seed: int = 0,
           **train_kwargs: Any) -> TrainedModel:
    """Retrain including new measurements.

    Given the training sweep, the model is retrained on it plus ``measured``. A model file does
    not keep its training rows, so given a TrainedModel the old model's knowledge is carried over
    as pseudo-measurements: its predictions on up to ``pseudo_rows`` unmeasured ``candidates``
    (required then) are trained on together with the real measurements (knowledge distillation).
    """
    if isinstance(model_or_training_sweep, pd.DataFrame):
        return train_model(pd.concat([model_or_training_sweep, measured], ignore_index=True), **train_kwargs)
    if candidates is None:
        raise HybridperfError("update(model, measured) needs candidates=... (rows to carry the old model's "
                              "predictions over) because a model file keeps no training rows; or pass the "
                              "training sweep instead of the model")
    fresh = candidates.loc[~_measured_mask(candidates, measured)]
    if len(fresh) > pseudo_rows:
        fresh = fresh.sample(pseudo_rows, random_state=seed)
    pred = predict_rows(model_or_training_sweep, fresh)
    pseudo = fresh.assign(time_ms=pred["time_ms"].to_numpy(), status="ok", reason="")
    pseudo = pseudo.loc[pred["feasible"].to_numpy() & np.isfinite(pseudo["time_ms"].to_numpy())]
    kw = {"booster_params": model_or_training_sweep.metadata.get("booster_params"), **train_kwargs}
    return train_model(pd.concat([pseudo, training_rows(measured)], ignore_index=True), **kw)


def suggest_next(model_or_training_sweep: TrainedModel | pd.DataFrame, candidates: pd.DataFrame | Any,
                 measured_sweep: pd.DataFrame | None = None, *, batch: int = 8, explore: float = 0.25, seed: int = 0,
                 members: int = 5, stop_gain: float = 0.005) -> Suggestion:
    """The next batch of configurations to measure, and whether measuring more is worth it.

    Parameters
    ----------
    model_or_training_sweep : TrainedModel or DataFrame
        A model: its predictions, shifted by the measured rows' mean log residual (shrunk towards
        0 with a prior weight of 5 rows), with its conformal interval as a per-candidate spread
        (doubled out of domain). A training sweep: a bagged ensemble of ``members`` hybrid models
        is fitted on it plus ``measured_sweep``, giving each candidate its own spread.
    candidates : DataFrame (kernel, gpu, size.*, config.*) or a RankResult (its candidates).
    measured_sweep : rows measured so far (sweep format); excluded from the batch.
    batch, explore, seed : see :func:`select_batch`.
    stop_gain : threshold of the stop rule (relative expected gain, see :func:`should_stop`).
    """
    if hasattr(candidates, "rows") and callable(candidates.rows):
        candidates = candidates.rows()
    cands = candidates.reset_index(drop=True)
    seen = _measured_mask(cands, measured_sweep)
    best = _best_measured(cands, measured_sweep)
    todo = cands.loc[~seen].reset_index(drop=True)
    if todo.empty:
        raise HybridperfError("every candidate has been measured; widen the space (--space) or stop")
    if isinstance(model_or_training_sweep, TrainedModel):
        model = model_or_training_sweep
        pred = predict_rows(model, todo)
        mu = np.log(pred["time_ms"].to_numpy(dtype=np.float64))
        q = model.estimator.interval_half_width(0.9)
        sigma = np.full(len(todo), q / _z(0.9) if np.isfinite(q) else _SIGMA_DEFAULT)
        sigma[pred["out_of_domain"].to_numpy(dtype=bool)] *= 2
        if measured_sweep is not None and not measured_sweep.empty:
            mine = training_rows(measured_sweep)
            mine = mine.loc[_measured_mask(mine, cands)]
            if len(mine):
                r = np.log(mine["time_ms"].to_numpy(dtype=np.float64) / predict_rows(model, mine)["time_ms"].to_numpy())
                shift = np.nansum(r) / (np.isfinite(r).sum() + 5)
                mu = mu + shift
                pred["lo_ms"], pred["hi_ms"] = pred["lo_ms"] * np.exp(shift), pred["hi_ms"] * np.exp(shift)
    else:
        train = training_rows(pd.concat([model_or_training_sweep, measured_sweep], ignore_index=True)
                              if measured_sweep is not None else model_or_training_sweep)
        pool = FeaturePool.of(pd.concat([train, todo], ignore_index=True))
        usable = np.flatnonzero(pool.feats["feasible"].to_numpy()[: len(train)] > 0)
        bag, s_oob = _fit_bag(pool, usable, members, seed, None)
        cand = np.arange(len(train), len(pool.rows))
        mu, sigma = _bag_predict(bag, pool, cand, s_oob)
        pred = _ensemble_frame(todo, mu, sigma, pool.feats.iloc[cand])
    pos, why = select_batch(mu, sigma, best, batch=batch, explore=explore, seed=seed)
    p, ei = expected_improvement(mu, sigma, best)
    table = todo.iloc[pos].reset_index(drop=True)
    for c in ("time_ms", "lo_ms", "hi_ms", "regime", "limiter", "out_of_domain"):
        if c in pred.columns:
            table[c] = pred[c].to_numpy()[pos]
    table["time_ms"] = np.exp(mu[pos])
    table["p_improve"], table["expected_gain_ms"], table["why"] = p[pos], ei[pos], why
    stop = should_stop(mu, sigma, best, threshold=stop_gain)
    return Suggestion(table=table, stop=stop, best_measured_ms=best, n_candidates=len(cands),
                      n_measured=int(seen.sum()))


def _ensemble_frame(rows: pd.DataFrame, mu: FloatArray, sigma: FloatArray, feats: pd.DataFrame) -> pd.DataFrame:
    """A predict_rows-shaped frame for ensemble predictions (90% normal interval in log space)."""
    z = _z(0.9)
    out = pd.DataFrame(index=rows.index)
    out["time_ms"], out["lo_ms"], out["hi_ms"] = np.exp(mu), np.exp(mu - z * sigma), np.exp(mu + z * sigma)
    out["out_of_domain"] = False
    out["feasible"] = feats["feasible"].to_numpy() > 0
    return out


# ---------------------------------------------------------------------------------------------
# Replay on a recorded exhaustive sweep

def _group(sweep: pd.DataFrame, kernel: str, gpu: str, sizes: Mapping[str, float] | None) -> pd.DataFrame:
    rows = sweep.loc[(sweep["kernel"].astype(str) == str(kernel)) & (sweep["gpu"].astype(str) == str(gpu))]
    for name, v in (sizes or {}).items():
        col = f"size.{name}"
        if col not in rows.columns:
            raise HybridperfError(f"sweep has no column {col!r}; sizes: "
                                  f"{', '.join(c[5:] for c in rows.columns if c.startswith('size.')) or 'none'}")
        rows = rows.loc[np.isclose(pd.to_numeric(rows[col], errors="coerce"), float(v))]
    size_cols = [c for c in rows.columns if c.startswith("size.")]
    if rows.empty:
        raise HybridperfError(f"no rows for kernel {kernel!r} on {gpu!r} with sizes {dict(sizes or {})}; "
                              "check the names (kernel, gpu columns) and --set values")
    if size_cols and len(rows[size_cols].drop_duplicates()) > 1:
        raise HybridperfError(f"the sweep holds {len(rows[size_cols].drop_duplicates())} problem sizes for {kernel} on "
                              f"{gpu}; pick one with sizes={{...}}")
    return rows.reset_index(drop=True)


def replay_pool(sweep: pd.DataFrame, kernel: str, gpu: str, sizes: Mapping[str, float] | None = None) -> FeaturePool:
    """The rows of one (kernel, gpu, sizes) group of a sweep and their features, for repeated replays."""
    return FeaturePool.of(_group(sweep, kernel, gpu, sizes))


def replay(sweep: pd.DataFrame, kernel: str, gpu: str, sizes: Mapping[str, float] | None = None, *,
           initial: int = 16, batch: int = 8, budget: int = 200, seed: int = 0, strategy: str = "model",
           explore: float = 0.25, members: int = 5, stop_gain: float = 0.005, prior: pd.DataFrame | None = None,
           pool: FeaturePool | None = None, booster_params: Mapping[str, Any] | None = None) -> Trajectory:
    """Run the measure-next loop on a recorded exhaustive sweep (measurements come from the sweep).

    ``initial`` random configurations are "measured" first; then, until ``budget``, each batch is
    chosen by :func:`select_batch` from a bagged hybrid model refitted on everything measured so
    far (plus ``prior`` rows, e.g. other GPUs). ``strategy="random"`` measures in random order
    instead (the baseline under the same budget). Failed/invalid recorded configurations cost a
    measurement and never become the best. ``pool`` may pass the group's rows and
    features from :func:`replay_pool` to replay several seeds without recomputing features.

    Returns
    -------
    Trajectory
        One row per measurement: ``n_measured``, ``best_ms`` so far, ``fraction_of_optimum``
        (optimum / best so far; 1.0 = optimum found), the loop's ``expected_gain`` when the batch
        was chosen, and ``stop_rule`` (the stop rule would have stopped before this batch).
    """
    if strategy not in ("model", "random"):
        raise HybridperfError(f"strategy must be 'model' or 'random', got {strategy!r}")
    rows = pool.rows if pool is not None else _group(sweep, kernel, gpu, sizes)
    n = len(rows)
    ok = (rows["status"].astype(str) == "ok").to_numpy() if "status" in rows.columns else np.ones(n, dtype=bool)
    t = np.where(ok, pd.to_numeric(rows["time_ms"], errors="coerce").to_numpy(dtype=np.float64), np.nan)
    optimum = float(np.nanmin(t))
    budget, initial = min(budget, n), min(max(initial, 1), n)
    perm = np.random.default_rng(seed).permutation(n)  # random shares the model's initial sample
    order = list(perm[: budget if strategy == "random" else initial])
    gains: list[float] = [np.nan] * len(order)
    stops: list[bool] = [False] * len(order)
    stopped_at = None
    if strategy == "model":
        extra = training_rows(prior) if prior is not None and not prior.empty else rows.iloc[:0]
        pool = pool if pool is not None else FeaturePool.of(rows)
        if len(extra):
            pool = FeaturePool(rows=pd.concat([pool.rows, extra], ignore_index=True),
                         feats=pd.concat([pool.feats, sweep_features(extra)], ignore_index=True))
        feasible = pool.feats["feasible"].to_numpy() > 0
        prior_idx = np.arange(n, len(pool.rows))[feasible[n:]]
        step = 0
        while len(order) < budget:
            m = np.asarray(order)
            train = np.concatenate([prior_idx, m[np.isfinite(t[m]) & feasible[m]]])
            cand = np.setdiff1d(np.flatnonzero(feasible[:n]), m)
            if cand.size == 0 or len(train) < 2:
                break
            bag, s_oob = _fit_bag(pool, train, members, seed * 1000 + step, booster_params)
            mu, sigma = _bag_predict(bag, pool, cand, s_oob)
            best = float(np.nanmin(t[m])) if np.isfinite(t[m]).any() else float("inf")
            stop = should_stop(mu, sigma, best, threshold=stop_gain)
            if stop.stop and stopped_at is None:
                stopped_at = len(order)
            pos, _ = select_batch(mu, sigma, best, batch=min(batch, budget - len(order)), explore=explore,
                                  seed=seed * 1000 + step)
            order += list(cand[pos])
            gains += [stop.expected_gain] * len(pos)
            stops += [stop.stop] * len(pos)
            step += 1
    m = np.asarray(order)
    best = np.fmin.accumulate(t[m])
    steps = pd.DataFrame({"n_measured": np.arange(1, len(m) + 1), "index": m, "time_ms": t[m], "best_ms": best,
                          "fraction_of_optimum": optimum / best, "expected_gain": gains, "stop_rule": stops})
    steps["fraction_of_optimum"] = steps["fraction_of_optimum"].fillna(0.0)
    return Trajectory(steps=steps, optimum_ms=optimum, strategy=strategy, seed=seed, space_size=n,
                      stopped_at=stopped_at)
