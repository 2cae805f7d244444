"""The hybrid model as a pipeline (sweep rows -> features -> HybridRegressor): training and files."""
from __future__ import annotations

import dataclasses
import os
import platform
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.pipeline import Pipeline

from hybridperf.errors import HybridperfError
from hybridperf.hardware import load_gpu
from hybridperf.kernel import KernelDescriptor, resolve_kernels
from hybridperf.learn.baseline import BASELINE_COLUMN, GROUP_COLUMNS, baseline_column, size_groups
from hybridperf.learn.domain import size_columns
from hybridperf.learn.estimator import HybridRegressor, default_booster
from hybridperf.learn.features import FEATURE_VERSION, SweepFeatures, analytical_features
from hybridperf.learn.intervals import ConformalIntervals
from hybridperf.learn.modes import WEIGHTINGS
from hybridperf.learn.predict import (
    check_prediction_rows,
    half_width_column,
    model_kernels,
    predict_rows,
    predict_spread,
    rows_to_predict,
)
from hybridperf.learn.uncertainty import fit_intervals
from hybridperf.progress import task
from hybridperf.rowcheck import RowCheck, check_column_names, drop_bad_rows, drop_rows
from hybridperf.sweep import param_columns, size_metric, training_rows, validate_sweep

__all__ = ["BOOSTER_PARAMS", "EXTRAPOLATION_COLUMNS", "TrainedModel", "check_prediction_rows", "fit_model",
           "half_width_column", "load_model", "make_model", "model_kernels", "predict_rows", "predict_spread",
           "rows_to_predict", "save_model", "size_bands", "train_model"]  # prediction: re-exported from predict.py

# Feature columns beyond whose training range a row is an extrapolation in size (forward interval scores).
EXTRAPOLATION_COLUMNS = r"^log2_size\."
# The booster parameters a tuned model records (and evaluate reuses): the tuning search space.
BOOSTER_PARAMS = ("n_estimators", "max_depth", "learning_rate", "subsample", "colsample_bytree", "min_child_weight",
                  "reg_lambda")


def make_model(*, baseline: str = "auto", mode: str = "hybrid", coverage: float | None = 0.9, regressor: Any = None,
               random_state: int = 0, calibration: str = "affine", shrink_residual: bool = True,
               size_aware: bool = True, columns: str = "all", group_ids: bool = True,
               weighting: str = "throughput") -> Pipeline:
    """The product's model: ``Pipeline([("features", SweepFeatures), ("hybrid", HybridRegressor)])``.

    It is fitted on sweep rows and measured times (``fit(rows, time_ms, hybrid__groups=...)``;
    ``features__features=`` passes precomputed analytical features) and predicts times of rows.

    With a baseline (``baseline`` not ``"none"`` and ``mode`` not ``"boosting"``): the per-kernel
    baseline column, per-(kernel, GPU) calibration (``calibration``: ``affine`` = overhead + scale,
    or one ``scale``) with per-kernel then global fallback, the out-of-fold stacking weight on the
    residual (``shrink_residual``) and forward interval scores for rows beyond the trained sizes.
    Without: boosting on the features only (``columns="params"``: on the parameters and GPU fields
    alone, without group ids when ``group_ids`` is False). ``size_aware`` scores the baselines by
    extrapolation to the largest training sizes. ``weighting`` (hybrid mode only; the ablation modes fit
    uniformly): ``throughput`` weights each run by its problem's fastest time over its own, so the residual
    fits the fast configurations best (see HybridRegressor); ``uniform`` weights every run alike.
    """
    if weighting not in WEIGHTINGS:
        raise ValueError(f"weighting must be one of {', '.join(WEIGHTINGS)}, got {weighting!r}")
    use_base = baseline != "none" and mode != "boosting"
    features = SweepFeatures(baseline=baseline if use_base else "none", size_aware=size_aware, columns=columns,
                             group_ids=group_ids)
    if not use_base:
        est = HybridRegressor(regressor=regressor, mode="boosting", coverage=coverage, random_state=random_state)
    else:
        est = HybridRegressor(regressor=regressor, baseline_column=BASELINE_COLUMN, mode=mode, coverage=coverage,
                              random_state=random_state, group_columns=list(GROUP_COLUMNS),
                              shrink_residual=shrink_residual, calibration=calibration,
                              extrapolation_columns=EXTRAPOLATION_COLUMNS, transfer=True,
                              # a baseline the caller names serves every GPU; with "auto" a GPU without runs is
                              # predicted from the per-wave hierarchical roofline (see HybridRegressor)
                              transfer_baseline_column=baseline_column("hierarchical") if baseline == "auto" else None,
                              weighting=weighting if mode == "hybrid" else "uniform")
    return Pipeline([("features", features), ("hybrid", est)])


@dataclass(frozen=True, slots=True)
class TrainedModel:
    """A fitted pipeline (features + HybridRegressor), its intervals, and the metadata to audit it.

    ``intervals`` are the normalised Mondrian conformal intervals of :mod:`hybridperf.learn.uncertainty`
    (None: the estimator's plain split-conformal interval is used).
    """

    pipeline: Pipeline
    metadata: Mapping[str, Any] = field(default_factory=dict)
    intervals: ConformalIntervals | None = None

    @property
    def features(self) -> SweepFeatures:
        return self.pipeline.named_steps["features"]

    @property
    def estimator(self) -> HybridRegressor:
        return self.pipeline.named_steps["hybrid"]

    @property
    def descriptors(self) -> dict[str, KernelDescriptor]:
        """Kernel name -> the descriptor the model was trained with (kept in the model file)."""
        return dict(getattr(self.features, "descriptors_", {}))

    @property
    def feature_columns(self) -> tuple[str, ...]:
        return tuple(self.features.columns_)

    @property
    def baseline(self) -> str | None:
        """The fallback baseline (kernels never trained); per-kernel choices are ``features.baselines_``."""
        return self.features.baseline_

    @property
    def mode(self) -> str:
        return self.estimator.mode

    def regressors(self) -> list[Any]:
        """The fitted regressors prediction runs: the residual and transfer boosters and the intervals' difficulty."""
        est = self.estimator
        found = [getattr(est, "regressor_", None), getattr(est, "transfer_regressor_", None),
                 None if self.intervals is None else self.intervals.difficulty]
        return [r for r in found if r is not None]

    def booster_params(self) -> dict[str, Any]:
        """The tunable booster parameters this model was trained with (to reuse, e.g. in evaluate)."""
        return {k: v for k, v in self.metadata.get("booster_params", {}).items() if k in BOOSTER_PARAMS}

    def save(self, path: str | Path) -> Path:
        """Write the model file: JSON state + xgboost's native booster, checksummed (and signed when
        ``$HYBRIDPERF_MODEL_KEY`` is set), atomically; a model whose state falls outside the model file
        schema (:mod:`hybridperf.learn.schema`) is refused rather than written unloadable."""
        import json

        from hybridperf.learn.persist import FORMAT, ModelFileError, write_model_document
        from hybridperf.learn.schema import validate_body

        body = {"feature_version": FEATURE_VERSION, "features": self.features.to_dict(),
                "estimator": self.estimator.to_dict(), "metadata": dict(self.metadata),
                "intervals": None if self.intervals is None else self.intervals.to_dict()}
        try:
            plain = json.loads(json.dumps({"format": FORMAT, **body}, allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise ModelFileError(f"{path}: the model holds a value JSON cannot store ({exc})") from None
        problem = validate_body(plain)
        if problem:
            raise ModelFileError(f"{path}: cannot write this model: {problem}")
        return write_model_document(body, path)

    @classmethod
    def load(cls, path: str | Path) -> TrainedModel:
        """Read a model file written by :meth:`save`; never executes code from the file.

        Raises
        ------
        ModelFileError
            If the file is unreadable, truncated, fails its checksum or was written by an
            incompatible version (format or feature version), or its state is malformed.
        """
        from hybridperf.learn.persist import ModelFileError, read_model_document

        body = read_model_document(path)
        if body.get("feature_version") != FEATURE_VERSION:
            raise ModelFileError(f"{path}: model uses feature version {str(body.get('feature_version'))[:20]!r}, "
                                 f"this hybridperf computes version {FEATURE_VERSION}; retrain the model")
        from hybridperf.learn.schema import validate_body

        problem = validate_body(body)
        if problem:
            raise ModelFileError(f"{path}: model file {problem}; retrain the model or restore the file")
        try:
            features = SweepFeatures.from_dict(body.get("features"))
            est = HybridRegressor.from_dict(body.get("estimator"))
            intervals = None if body.get("intervals") is None else ConformalIntervals.from_dict(
                body["intervals"], int(est.n_features_in_))
        except ModelFileError as exc:
            raise ModelFileError(f"{path}: {exc}") from None
        if list(getattr(est, "feature_names_in_", [])) != features.columns_:
            raise ModelFileError(f"{path}: the estimator's columns differ from the feature columns; retrain it")
        meta = body.get("metadata", {})
        if not isinstance(meta, dict):
            raise ModelFileError(f"{path}: metadata must be an object")
        return cls(pipeline=Pipeline([("features", features), ("hybrid", est)]), metadata=meta, intervals=intervals)


def save_model(model: TrainedModel, path: str | Path) -> Path:
    """Write ``model`` to ``path`` (see :meth:`TrainedModel.save`)."""
    return model.save(path)


def load_model(path: str | Path) -> TrainedModel:
    """Read a model file (see :meth:`TrainedModel.load`)."""
    if not isinstance(path, (str, os.PathLike)):
        raise HybridperfError(f"load_model takes a model file's path, got {type(path).__name__}")
    return TrainedModel.load(path)


def size_bands(rows: pd.DataFrame) -> np.ndarray | None:
    """Problem-size bands of the rows (the default out-of-fold groups), None without size columns."""
    return size_groups(size_metric(rows)) if param_columns(rows, "size.") else None


def _checked_booster_params(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """``params`` as a dict, or a HybridperfError naming the first one a model file could not keep (an unknown
    name, which xgboost only warned about once per fit, 35 times; a value out of range: n_estimators = -5 trained
    and was recorded, learning_rate = -1 ended in an XGBoostError)."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    from hybridperf.learn.schema import BOOSTER_PARAM_SCHEMA

    out = dict(params or {})
    error = best_match(Draft202012Validator(BOOSTER_PARAM_SCHEMA).iter_errors(out))
    if error is not None:
        where = f"{error.path[0]}: " if error.path else ""
        raise HybridperfError(f"booster_params: {where}{' '.join(error.message.split())[:160]}; allowed: "
                              f"{', '.join(BOOSTER_PARAM_SCHEMA['properties'])}")
    return out


def _training_input(sweep: Any, groups: Any) -> tuple[pd.DataFrame, pd.Series | None]:
    """(the ok rows of ``sweep``, checked as a sweep file is (a missing status is "ok"), ``groups`` as a Series
    on their index), or a HybridperfError for a table that is no sweep or groups not one per ok row."""
    if isinstance(sweep, pd.DataFrame) and "status" not in sweep.columns:
        sweep = sweep.assign(status="ok")
    ok_rows = training_rows(validate_sweep(sweep, source="training sweep", check_names=False))
    if groups is None:
        return ok_rows, None
    labels = np.asarray(groups)
    if labels.ndim != 1 or len(labels) != len(ok_rows):
        raise HybridperfError(f"groups holds {labels.size} labels for {len(ok_rows)} runs with status ok and "
                              "time_ms > 0; give one label per such run, in their order")
    return ok_rows, pd.Series(labels, index=ok_rows.index)


def train_model(sweep: pd.DataFrame, *, baseline: str = "auto", mode: str = "hybrid", coverage: float | None = 0.9,
                booster_params: Mapping[str, Any] | None = None, groups: np.ndarray | None = None,
                random_state: int = 0, tune_trials: int = 0, study_path: str | None = None, progress: bool = False,
                provenance: Mapping[str, Any] | None = None,
                kernels: Mapping[str, KernelDescriptor] | None = None, strict: bool = False,
                weighting: str = "throughput") -> TrainedModel:
    """Fit the product's model (:func:`make_model`) on the ok rows of one or more sweeps.

    ``sweep`` is checked as :func:`hybridperf.sweepfile.read_sweep` checks a file
    (:func:`hybridperf.sweep.validate_sweep`; a table without ``status`` is taken as ok runs): columns of the sweep
    format only (others as ``info.*``), one row per configuration (repeats merged: median time, ``repeats``).

    Parameters
    ----------
    sweep : DataFrame in the sweep format (kernel, gpu, size.*, config.*, time_ms, status).
    baseline : a model of :data:`hybridperf.analytical.run.TIME_MODELS`, ``"auto"`` (per kernel,
        see :func:`hybridperf.learn.baseline.choose_baselines`) or ``"none"`` (boosting only).
    mode : ``hybrid``, ``analytical``, ``calibrated`` or ``boosting`` (see HybridRegressor).
    booster_params : XGBRegressor parameters overriding :func:`hybridperf.learn.estimator.default_booster`.
    groups : optional group label per ok row for the out-of-fold fits (stacking weight, conformal
        intervals) and tuning folds; default: problem-size bands (:func:`size_bands`).
    tune_trials : optuna trials to tune the booster first (0: defaults); ``study_path`` resumes a
        study from that SQLite file.
    provenance : extra metadata to store (data hashes, command, ...).
    kernels : descriptors of kernel names in the sweep, used before looking the names up
        (:func:`hybridperf.kernel.load_kernel`); the model keeps a copy of every descriptor it used.
    strict : stop (a HybridperfError) at the first invalid ok row rather than skip invalid rows with a
        warning that counts them by reason: rows whose kernel or GPU is unknown or whose parameters
        break their descriptor (:func:`hybridperf.rowcheck.check_rows`), and rows measured ok that the
        occupancy model or a constraint calls infeasible (the descriptor or the spec is wrong for them).
    weighting : ``throughput`` (fast configurations of each problem weigh most, for ranking) or
        ``uniform`` (see :func:`make_model`).
    """
    ok_rows, groups = _training_input(sweep, groups)
    rows = drop_bad_rows(ok_rows, kernels, strict=strict, what="training runs")
    kernels = resolve_kernels(rows["kernel"].astype(str).unique(), kernels)
    check_column_names(rows, kernels, what="training runs")
    with task(f"train: analytical features of {len(rows)} runs"):
        feats = analytical_features(rows, kernels=kernels)
    feasible = feats["feasible"].to_numpy() > 0
    if not feasible.all():
        reason = "measured ok but infeasible for the descriptor and GPU spec (see 'hybridperf analyze')"
        check = RowCheck(ok=feasible, reasons=np.where(feasible, "", reason), examples={})
        rows = drop_rows(rows, check, strict=strict, what="training runs")
        feats = feats.loc[feasible]
    y = rows["time_ms"].to_numpy(dtype=np.float64)
    pipe = make_model(baseline=baseline, mode=mode, coverage=coverage, random_state=random_state, weighting=weighting)
    groups = size_bands(rows) if groups is None else groups.loc[rows.index].to_numpy()
    params = _checked_booster_params(booster_params)
    tuning: dict[str, Any] = {}
    if tune_trials and mode in ("hybrid", "boosting"):
        from hybridperf.learn.tuning import tune_booster

        X = pipe.named_steps["features"].fit_transform(rows, y, features=feats, kernels=kernels)
        best, score = tune_booster(X, y, baseline_column=None, template=pipe.named_steps["hybrid"],
                                   n_trials=tune_trials, storage=study_path, groups=groups, seed=random_state,
                                   progress=progress)
        params.update(best)
        tuning = {"trials": tune_trials, "cv_log_rmse": score, "study": str(study_path) if study_path else None}
    reg = default_booster(random_state)
    if params:
        reg.set_params(**params)
    pipe.set_params(hybrid__regressor=reg)
    with task("train: fit the model and its intervals"):
        fitted = fit_model(pipe, rows, y, features=feats, groups=groups, random_state=random_state, kernels=kernels)
    log_err = np.log(fitted.estimator.predict(fitted.features.transform(rows, features=feats))) - np.log(y)
    meta = _metadata(rows, len(sweep), reg, tuning, log_err, provenance, fitted.descriptors)
    return dataclasses.replace(fitted, metadata=meta)


def fit_model(pipe: Pipeline, rows: pd.DataFrame, y: np.ndarray, *, features: pd.DataFrame | None = None,
              groups: np.ndarray | None = None, random_state: int = 0,
              kernels: Mapping[str, KernelDescriptor] | None = None) -> TrainedModel:
    """Fit a :func:`make_model` pipeline on ok rows and times, and its intervals when it has a coverage.

    ``features`` passes the rows' precomputed :func:`analytical_features`; ``groups`` the ordered
    out-of-fold groups (default: none; :func:`train_model` passes :func:`size_bands`).
    """
    kernels = resolve_kernels(rows["kernel"].astype(str).unique(), kernels)
    feats = analytical_features(rows, kernels=kernels) if features is None else features
    # Fitted step by step (as Pipeline.fit would): the baseline of kernels never trained is chosen with the
    # per-kernel ones (features step), and the estimator calibrates its overall offset, which only such
    # kernels use, against that baseline; the design matrix is made once, for the fit and the intervals.
    feature_step, est = pipe.named_steps["features"], pipe.named_steps["hybrid"]
    feature_step.fit(rows, y, features=feats, kernels=kernels)
    fallback = feature_step.baseline_
    unseen = None if fallback is None else baseline_column(fallback)
    est.set_params(unseen_baseline_column=unseen)
    X = feature_step.transform(rows, features=feats)
    est.fit(X, y, groups=groups)
    intervals = None
    if est.coverage is not None:
        intervals = fit_intervals(est, X, y, rows, feats["regime"].to_numpy(), groups=groups,
                                  random_state=random_state, unseen_baseline=unseen,
                                  size_cols=size_columns(rows, kernels),
                                  donors=lambda pos, gpu: _design_on(feature_step, rows.iloc[pos], gpu, kernels))
    est.heldout_ = {}  # training-time only: not needed to predict, not saved
    return TrainedModel(pipeline=pipe, intervals=intervals)


def _design_on(feature_step: SweepFeatures, rows: pd.DataFrame, gpu: str,
               kernels: Mapping[str, KernelDescriptor]) -> pd.DataFrame:
    """The design matrix of ``rows`` run on ``gpu`` instead (a donor of a GPU with few runs, learn/donors.py)."""
    moved = rows.assign(gpu=gpu).reset_index(drop=True)
    return feature_step.transform(moved, features=analytical_features(moved, kernels=kernels))


def _metadata(rows: pd.DataFrame, n_sweep: int, reg: Any, tuning: Mapping[str, Any], log_err: np.ndarray,
              provenance: Mapping[str, Any] | None, kernels: Mapping[str, KernelDescriptor]) -> dict[str, Any]:
    import sklearn
    import xgboost

    return {
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "feature_version": FEATURE_VERSION,
        "n_rows": int(len(rows)), "n_dropped_not_ok": int(n_sweep - len(rows)),
        "kernels": {k: kernels[k].sha256 for k in sorted(rows["kernel"].astype(str).unique())},
        "gpus": {g: load_gpu(g).sha256 for g in sorted(rows["gpu"].unique())},
        "versions": {"python": platform.python_version(), "numpy": np.__version__, "pandas": pd.__version__,
                     "scikit-learn": sklearn.__version__, "xgboost": xgboost.__version__},
        "booster_params": {k: v for k, v in reg.get_params().items()
                           if isinstance(v, (int, str, bool)) or (isinstance(v, float) and np.isfinite(v))},
        "tuning": dict(tuning),
        "training_log_rmse": float(np.sqrt(np.mean(log_err ** 2))),
        **dict(provenance or {}),
    }
