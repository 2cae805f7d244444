"""Safe model files: JSON metadata + xgboost's native JSON booster, checksummed, written atomically."""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from hybridperf.errors import HybridperfError
from hybridperf.learn.estimator import MODES, HybridRegressor
from hybridperf.learn.features import FEATURE_VERSION
from hybridperf.learn.model import TrainedModel

__all__ = ["FORMAT", "ModelFileError", "load_model", "save_model"]

FORMAT = "hybridperf-model/1"


class ModelFileError(HybridperfError):
    """A model file is missing, truncated, tampered with or from an incompatible version."""


def _floats(a: Any) -> list[float | None]:
    return [None if not np.isfinite(v) else float(v) for v in np.asarray(a, dtype=np.float64)]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def save_model(model: TrainedModel, path: str | Path) -> Path:
    """Write ``model`` as one JSON file (temp file + rename: a crash never leaves half a model)."""
    est = model.estimator
    reg = est.regressor_
    booster = reg.get_booster().save_raw(raw_format="json").decode("utf-8") if reg is not None else None
    state = {
        "mode": est.mode, "coverage": est.coverage, "n_splits": est.n_splits, "random_state": est.random_state,
        "baseline_column": est.baseline_column, "n_features_in": int(est.n_features_in_),
        "offset": float(est.offset_),
        "residual_weight": float(est.residual_weight_),
        "residual_weights": [[k, v] for k, v in sorted(est.residual_weights_.items())],
        "shrink_residual": bool(est.shrink_residual),
        "group_columns": None if est.group_columns is None else list(est.group_columns),
        "group_offsets": [[[k, v[0], v[1]] for k, v in sorted(level.items())] for level in est.group_offsets_],
        "calibration": est.calibration,
        "oof_abs_log_errors": None if est.oof_abs_log_errors_ is None else _floats(est.oof_abs_log_errors_),
        "extrap_abs_log_errors": None if est.extrap_abs_log_errors_ is None else _floats(est.extrap_abs_log_errors_),
        "extrapolation_mask": [bool(v) for v in est.extrapolation_mask_],
        "feature_min": _floats(est.feature_min_), "feature_max": _floats(est.feature_max_),
        "discrete_values": [None if v is None else _floats(v) for v in est.discrete_values_],
        "domain_mask": [bool(v) for v in est.domain_mask_],
        "categorical_mask": [bool(v) for v in est.categorical_mask_],
    }
    body = {
        "format": FORMAT, "feature_version": FEATURE_VERSION, "feature_columns": list(model.feature_columns),
        "baseline": model.baseline, "estimator": state, "metadata": dict(model.metadata),
        "booster": booster,
    }
    payload = json.dumps(body, sort_keys=True, allow_nan=False).encode("utf-8")
    doc = json.dumps({"sha256": _sha(payload), "body": json.loads(payload)}, sort_keys=True, indent=1,
                     allow_nan=False)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(doc)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _need(d: dict[str, Any], key: str, kind: type | tuple[type, ...], path: Path) -> Any:
    if key not in d or not isinstance(d[key], kind):
        raise ModelFileError(f"{path}: model file field {key!r} is missing or has the wrong type; retrain the model")
    return d[key]


def load_model(path: str | Path) -> TrainedModel:
    """Read a model file written by :func:`save_model`. Never executes code from the file.

    Raises
    ------
    ModelFileError
        If the file is unreadable, not JSON, truncated, fails its checksum, or was written by an
        incompatible version (format or feature version).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelFileError(f"{path}: cannot read model file ({exc}); check the path") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ModelFileError(f"{path}: not a complete JSON model file ({exc.msg} at char {exc.pos}); "
                             "it may be truncated: retrain or restore it") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("body"), dict) or not isinstance(doc.get("sha256"), str):
        raise ModelFileError(f"{path}: not a hybridperf model file (no body/sha256); train one with 'hybridperf train'")
    body = doc["body"]
    payload = json.dumps(body, sort_keys=True, allow_nan=False).encode("utf-8")
    if _sha(payload) != doc["sha256"]:
        raise ModelFileError(f"{path}: checksum mismatch: the file was modified after it was written; retrain it")
    if body.get("format") != FORMAT:
        raise ModelFileError(f"{path}: model format {body.get('format')!r} is not {FORMAT!r}; retrain with this version")
    if body.get("feature_version") != FEATURE_VERSION:
        raise ModelFileError(f"{path}: model uses feature version {body.get('feature_version')!r}, this hybridperf "
                             f"computes version {FEATURE_VERSION}; retrain the model")
    st = _need(body, "estimator", dict, path)
    cols = _need(body, "feature_columns", list, path)
    mode = _need(st, "mode", str, path)
    if mode not in MODES:
        raise ModelFileError(f"{path}: unknown mode {mode!r}")
    est = HybridRegressor(baseline_column=st.get("baseline_column"), mode=mode, coverage=st.get("coverage"),
                          n_splits=int(st.get("n_splits", 5)), random_state=st.get("random_state"),
                          group_columns=st.get("group_columns"), shrink_residual=bool(st.get("shrink_residual", False)),
                          calibration=str(st.get("calibration", "scale")))
    n = int(_need(st, "n_features_in", int, path))
    if n != len(cols):
        raise ModelFileError(f"{path}: {len(cols)} feature names but {n} features; the file is inconsistent")

    def arr(v: Any) -> np.ndarray:
        return np.array([np.nan if x is None else x for x in v], dtype=np.float64)

    est.n_features_in_ = n
    est.feature_names_in_ = np.asarray(cols, dtype=object)
    est.offset_ = float(_need(st, "offset", (int, float), path))
    est.residual_weight_ = float(_need(st, "residual_weight", (int, float), path))
    try:
        est.residual_weights_ = {float(k): float(v) for k, v in _need(st, "residual_weights", list, path)}
    except (TypeError, ValueError):
        raise ModelFileError(f"{path}: residual_weights are malformed; retrain the model") from None
    try:
        est.group_offsets_ = [{float(k): (float(a), float(b)) for k, a, b in level}
                              for level in _need(st, "group_offsets", list, path)]
    except (TypeError, ValueError):
        raise ModelFileError(f"{path}: group_offsets are malformed; retrain the model") from None
    oof = st.get("oof_abs_log_errors")
    est.oof_abs_log_errors_ = None if oof is None else arr(oof)
    ext = st.get("extrap_abs_log_errors")
    est.extrap_abs_log_errors_ = None if ext is None else arr(ext)
    est.extrapolation_mask_ = np.array(_need(st, "extrapolation_mask", list, path), dtype=bool)
    est.feature_min_ = arr(_need(st, "feature_min", list, path))
    est.feature_max_ = arr(_need(st, "feature_max", list, path))
    est.discrete_values_ = [None if v is None else arr(v) for v in _need(st, "discrete_values", list, path)]
    est.domain_mask_ = np.array(_need(st, "domain_mask", list, path), dtype=bool)
    est.categorical_mask_ = np.array(_need(st, "categorical_mask", list, path), dtype=bool)
    if not (len(est.feature_min_) == len(est.feature_max_) == len(est.discrete_values_) == len(est.domain_mask_)
            == len(est.categorical_mask_) == len(est.extrapolation_mask_) == n):
        raise ModelFileError(f"{path}: per-feature arrays do not match the {n} features; the file is inconsistent")
    booster = body.get("booster")
    est.regressor_ = None
    if mode in ("hybrid", "boosting"):
        if not isinstance(booster, str):
            raise ModelFileError(f"{path}: {mode} model has no booster; retrain it")
        from xgboost import XGBRegressor
        from xgboost.core import XGBoostError

        reg = XGBRegressor()
        try:
            reg.load_model(bytearray(booster.encode("utf-8")))
        except XGBoostError as exc:
            raise ModelFileError(f"{path}: xgboost cannot read the booster ({str(exc).splitlines()[0][:120]})") from None
        if reg.n_features_in_ != n:
            raise ModelFileError(f"{path}: booster expects {reg.n_features_in_} features, file lists {n}")
        est.regressor_ = reg
    est.regressor = est.regressor_
    meta = body.get("metadata", {})
    if not isinstance(meta, dict):
        raise ModelFileError(f"{path}: metadata must be an object")
    return TrainedModel(estimator=est, feature_columns=tuple(cols), baseline=body.get("baseline"), metadata=meta)
