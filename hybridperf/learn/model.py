"""Train a HybridRegressor on sweep tables and predict unseen sizes/configs with intervals and flags."""
from __future__ import annotations

import platform
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import clone

from hybridperf.analytical.mwp_cwp import REGIMES
from hybridperf.errors import HybridperfError
from hybridperf.hardware import load_gpu
from hybridperf.kernel import load_kernel
from hybridperf.learn.baseline import (
    BASELINE_COLUMN,
    GROUP_COLUMNS,
    add_baseline,
    add_group_ids,
    choose_baselines,
    size_groups,
)
from hybridperf.learn.estimator import HybridRegressor, default_booster
from hybridperf.learn.features import (
    FEATURE_VERSION,
    baseline_column,
    size_metric,
    sweep_features,
)

__all__ = ["TrainedModel", "hybrid_estimator", "predict_rows", "train_model", "training_rows"]

_LIMITER_NAMES = {0.0: "warps", 1.0: "registers", 2.0: "shared memory", 3.0: "blocks"}


@dataclass(frozen=True, slots=True)
class TrainedModel:
    """A fitted hybrid model plus everything needed to rebuild its features and audit it."""

    estimator: HybridRegressor
    feature_columns: tuple[str, ...]
    baseline: str | None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def mode(self) -> str:
        return self.estimator.mode


def training_rows(sweep: pd.DataFrame) -> pd.DataFrame:
    """The rows a model learns from: status ok with a positive time (failed/invalid are kept out, counted)."""
    if "time_ms" not in sweep.columns:
        raise HybridperfError("sweep has no time_ms column; read it with hybridperf.sweep.read_sweep")
    status = sweep["status"] if "status" in sweep.columns else pd.Series("ok", index=sweep.index)
    ok = (status == "ok") & (pd.to_numeric(sweep["time_ms"], errors="coerce") > 0)
    if not ok.any():
        raise HybridperfError(f"sweep has no usable rows (status ok with time_ms > 0) out of {len(sweep)}")
    return sweep.loc[ok]


def _feature_matrix(feats: pd.DataFrame, columns: tuple[str, ...]) -> pd.DataFrame:
    return feats.reindex(columns=list(columns)).astype(np.float64)


def hybrid_estimator(columns: tuple[str, ...] | list[str], *, baseline: bool = True, mode: str = "hybrid",
                     coverage: float | None = 0.9, random_state: int = 0, regressor: Any = None) -> HybridRegressor:
    """The product's HybridRegressor configuration, in one place (train, evaluate and tune share it).

    With ``baseline``: the per-kernel baseline column, affine calibration per (kernel, GPU) with
    per-kernel then global fallback, the out-of-fold stacking weight on the residual, and forward
    interval scores for rows beyond the trained sizes. Without: boosting on the features only.
    """
    if not baseline:
        return HybridRegressor(regressor=regressor, mode="boosting", coverage=coverage, random_state=random_state)
    return HybridRegressor(regressor=regressor, baseline_column=BASELINE_COLUMN, mode=mode, coverage=coverage,
                           random_state=random_state, domain_columns=[], categorical_columns=[],
                           group_columns=list(GROUP_COLUMNS), shrink_residual=True, calibration="affine",
                           extrapolation_columns=[c for c in columns if c.startswith("log2_size.")])


def train_model(sweep: pd.DataFrame, *, baseline: str = "auto", mode: str = "hybrid", coverage: float | None = 0.9,
                booster_params: Mapping[str, Any] | None = None, groups: np.ndarray | None = None,
                random_state: int = 0, tune_trials: int = 0, study_path: str | None = None, progress: bool = False,
                provenance: Mapping[str, Any] | None = None) -> TrainedModel:
    """Fit a hybrid (or ablation) model on the ok rows of one or more sweeps.

    Parameters
    ----------
    sweep : DataFrame in the sweep format (kernel, gpu, size.*, config.*, time_ms, status).
    baseline : an analytical model name from :data:`hybridperf.learn.features.BASELINES`, ``"auto"``
        (per kernel, the smallest log-error spread on its training rows once scaled per GPU; see
        :func:`hybridperf.learn.baseline.choose_baselines`) or ``"none"`` (boosting only).
    mode : ``hybrid``, ``analytical``, ``calibrated`` or ``boosting`` (see HybridRegressor).
    booster_params : XGBRegressor parameters overriding :func:`hybridperf.learn.estimator.default_booster`.
    groups : optional group label per ok row for the out-of-fold fits (stacking weight, conformal
        intervals) and tuning folds; default: problem-size bands (:func:`size_groups`).
    tune_trials : optuna trials to tune the booster first (0: defaults); ``study_path`` resumes a
        study from that SQLite file.
    provenance : extra metadata to store (data hashes, command, ...).
    """
    rows = training_rows(sweep)
    feats = sweep_features(rows)
    feasible = feats["feasible"].to_numpy() > 0
    if not feasible.all():
        raise HybridperfError(
            f"{int((~feasible).sum())} measured rows are infeasible by the occupancy model (their descriptor "
            "resources exceed the GPU's limits); fix the descriptor or the GPU spec"
        )
    y = rows["time_ms"].to_numpy(dtype=np.float64)
    kernels = rows["kernel"].astype(str).to_numpy()
    if mode == "boosting" or baseline == "none":
        mapping, base_name = {}, None
    elif baseline == "auto":
        has_sizes = any(c.startswith("size.") for c in rows.columns)
        mapping, base_name = choose_baselines(feats, y, kernels, rows["gpu"].to_numpy(),
                                              size_metric(rows) if has_sizes else None)
    else:
        baseline_column(baseline)
        mapping, base_name = {k: baseline for k in np.unique(kernels)}, baseline
    if base_name is not None:
        feats = add_baseline(feats, kernels, mapping, base_name)
    feats = add_group_ids(feats, rows)
    columns = tuple(c for c in feats.columns if c != "feasible")
    X = _feature_matrix(feats, columns)
    if groups is None and any(c.startswith("size.") for c in rows.columns):
        groups = size_groups(size_metric(rows))
    params = dict(booster_params or {})
    tuning: dict[str, Any] = {}
    template = hybrid_estimator(columns, baseline=base_name is not None, mode=mode, coverage=coverage,
                                random_state=random_state)
    if tune_trials and mode in ("hybrid", "boosting"):
        from hybridperf.learn.tuning import tune_booster

        best, score = tune_booster(X, y, baseline_column=None, template=template, n_trials=tune_trials,
                                   storage=study_path, groups=groups, seed=random_state, progress=progress)
        params.update(best)
        tuning = {"trials": tune_trials, "cv_log_rmse": score, "study": str(study_path) if study_path else None}
    reg = default_booster(random_state)
    if params:
        reg.set_params(**params)
    est = clone(template).set_params(regressor=reg)
    est.fit(X, y, groups=groups)
    import sklearn
    import xgboost

    meta = {
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "feature_version": FEATURE_VERSION,
        "n_rows": int(len(rows)), "n_dropped_not_ok": int(len(sweep) - len(rows)),
        "kernels": {k: load_kernel(k).sha256 for k in sorted(rows["kernel"].unique())},
        "gpus": {g: load_gpu(g).sha256 for g in sorted(rows["gpu"].unique())},
        "versions": {"python": platform.python_version(), "numpy": np.__version__, "pandas": pd.__version__,
                     "scikit-learn": sklearn.__version__, "xgboost": xgboost.__version__},
        "booster_params": {k: v for k, v in reg.get_params().items()
                           if isinstance(v, (int, str, bool)) or (isinstance(v, float) and np.isfinite(v))},
        "domain": _domain(rows),
        "baselines": mapping,
        "tuning": tuning,
        "training_log_rmse": float(np.sqrt(np.mean((np.log(est.predict(X)) - np.log(y)) ** 2))),
        **dict(provenance or {}),
    }
    return TrainedModel(estimator=est, feature_columns=columns, baseline=base_name, metadata=meta)


def predict_rows(model: TrainedModel, rows: pd.DataFrame, coverage: float | None = None) -> pd.DataFrame:
    """Predict time, interval, regime, limiter and an out-of-domain flag for each row.

    ``rows`` holds kernel, gpu, size.* and config.* columns (no time needed). Infeasible rows get
    NaN times and ``feasible = False`` with the occupancy/constraint reason left to ``analyze``.
    """
    feats = sweep_features(rows)
    if model.baseline is not None:
        feats = add_baseline(feats, rows["kernel"].astype(str).to_numpy(), model.metadata.get("baselines", {}),
                             model.baseline)
    feats = add_group_ids(feats, rows)
    X = _feature_matrix(feats, model.feature_columns)
    est = model.estimator
    pred, lo, hi = est.predict_with_interval(X, coverage)
    out = pd.DataFrame(index=rows.index)
    out["time_ms"] = pred
    out["lo_ms"] = lo
    out["hi_ms"] = hi
    out["regime"] = [REGIMES.get(int(r), "") if np.isfinite(r) else "" for r in feats["regime"]]
    out["limiter"] = [_LIMITER_NAMES.get(v, "") for v in feats["limiter"]]
    out["feasible"] = feats["feasible"].to_numpy() > 0
    reasons = _outside(rows, model.metadata)
    out["out_of_domain"] = [bool(r) for r in reasons]
    out["ood_reason"] = reasons
    return out


def _domain(rows: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Per kernel: trained GPUs, size ranges, and the config values seen (the closed sets)."""
    out: dict[str, dict[str, Any]] = {}
    for kernel, g in rows.groupby("kernel"):
        d: dict[str, Any] = {"gpus": sorted(map(str, g["gpu"].unique()))}
        for col in g.columns:
            if col.startswith("size."):
                v = pd.to_numeric(g[col], errors="coerce").dropna()
                if len(v):
                    d[col] = [float(v.min()), float(v.max())]
            elif col.startswith("config."):
                v = pd.to_numeric(g[col], errors="coerce").dropna().unique()
                if len(v):
                    d[col] = sorted(float(x) for x in v) if len(v) <= 256 else [float(v.min()), float(v.max())]
        out[str(kernel)] = d
    return out


def _outside(rows: pd.DataFrame, metadata: Mapping[str, Any]) -> list[str]:
    """Why each row lies outside the training domain ('' when inside); vectorised per kernel."""
    domain = metadata.get("domain", {})
    why: list[list[str]] = [[] for _ in range(len(rows))]
    kernels = rows["kernel"].astype(str).to_numpy()
    gpus = rows["gpu"].astype(str).to_numpy()
    for kernel in np.unique(kernels):
        idx = np.flatnonzero(kernels == kernel)
        d = domain.get(kernel)
        if d is None:
            for i in idx:
                why[i].append(f"kernel {kernel} never trained")
            continue
        for i in idx[~np.isin(gpus[idx], d["gpus"])]:
            why[i].append(f"GPU {gpus[i]} never trained for this kernel")
        for col, seen in d.items():
            if col == "gpus" or col not in rows.columns:
                continue
            v = pd.to_numeric(rows[col].iloc[idx], errors="coerce").to_numpy(dtype=np.float64)
            name = col.split(".", 1)[1]
            if col.startswith("size."):
                for i, x in zip(idx[(v < seen[0]) | (v > seen[1])], v[(v < seen[0]) | (v > seen[1])]):
                    why[i].append(f"{name} {x:g} outside trained {seen[0]:g}..{seen[1]:g}")
            else:
                bad = ~np.isin(v, seen) & np.isfinite(v)
                if len(seen) == 2:  # a long list was stored as a range
                    bad &= (v < seen[0]) | (v > seen[1])
                for i, x in zip(idx[bad], v[bad]):
                    why[i].append(f"{name} {x:g} never trained")
    return ["; ".join(w[:3]) if w else "" for w in why]
