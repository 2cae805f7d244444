"""What to measure next on a real GPU: suggestions from a prior and the runs so far, and retraining."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from hybridperf.errors import HybridperfError
from hybridperf.learn.model import TrainedModel, predict_rows, train_model
from hybridperf.search.acquisition import StopDecision, normal_quantile
from hybridperf.search.ensemble import FeaturePool
from hybridperf.search.loop import LoopOptions, next_batch
from hybridperf.search.prior import make_prior
from hybridperf.search.replay import Comparison, Trajectory, compare_strategies, replay, replay_pool, replay_prior
from hybridperf.sweep import param_columns, training_rows

__all__ = ["MAX_SPACE_ROWS", "Comparison", "Suggestion", "Trajectory", "compare_strategies", "replay", "replay_pool",
           "replay_prior", "space_candidates", "suggest_next", "update", "write_picks"]

MAX_SPACE_ROWS = 500_000  # the loop computes features for every candidate: larger spaces go through rank first


@dataclass(frozen=True, slots=True)
class Suggestion:
    """The next batch to measure and whether to stop.

    ``table``: the batch as sweep rows (kernel, gpu, size.*, config.*) with the loop's
    prediction (``time_ms``, 90% ``lo_ms``/``hi_ms``; NaN during the start, before any fit),
    ``p_fail`` (chance the configuration fails to run) and ``why``. ``stop``: the stop rule's
    decision and its P(a configuration more than ``stop_gain`` faster remains), None during the
    start, and a decision to stop when the runs measured reach ``budget``. ``prior``: which prior was used, and on
    what. ``n_ignored``: measured rows that are not candidates of this problem (another size, GPU, kernel or
    configuration outside the space), left out.
    """

    table: pd.DataFrame
    stop: StopDecision | None
    best_measured_ms: float
    n_candidates: int
    n_measured: int
    prior: str
    n_ignored: int = 0


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


def _match(candidates: pd.DataFrame, measured: pd.DataFrame) -> npt.NDArray[np.int64]:
    """For each measured row, the position of the candidate it is (-1: not a candidate of this problem)."""
    keys = _shared_keys(candidates, measured, _keys(candidates))
    cand = _key_frame(candidates, keys).reset_index(drop=True).assign(_pos=np.arange(len(candidates)))
    cand = cand.drop_duplicates(subset=keys)
    hit = _key_frame(measured, keys).reset_index(drop=True).merge(cand, on=keys, how="left")["_pos"]
    return hit.fillna(-1).to_numpy(dtype=np.int64)


def _measured_log_times(measured: pd.DataFrame) -> npt.NDArray[np.float64]:
    if "time_ms" not in measured.columns:
        raise HybridperfError("the measured runs have no time_ms column; give each run's time in ms (a failed run: "
                              "status failed, time_ms empty)")
    status = measured["status"].astype(str).to_numpy() if "status" in measured.columns else \
        np.full(len(measured), "ok")
    t = pd.to_numeric(measured["time_ms"], errors="coerce").to_numpy(dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((status == "ok") & (t > 0), np.log(t), np.nan)


def _one_problem(cands: pd.DataFrame) -> None:
    group = [c for c in _keys(cands) if not c.startswith("config.")]
    n = len(_key_frame(cands, group).drop_duplicates())
    if n > 1:
        raise HybridperfError(f"candidates span {n} (kernel, gpu, sizes) groups; suggest for one problem at a time")


def suggest_next(prior_source: TrainedModel | pd.DataFrame | None, candidates: pd.DataFrame | Any,
                 measured_sweep: pd.DataFrame | None = None, *, prior: str = "auto", budget: int | None = None,
                 batch: int | None = None, start: int | None = None, explore: float = 0.25, local: float = 0.5,
                 members: int = 5, stop_probability: float = 0.05, stop_gain: float = 0.01,
                 seed: int = 0) -> Suggestion:
    """The next batch of configurations to measure, and whether measuring more is worth it.

    Parameters
    ----------
    prior_source : TrainedModel, DataFrame or None
        What is known before measuring on this GPU: a trained model (its predictions), or sweeps
        of the same kernel (e.g. other GPUs: a transfer prior), or nothing.
    candidates : DataFrame (kernel, gpu, size.*, config.*) of one problem, or a RankResult.
    measured_sweep : rows measured so far on this GPU (sweep format; failed rows count as
        measured and teach the failure classifier). Rows that are not candidates are ignored.
    prior : one of :data:`hybridperf.search.prior.PRIORS` (``auto``: transfer from a sweep,
        else the model, else the analytical model).
    budget : measurements you plan in all (scales the start and the batch; None: 8 and 8).
    batch, start, explore, local, members, stop_probability, stop_gain : see :class:`LoopOptions`.
    seed : random seed (Thompson draws, tie-breaks).
    """
    if hasattr(candidates, "rows") and callable(candidates.rows):
        candidates = candidates.rows()
    if not isinstance(candidates, pd.DataFrame) or candidates.empty:
        raise HybridperfError("candidates must be a non-empty DataFrame of sweep rows (or a RankResult)")
    cands = candidates.reset_index(drop=True)
    _one_problem(cands)
    options = LoopOptions(batch=batch, start=start, explore=explore, local=local, members=members,
                          stop_probability=stop_probability, stop_gain=stop_gain)
    pool = FeaturePool.of(cands)
    model = prior_source if isinstance(prior_source, TrainedModel) else None
    rows = prior_source if isinstance(prior_source, pd.DataFrame) else None
    pr = make_prior(prior, pool, prior_rows=rows, model=model, seed=seed)
    n_ignored = 0
    if measured_sweep is not None and not measured_sweep.empty:
        pos = _match(cands, measured_sweep)
        logt = _measured_log_times(measured_sweep)
        keep = pos >= 0
        n_ignored = int((~keep).sum())
        pos, logt = pos[keep], logt[keep]
        pos, first = np.unique(pos, return_index=True)  # a configuration measured twice counts once
        logt = logt[first]
    else:
        pos, logt = np.zeros(0, dtype=np.int64), np.zeros(0)
    if pool.feasible.sum() <= pos.size:
        raise HybridperfError("every feasible candidate has been measured; widen the space (--space) or stop")
    step = next_batch(pool, pr, pos, logt, budget=budget, options=options, seed=seed)
    stop = step.stop
    if budget is not None and pos.size >= budget:
        stop = StopDecision(True, float("nan"), float("nan"),
                            f"the budget of {budget} measurements is spent ({pos.size} measured); raise --budget to "
                            "measure more")
    table = cands.iloc[step.positions].reset_index(drop=True)
    z = normal_quantile(0.9)
    table["time_ms"] = np.exp(step.log_mu)
    table["lo_ms"], table["hi_ms"] = np.exp(step.log_mu - z * step.log_sigma), np.exp(step.log_mu + z * step.log_sigma)
    table["p_fail"], table["why"] = step.p_fail, step.why
    best = float(np.exp(np.nanmin(logt))) if np.isfinite(logt).any() else float("inf")
    return Suggestion(table=table, stop=stop, best_measured_ms=best, n_candidates=len(cands),
                      n_measured=int(pos.size), prior=f"{pr.name}: {pr.note}", n_ignored=n_ignored)


def space_candidates(kernel: str, gpu: str, sizes: Mapping[str, float], *,
                     space_overrides: Mapping[str, Sequence[float]] | None = None,
                     candidates: pd.DataFrame | None = None, max_rows: int = MAX_SPACE_ROWS) -> pd.DataFrame:
    """The loop's candidates for one problem size, as sweep rows: the space ``rank`` searches
    (:func:`hybridperf.search.user_space.user_space`: the descriptor's constraints, config parameters
    fixed in ``sizes`` and restricted by ``space_overrides``, or exactly the configurations of
    ``candidates``). Occupancy-infeasible ones are recognised and skipped by the loop."""
    from hybridperf.hardware import load_gpu
    from hybridperf.kernel import kernel_key
    from hybridperf.search.user_space import user_space

    us = user_space(kernel, sizes, restrict=space_overrides, candidates=candidates)
    try:
        return us.rows(kernel_key(us.kernel), load_gpu(gpu).key, max_rows)
    except HybridperfError as exc:
        raise HybridperfError(f"{us.kernel.name}: {exc}; restrict it with --space NAME=VALUES or --set NAME=VALUE, "
                              "or rank it first and pass the survivors (--candidates)") from None


def write_picks(suggestion: Suggestion, path: str | Path) -> Path:
    """Write a suggestion's batch to measure (:func:`hybridperf.search.picks.write_picks_table`): ``.json``,
    Kernel Tuner configurations with the problem size, the loop's predictions, why each was picked, the
    prior and the stop decision; ``.csv``/``.parquet``, rows to measure (kernel, gpu, size.*, config.*,
    predictions as info.* columns). Written atomically."""
    from hybridperf.search.picks import write_picks_table

    stop = suggestion.stop
    meta = {"why": list(suggestion.table["why"]), "prior": suggestion.prior,
            "stop": None if stop is None else {"stop": stop.stop, "reason": stop.reason,  # no chance once the budget
                                               "p_better": stop.p_better if np.isfinite(stop.p_better) else None}}
    return write_picks_table(suggestion.table, path, meta)


def update(model_or_training_sweep: TrainedModel | pd.DataFrame, measured: pd.DataFrame, *,
           candidates: pd.DataFrame | None = None, pseudo_rows: int = 2000, seed: int = 0,
           **train_kwargs: Any) -> TrainedModel:
    """Retrain including new measurements.

    Given the training sweep, the model is retrained on it plus ``measured`` (a configuration measured again
    replaces its training run). A model file does
    not keep its training rows, so given a TrainedModel the old model's knowledge is carried over
    as pseudo-measurements: its predictions on up to ``pseudo_rows`` unmeasured ``candidates``
    (required then) are trained on together with the real measurements (knowledge distillation).
    """
    if isinstance(model_or_training_sweep, pd.DataFrame):
        both = pd.concat([model_or_training_sweep, measured], ignore_index=True)
        # A configuration measured again replaces its training run (a sweep holds one row per configuration).
        key = ["kernel", "gpu", *param_columns(both)]
        return train_model(both.drop_duplicates(subset=key, keep="last"), **train_kwargs)
    if candidates is None:
        raise HybridperfError("update(model, measured) needs candidates=... (rows to carry the old model's "
                              "predictions over) because a model file keeps no training rows; or pass the "
                              "training sweep instead of the model")
    cands = candidates.reset_index(drop=True)
    seen = np.zeros(len(cands), dtype=bool)
    hit = _match(cands, measured)
    seen[hit[hit >= 0]] = True
    fresh = cands.loc[~seen]
    if len(fresh) > pseudo_rows:
        fresh = fresh.sample(pseudo_rows, random_state=seed)
    pred = predict_rows(model_or_training_sweep, fresh, check=False)
    pseudo = fresh.assign(time_ms=pred["time_ms"].to_numpy(), status="ok", reason="")
    pseudo = pseudo.loc[pred["feasible"].to_numpy() & np.isfinite(pseudo["time_ms"].to_numpy())]
    kw = {"booster_params": model_or_training_sweep.metadata.get("booster_params"), **train_kwargs}
    return train_model(pd.concat([pseudo, training_rows(measured)], ignore_index=True), **kw)
