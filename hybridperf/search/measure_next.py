"""What to measure next: suggestions from a model or an ensemble, retraining, and replay on recorded sweeps."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from hybridperf.arrays import FloatArray
from hybridperf.errors import HybridperfError
from hybridperf.learn.features import analytical_features
from hybridperf.learn.model import TrainedModel, predict_rows, train_model
from hybridperf.search.acquisition import (
    StopDecision,
    expected_improvement,
    normal_quantile,
    select_batch,
    should_stop,
)
from hybridperf.search.ensemble import SIGMA_DEFAULT, FeaturePool, bag_predict, fit_bag
from hybridperf.sweep import training_rows

__all__ = ["Suggestion", "Trajectory", "compare_strategies", "replay", "replay_pool", "suggest_next", "update"]


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
        sigma = np.full(len(todo), q / normal_quantile(0.9) if np.isfinite(q) else SIGMA_DEFAULT)
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
        bag, s_oob = fit_bag(pool, usable, members, seed, None)
        cand = np.arange(len(train), len(pool.rows))
        mu, sigma = bag_predict(bag, pool, cand, s_oob)
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
    z = normal_quantile(0.9)
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
                         feats=pd.concat([pool.feats, analytical_features(extra)], ignore_index=True))
        feasible = pool.feats["feasible"].to_numpy() > 0
        prior_idx = np.arange(n, len(pool.rows))[feasible[n:]]
        step = 0
        while len(order) < budget:
            m = np.asarray(order)
            train = np.concatenate([prior_idx, m[np.isfinite(t[m]) & feasible[m]]])
            cand = np.setdiff1d(np.flatnonzero(feasible[:n]), m)
            if cand.size == 0 or len(train) < 2:
                break
            bag, s_oob = fit_bag(pool, train, members, seed * 1000 + step, booster_params)
            mu, sigma = bag_predict(bag, pool, cand, s_oob)
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


def compare_strategies(sweep: pd.DataFrame, kernel: str, gpu: str, sizes: Mapping[str, float] | None = None, *,
                       seeds: int = 3, strategies: Sequence[str] = ("model", "random"),
                       **replay_options: Any) -> pd.DataFrame:
    """Replay each strategy with seeds 0..seeds-1 on one recorded group (features computed once).

    Returns one row per (strategy, seed): ``measured``, ``best_fraction_of_optimum`` at the end,
    ``measurements_to_99pct`` (None: never) and ``stopped_at`` (where the stop rule would have stopped).
    """
    pool = replay_pool(sweep, kernel, gpu, sizes)
    rows = []
    for strategy in strategies:
        for seed in range(seeds):
            tr = replay(sweep, kernel, gpu, sizes, seed=seed, strategy=strategy, pool=pool, **replay_options)
            last = tr.steps.iloc[-1]
            rows.append({"strategy": strategy, "seed": seed, "measured": int(last["n_measured"]),
                         "best_fraction_of_optimum": float(last["fraction_of_optimum"]),
                         "measurements_to_99pct": tr.measurements_to(0.99), "stopped_at": tr.stopped_at})
    return pd.DataFrame(rows)
