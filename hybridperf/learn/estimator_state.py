"""A HybridRegressor's parameters and fitted state as JSON, and back (the model file's estimator part)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from hybridperf.learn.modes import MODES
from hybridperf.learn.persist import (
    ModelFileError,
    booster_from_json,
    booster_to_json,
    decode_array,
    encode_array,
    regressor_from_params,
    regressor_params,
)

if TYPE_CHECKING:
    from hybridperf.learn.estimator import HybridRegressor

__all__ = ["estimator_from_dict", "estimator_to_dict"]


def estimator_to_dict(est: HybridRegressor) -> dict[str, Any]:
    """Every parameter and the fitted state of ``est`` as JSON values (the booster as xgboost's JSON)."""
    params = est.get_params(deep=False)
    params["regressor"] = regressor_params(params["regressor"])
    for key in ("group_columns", "extrapolation_columns"):
        if params[key] is not None and not isinstance(params[key], str):
            params[key] = list(params[key])
    optional = {k: None if getattr(est, k) is None else encode_array(getattr(est, k))
                for k in ("oof_abs_log_errors_", "extrap_abs_log_errors_")}
    return {
        "params": params,
        "n_features_in_": int(est.n_features_in_),
        "feature_names_in_": [str(c) for c in getattr(est, "feature_names_in_", [])],
        "offset_": float(est.offset_),
        "group_offsets_": [[[k, v[0], v[1]] for k, v in sorted(t.items())] for t in est.group_offsets_],
        "residual_weight_": float(est.residual_weight_),
        "residual_weights_": [[k, v] for k, v in sorted(est.residual_weights_.items())],
        **_within_to_dict(est),
        **optional,
        "feature_min_": encode_array(est.feature_min_),
        "feature_max_": encode_array(est.feature_max_),
        "extrapolation_mask_": [bool(v) for v in est.extrapolation_mask_],
        "booster": booster_to_json(est.regressor_),
        "transfer_offsets_": [[[k, v[0], v[1]] for k, v in sorted(t.items())] for t in est.transfer_offsets_],
        "transfer_offset_": float(est.transfer_offset_),
        "transfer_booster": None if est.transfer_regressor_ is None else booster_to_json(est.transfer_regressor_),
        "transfer_kernels_": sorted(getattr(est, "transfer_kernels_", [])),
    }


def _within_to_dict(est: HybridRegressor) -> dict[str, Any]:
    """The residual weights inside the trained sizes and the sizes per (kernel, GPU) (absent where the model has none,
    as in files written before them)."""
    if getattr(est, "within_weight_", None) is None:
        return {}
    return {"within_weight_": float(est.within_weight_),
            "within_weights_": [[k, v] for k, v in sorted(est.within_weights_.items())],
            "size_ranges_": [[k, [_json(x) for x in lo], [_json(x) for x in hi]]
                             for k, (lo, hi) in sorted(est.size_ranges_.items())]}


def _json(x: float) -> float | None:
    return None if np.isnan(x) else float(x)


def _within_from_dict(est: HybridRegressor, doc: dict[str, Any]) -> None:
    """Set what :func:`_within_to_dict` wrote (or none: the forward weights then serve every row)."""
    est.within_weight_, est.within_weights_, est.size_ranges_ = None, {}, {}
    if doc.get("within_weight_") is None:  # files before them, or a model without forward fits
        return
    n = int(np.sum(est.extrapolation_mask_))
    if n == 0 or not est.group_columns:  # the weights inside need sizes to place rows and groups to hold them
        raise ModelFileError("model file within_weight_ needs extrapolation and group columns; retrain the model")
    est.within_weight_ = float(doc["within_weight_"])
    est.within_weights_ = {float(k): float(v) for k, v in doc["within_weights_"]}
    for k, lo, hi in doc["size_ranges_"]:
        lo, hi = (np.array([np.nan if x is None else x for x in v], dtype=np.float64) for v in (lo, hi))
        if len(lo) != n or len(hi) != n:
            raise ModelFileError(f"model file size_ranges_ do not match its {n} extrapolation columns; "
                                 "retrain the model")
        est.size_ranges_[float(k)] = (lo, hi)


def _check_columns(est: HybridRegressor) -> None:
    """A ModelFileError where the estimator names a column its features have not, or holds offset tables for
    other group columns than it has (an edited file: predict failed with a ValueError or an IndexError)."""
    try:
        base = est._baseline_index()
        groups = est._group_indices()
        for column in (est.unseen_baseline_column, est.transfer_baseline_column):
            if column is not None:
                est._indices([column])
    except (ValueError, TypeError, IndexError):
        raise ModelFileError("model file estimator names a baseline, group or transfer column that is not among its "
                             "features; retrain the model") from None
    uses = est.mode == "calibrated" or (est.group_columns is not None and base is not None)
    if uses and len(est.group_offsets_) != len(groups) or len(est.transfer_offsets_) > max(len(groups) - 1, 0):
        raise ModelFileError(f"model file offset tables ({len(est.group_offsets_)} group, {len(est.transfer_offsets_)} "
                             f"transfer) do not match its {len(groups)} group columns; retrain the model")


def estimator_from_dict(cls: type[HybridRegressor], doc: Any) -> HybridRegressor:
    """The fitted estimator :func:`estimator_to_dict` described; a ModelFileError if malformed."""
    if not isinstance(doc, dict) or not isinstance(doc.get("params"), dict):
        raise ModelFileError("model file estimator state is missing; retrain the model")
    params = dict(doc["params"])
    unknown = set(params) - set(cls().get_params(deep=False))
    if unknown:
        raise ModelFileError(f"model file estimator has unknown parameter {sorted(unknown)[0]!r}; retrain it")
    params["regressor"] = regressor_from_params(params.get("regressor"))
    est = cls(**params)
    if est.mode not in MODES:
        raise ModelFileError(f"model file estimator has unknown mode {est.mode!r}; retrain it")
    try:
        n = int(doc["n_features_in_"])
        names = doc["feature_names_in_"]
        if names:
            est.feature_names_in_ = np.asarray([str(c) for c in names], dtype=object)
        est.n_features_in_ = n
        est.offset_ = float(doc["offset_"])
        est.group_offsets_ = [{float(k): (float(a), float(b)) for k, a, b in t} for t in doc["group_offsets_"]]
        est.residual_weight_ = float(doc["residual_weight_"])
        est.residual_weights_ = {float(k): float(v) for k, v in doc["residual_weights_"]}
        for key in ("oof_abs_log_errors_", "extrap_abs_log_errors_"):
            setattr(est, key, None if doc[key] is None else decode_array(doc[key], key))
        est.feature_min_ = decode_array(doc["feature_min_"], "feature_min_")
        est.feature_max_ = decode_array(doc["feature_max_"], "feature_max_")
        est.extrapolation_mask_ = np.array([bool(v) for v in doc["extrapolation_mask_"]], dtype=bool)
        _within_from_dict(est, doc)
        est.transfer_offsets_ = [{float(k): (float(a), float(b)) for k, a, b in t} for t in doc["transfer_offsets_"]]
        est.transfer_offset_ = float(doc["transfer_offset_"])
        # absent in files written before it: every kernel's transfer fit took its own baseline
        est.transfer_kernels_ = [float(k) for k in doc.get("transfer_kernels_", [])]
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelFileError(f"model file estimator state is malformed ({type(exc).__name__}: {exc}); "
                             "retrain the model") from None
    if names and len(names) != n or not (len(est.feature_min_) == len(est.feature_max_)
                                         == len(est.extrapolation_mask_) == n):
        raise ModelFileError(f"model file per-feature arrays do not match its {n} features; retrain the model")
    _check_columns(est)
    if est.transfer_kernels_:
        try:  # the column the kernels' transfer fit predicts from, and the group columns that name the kernels
            est._indices([est.transfer_baseline_column])
            est._group_indices()[-1]
        except (ValueError, TypeError, IndexError):
            raise ModelFileError("model file transfer_kernels_ need a transfer_baseline_column among its features "
                                 "and group columns; retrain the model") from None
    est.regressor_ = booster_from_json(doc.get("booster"), n) if est.mode in ("hybrid", "boosting") else None
    transfer = doc.get("transfer_booster")
    est.transfer_regressor_ = None if transfer is None or est.mode != "hybrid" else booster_from_json(transfer, n)
    return est
