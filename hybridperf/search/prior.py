"""Priors for the measure-next loop: what is known about a space before measuring it on this GPU."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from hybridperf.analytical.run import TIME_MODELS
from hybridperf.arrays import FloatArray
from hybridperf.errors import HybridperfError
from hybridperf.learn.baseline import baseline_column
from hybridperf.learn.features import analytical_features
from hybridperf.learn.model import TrainedModel
from hybridperf.search.ensemble import FeaturePool
from hybridperf.search.prior_kinds import PRIORS
from hybridperf.sweep import param_columns, row_keys

__all__ = ["PRIORS", "PRIOR_BOOSTER", "Prior", "analytical_prior", "make_prior", "measured_elsewhere",
           "model_prior", "no_prior", "transfer_prior"]

# The transfer prior's booster: fitted once per space on up to PRIOR_MAX_ROWS rows of other GPUs (one thread:
# xgboost's OpenMP threads spin and slow down badly on a shared machine).
PRIOR_BOOSTER: dict[str, Any] = {"max_depth": 6, "eta": 0.1, "subsample": 0.8, "colsample_bytree": 0.8,
                                 "min_child_weight": 2.0, "tree_method": "hist", "nthread": 1}
PRIOR_ROUNDS = 150
PRIOR_MAX_ROWS = 10_000


@dataclass(frozen=True, slots=True)
class Prior:
    """Relative log time per pool row before any measurement on this GPU, and the predicted failure chance.

    ``log_time`` is centred (median 0 over feasible rows; NaN where unknown): only differences
    matter, the loop fits the level and a scale on the rows it measures. ``p_fail`` (or None) is
    the chance that a row fails to run although the descriptor calls it feasible, learned from
    failed rows of the prior data. ``log_sigma`` (or None) is the prior's own uncertainty per row,
    a normal standard deviation in log space (the ``model`` prior's: from the model's calibrated
    intervals); the start uses it to choose between the prior's best and exploring
    (:func:`hybridperf.search.start.initial_design`). ``name`` is one of :data:`PRIORS`; ``note``
    says what it used.
    """

    name: str
    log_time: FloatArray
    p_fail: FloatArray | None
    note: str
    log_sigma: FloatArray | None = None

    @property
    def informative(self) -> bool:
        """Whether the prior orders the space at all (not the flat no-prior)."""
        v = self.log_time[np.isfinite(self.log_time)]
        return bool(v.size and np.ptp(v) > 0)


def _centred(v: FloatArray, feasible: npt.NDArray[np.bool_]) -> FloatArray:
    v = np.where(feasible & np.isfinite(v), v, np.nan)
    ok = np.isfinite(v)
    return v - float(np.median(v[ok])) if ok.any() else v


def no_prior(pool: FeaturePool) -> Prior:
    """Nothing known: every feasible row equal."""
    return Prior("none", np.where(pool.feasible, 0.0, np.nan), None, "no prior: space-filling start")


def analytical_prior(pool: FeaturePool, baseline: str = "hierarchical") -> Prior:
    """The analytical model ``baseline``'s log time (one of TIME_MODELS), uncalibrated. The hierarchical roofline
    by default: replayed on 15 Kernel Tuner caches x 10 seeds it finds a configuration within 1% of the optimum
    in 50 runs 82 times and in 20 runs 42 times, MWP-CWP 74 and 31 (experiments/results/analytical_prior.md)."""
    v = pool.feats[baseline_column(baseline)].to_numpy(dtype=np.float64)
    return Prior("analytical", _centred(v, pool.feasible), None, f"analytical model {baseline} (uncalibrated)")


def model_prior(pool: FeaturePool, model: TrainedModel, coverage: float = 0.9) -> Prior:
    """A trained model's predictions (its training data is the prior knowledge) and, from its calibrated
    ``coverage`` intervals (``predict_rows``' lo_ms, hi_ms, which widen out of the training domain), the
    prior's uncertainty: log_sigma = ln(hi / lo) / (2 z), z the normal quantile of ``coverage``."""
    from hybridperf.learn.model import predict_rows
    from hybridperf.search.acquisition import normal_quantile

    v, sigma = np.full(len(pool.rows), np.nan), np.full(len(pool.rows), np.nan)
    idx = np.flatnonzero(pool.feasible)
    if idx.size:
        pred = predict_rows(model, pool.rows.iloc[idx], coverage, features=pool.feats.iloc[idx], check=False)
        with np.errstate(divide="ignore", invalid="ignore"):
            v[idx] = np.log(pred["time_ms"].to_numpy(dtype=np.float64))
            sigma[idx] = np.log(pred["hi_ms"].to_numpy(dtype=np.float64) / pred["lo_ms"].to_numpy(dtype=np.float64))
        sigma /= 2 * normal_quantile(coverage)
    ok = np.isfinite(sigma) & (sigma > 0)
    kernels = ", ".join(model.metadata.get("kernels", {})) or "?"
    return Prior("model", _centred(v, pool.feasible), None,
                 f"trained model ({model.metadata.get('n_rows', '?')} rows; kernels {kernels})",
                 log_sigma=np.where(ok, sigma, np.nan) if ok.any() else None)


def _group_median_log(rows: pd.DataFrame) -> FloatArray:
    """log time minus its (kernel, gpu, sizes) group's median: what transfers across GPUs is the shape."""
    y = np.log(pd.to_numeric(rows["time_ms"], errors="coerce").to_numpy(dtype=np.float64))
    keys = ["kernel", "gpu", *param_columns(rows, "size.")]
    med = pd.Series(y, index=rows.index).groupby(row_keys(rows, keys)).transform("median")
    return y - med.to_numpy()


def _config_keys(rows: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Config columns as floats with empty cells set to the descriptor's default (sweeps recorded before a
    parameter existed leave it empty): equal keys are the same configuration."""
    from hybridperf.kernel import load_kernel

    out = pd.DataFrame(index=rows.index)
    for kernel, part in rows.groupby(rows["kernel"].astype(str)):
        known = load_kernel(kernel).parameters
        for c in columns:
            v = pd.to_numeric(part[c], errors="coerce") if c in part.columns else pd.Series(np.nan, index=part.index)
            default = known[c[7:]].default if c[7:] in known else None
            out.loc[part.index, c] = v.fillna(default) if default is not None else v
    return out


def measured_elsewhere(pool: FeaturePool, rows: pd.DataFrame) -> tuple[FloatArray, FloatArray]:
    """Per pool row, from the other sweeps' ``rows`` of the same configuration (config columns equal, empty
    cells read as the descriptor's default): the mean of their log times relative to their group's median
    (NaN where none ran it) and the share of them that failed to run (NaN where none holds it)."""
    t = pd.to_numeric(rows["time_ms"], errors="coerce").to_numpy(dtype=np.float64)
    status = rows["status"].astype(str).to_numpy() if "status" in rows.columns else np.full(len(rows), "ok")
    ran = (status == "ok") & (t > 0)
    rel = np.full(len(rows), np.nan)
    if ran.any():
        rel[ran] = _group_median_log(rows.loc[ran])
    cols = [c for c in pool.rows.columns if c.startswith("config.")]
    keys = _config_keys(pool.rows, cols).assign(_pos=np.arange(len(pool.rows)))
    src = _config_keys(rows, cols).assign(_rel=rel, _failed=(~ran).astype(np.float64))
    g = keys.merge(src, on=cols, how="inner").groupby("_pos")
    mean, fail = np.full(len(pool.rows), np.nan), np.full(len(pool.rows), np.nan)
    mean[g["_rel"].mean().index] = g["_rel"].mean().to_numpy()
    fail[g["_failed"].mean().index] = g["_failed"].mean().to_numpy()
    return mean, fail


def _booster_prior(pool: FeaturePool, rows: pd.DataFrame, want: npt.NDArray[np.int64], cfg: Mapping[str, Any],
                   rounds: int) -> tuple[FloatArray, FloatArray | None, str]:
    """For pool rows ``want``: a booster's relative log time learned on ``rows`` from the analytical features,
    a classifier's failure chance (None if no row failed), and a note."""
    import xgboost as xgb

    feats = analytical_features(rows)
    feasible = feats["feasible"].to_numpy() > 0
    status = rows["status"].astype(str).to_numpy() if "status" in rows.columns else np.full(len(rows), "ok")
    ok = feasible & (status == "ok") & (pd.to_numeric(rows["time_ms"], errors="coerce").to_numpy() > 0)
    if ok.sum() < 10:
        raise HybridperfError(f"the prior rows hold {int(ok.sum())} usable runs of kernel {rows['kernel'].iloc[0]} "
                              "(status ok, feasible); at least 10 are needed for a transfer prior")
    X = pool.design(feats)
    b = xgb.train(dict(cfg), xgb.DMatrix(X[ok], label=_group_median_log(rows.loc[ok])), rounds)
    failed = feasible & (status != "ok")
    p_fail = None
    if failed.any():
        clf = xgb.train({**cfg, "objective": "binary:logistic", "max_depth": 4},
                        xgb.DMatrix(X[feasible], label=failed[feasible].astype(np.float64)), rounds // 2)
        p_fail = clf.inplace_predict(pool.X[want])
    return b.inplace_predict(pool.X[want]), p_fail, f"a booster of {int(ok.sum())} runs ({int(failed.sum())} failed)"


def transfer_prior(pool: FeaturePool, prior_rows: pd.DataFrame, *, seed: int = 0,
                   params: Mapping[str, Any] | None = None, rounds: int = PRIOR_ROUNDS,
                   max_rows: int = PRIOR_MAX_ROWS) -> Prior:
    """What other sweeps of the same kernel (other GPUs, other sizes) say about this space.

    A configuration some of them measured gets the mean of their log times relative to each
    sweep's median, and the share of them where it failed as its failure chance
    (:func:`measured_elsewhere`): same-configuration transfer is the strongest evidence there is
    (on the Kernel Tuner caches the other GPUs' best is often this GPU's). The others get a
    booster's prediction, learned on up to ``max_rows`` of the rows from the analytical features
    (which carry the GPU's datasheet fields), and a classifier's failure chance. Rows of kernels
    not in the pool are ignored.
    """
    kernels = set(pool.rows["kernel"].astype(str))
    every = prior_rows.loc[prior_rows["kernel"].astype(str).isin(kernels)].reset_index(drop=True)
    if every.empty:
        raise HybridperfError(f"the prior rows hold no run of kernel {sorted(kernels)[0]}; pass sweeps of the same "
                              "kernel (e.g. other GPUs) or choose another prior")
    seen, seen_fail = measured_elsewhere(pool, every)
    same = pool.feasible & np.isfinite(seen)
    log_time = np.where(same, seen, np.nan)
    known = pool.feasible & np.isfinite(seen_fail)
    p_fail = np.where(known, seen_fail, 0.0) if np.nan_to_num(seen_fail).any() else None
    missing = np.flatnonzero(pool.feasible & ~same)
    how = "all measured there"
    if missing.size:
        rows = every.sample(max_rows, random_state=seed).reset_index(drop=True) if len(every) > max_rows else every
        cfg = {**PRIOR_BOOSTER, **dict(params or {}), "seed": seed}
        log_time[missing], pf, booster = _booster_prior(pool, rows, missing, cfg, rounds)
        if pf is not None:
            p_fail = np.zeros(len(pool.rows)) if p_fail is None else p_fail
            p_fail[missing] = np.where(known[missing], p_fail[missing], pf)
        how = f"{int(same.sum())} measured there, the others from {booster}"
    gpus = sorted(every["gpu"].astype(str).unique())
    return Prior("transfer", _centred(log_time, pool.feasible), p_fail,
                 f"transfer from {len(every)} rows on {', '.join(gpus)}: of {int(pool.feasible.sum())} "
                 f"configurations, {how}")


def make_prior(kind: str, pool: FeaturePool, *, prior_rows: pd.DataFrame | None = None,
               model: TrainedModel | None = None, baseline: str = "hierarchical", seed: int = 0) -> Prior:
    """The prior ``kind`` (one of :data:`PRIORS`). ``auto``: a transfer prior when ``prior_rows`` hold
    the kernel, else the model's predictions when given one, else the analytical model."""
    if kind not in PRIORS:
        raise HybridperfError(f"prior must be one of {', '.join(PRIORS)}; got {kind!r}")
    if baseline not in TIME_MODELS:
        raise HybridperfError(f"unknown analytical baseline {baseline!r}; choose from {', '.join(TIME_MODELS)}")
    has_rows = prior_rows is not None and prior_rows["kernel"].astype(str).isin(
        set(pool.rows["kernel"].astype(str))).any()
    if kind == "auto":
        kind = "transfer" if has_rows else "model" if model is not None else "analytical"
    if kind == "transfer":
        if prior_rows is None:
            raise HybridperfError("prior 'transfer' needs prior rows (sweeps of the same kernel on other GPUs)")
        return transfer_prior(pool, prior_rows, seed=seed)
    if kind == "model":
        if model is None:
            raise HybridperfError("prior 'model' needs a trained model (-m MODEL)")
        return model_prior(pool, model)
    if kind == "analytical":
        return analytical_prior(pool, baseline)
    return no_prior(pool)
