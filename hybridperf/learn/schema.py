"""The JSON schema of a model file's body: every field's type and range, checked before anything is built."""
from __future__ import annotations

import functools
from typing import Any

from hybridperf.analytical.run import TIME_MODELS
from hybridperf.learn.modes import CALIBRATIONS, MODES, WEIGHTINGS
from hybridperf.limits import MAX_MODEL_BYTES, MAX_TOML_BYTES

__all__ = ["BOOSTER_PARAM_SCHEMA", "MAX_FEATURES", "body_schema", "validate_body"]

MAX_FEATURES = 10_000
_MAX_ITEMS = 1_000_000  # per-row arrays (conformal scores) hold at most one value per training row
_NAME = {"type": "string", "minLength": 1, "maxLength": 1000}
_TEXT = {"type": "string", "maxLength": 100_000}
_SHA = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
_LOG = {"type": "number", "minimum": -100, "maximum": 100}  # a log-space offset: e^100 is far beyond any ratio
_FINITE = {"type": "number"}  # JSON numbers are finite: the reader refuses NaN and Infinity
_ID = {"type": "number", "minimum": -(2.0**53), "maximum": 2.0**53}  # group ids (hashes)
_SEED = {"type": "integer", "minimum": 0, "maximum": 2**32 - 1}


def _array(items: Any, max_items: int = _MAX_ITEMS, **extra: Any) -> dict[str, Any]:
    return {"type": "array", "items": items, "maxItems": max_items, **extra}


def _obj(properties: dict[str, Any], required: list[str] | None = None, extra: Any = False) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties) if required is None else required,
            "additionalProperties": extra}


def _numbers(lo: float | None = None, hi: float | None = None, *, nullable: bool = False,
             max_items: int = _MAX_ITEMS, encoded: bool = False) -> dict[str, Any]:
    """A long array of numbers (null allowed where ``nullable``) in [lo, hi], checked with numpy (the
    ``numbers`` keyword of this schema's validator) rather than item by item. ``encoded``: the array may also
    be :func:`hybridperf.learn.persist.encode_array`'s string (NaN standing for null), as format 3 writes it."""
    spec = {"min": lo, "max": hi, "nullable": nullable, "encoded": encoded, "max_items": max_items}
    if not encoded:
        return {"type": "array", "maxItems": max_items, "numbers": spec}
    # base64 of 8 bytes per item, after the prefix
    return {"type": ["array", "string"], "maxItems": max_items, "maxLength": 16 + 4 * ((8 * max_items + 2) // 3),
            "numbers": spec}


def _check_numbers(validator: Any, spec: dict[str, Any], instance: Any, schema: Any) -> Any:
    """The ``numbers`` keyword: every item a number (or null where allowed) within [min, max]."""
    import numpy as np
    from jsonschema.exceptions import ValidationError

    from hybridperf.learn.persist import binary_array, first_non_number

    if isinstance(instance, str) and spec["encoded"]:
        v = binary_array(instance)
        if v is None:
            yield ValidationError("is not an encoded float array (f8le: and base64 of float64 bytes)")
            return
        if len(v) > spec["max_items"]:
            yield ValidationError(f"holds {len(v)} items, more than {spec['max_items']}")
            return
        odd = np.flatnonzero(np.isinf(v) | (np.isnan(v) & (not spec["nullable"])))
        if len(odd):
            yield ValidationError(f"item {int(odd[0])} is {v[odd[0]]:g}, not a finite number")
            return
    elif not isinstance(instance, list):
        return
    else:
        i = first_non_number(instance, spec["nullable"])
        if i is not None:
            yield ValidationError(f"item {i} is {str(instance[i])[:20]!r}, not a number"
                                  f"{' or null' if spec['nullable'] else ''}")
            return
        v = np.array([np.nan if x is None else float(x) for x in instance], dtype=np.float64)
    lo, hi = spec["min"], spec["max"]
    bad = np.flatnonzero(((v < lo) if lo is not None else False) | ((v > hi) if hi is not None else False))
    if len(bad):
        yield ValidationError(f"item {int(bad[0])} is {v[bad[0]]:g}, outside [{lo}, {hi}]")


def _check_type(validator: Any, types: Any, instance: Any, schema: Any) -> Any:
    """jsonschema's ``type`` keyword with the instance in its message shortened (:func:`reprlib.repr`): the
    stock message holds the instance's whole repr, and every ``oneOf`` of null and an array or object built
    that repr of a valid model's arrays and trees, a fifth of a second per load of the shipped model."""
    import reprlib

    from jsonschema.exceptions import ValidationError

    types = [types] if isinstance(types, str) else list(types)
    if not any(validator.is_type(instance, t) for t in types):
        yield ValidationError(f"{reprlib.repr(instance)} is not of type {', '.join(repr(t) for t in types)}")


def _unit(exclusive_low: bool = True) -> dict[str, Any]:
    low = {"exclusiveMinimum": 0} if exclusive_low else {"minimum": 0}
    return {"type": "number", **low, "maximum": 1}


# XGBRegressor parameters a model may record, with the ranges hybridperf accepts: wide enough for any
# sensible tuning (optuna searches n_estimators 100-800, max_depth 3-10), narrow enough that a model
# file cannot make training or evaluation run without end.
BOOSTER_PARAM_SCHEMA: dict[str, Any] = _obj({
    "n_estimators": {"type": "integer", "minimum": 1, "maximum": 5000},
    "max_depth": {"type": "integer", "minimum": 0, "maximum": 20},
    "max_leaves": {"type": "integer", "minimum": 0, "maximum": 1 << 16},
    "max_bin": {"type": "integer", "minimum": 2, "maximum": 4096},
    "learning_rate": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
    "subsample": _unit(), "colsample_bytree": _unit(), "colsample_bylevel": _unit(), "colsample_bynode": _unit(),
    "min_child_weight": {"type": "number", "minimum": 0, "maximum": 1e6},
    "reg_lambda": {"type": "number", "minimum": 0, "maximum": 1e6},
    "reg_alpha": {"type": "number", "minimum": 0, "maximum": 1e6},
    "gamma": {"type": "number", "minimum": 0, "maximum": 1e6},
    "max_delta_step": {"type": "number", "minimum": 0, "maximum": 1e6},
    "num_parallel_tree": {"type": "integer", "minimum": 1, "maximum": 1},
    "n_jobs": {"type": "integer", "minimum": -1, "maximum": 1024},
    "random_state": _SEED,
    "verbosity": {"type": "integer", "minimum": 0, "maximum": 3},
    "objective": {"enum": ["reg:squarederror", "reg:absoluteerror", "reg:pseudohubererror"]},
    "tree_method": {"enum": ["hist", "approx", "exact", "auto"]},
    "grow_policy": {"enum": ["depthwise", "lossguide"]},
    "booster": {"enum": ["gbtree"]},
    "device": {"enum": ["cpu"]},
    "enable_categorical": {"type": "boolean"},
    "validate_parameters": {"type": "boolean"},
    "importance_type": {"enum": ["gain", "weight", "cover", "total_gain", "total_cover"]},
}, required=[])

_FEATURES = _obj({
    "params": _obj({
        "baseline": {"enum": ["auto", "none", *TIME_MODELS]},
        "size_aware": {"type": "boolean"}, "columns": {"enum": ["all", "params"]}, "group_ids": {"type": "boolean"},
    }),
    "baselines_": {"type": "object", "additionalProperties": {"enum": list(TIME_MODELS)}, "maxProperties": 100_000},
    "baseline_": {"oneOf": [{"type": "null"}, {"enum": list(TIME_MODELS)}]},
    "columns_": _array(_NAME, MAX_FEATURES, minItems=1, uniqueItems=True),
    "domain_": {"type": "object", "maxProperties": 100_000, "additionalProperties": _obj({
        "gpus": _array(_NAME, 10_000),
        "gpu_rows": {"type": "object", "maxProperties": 10_000,
                     "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 10**12}},
        "sizes": {"type": "object", "maxProperties": 1000, "additionalProperties": False,
                  "patternProperties": {r"^(size|counter)\.": _array(_FINITE, 2, minItems=2)}},
        "size_values": {"type": "object", "maxProperties": 1000, "additionalProperties": False,
                        "patternProperties": {r"^(size|counter)\.": {**_numbers(max_items=256), "minItems": 1}}},
        "configs": {"type": "object", "maxProperties": 1000, "additionalProperties": False,
                    "patternProperties": {r"^config\.": {"oneOf": [
                        _obj({"values": {**_numbers(max_items=256), "minItems": 1}}),
                        _obj({"range": _array(_FINITE, 2, minItems=2)})]}}},
        "regimes": {**_numbers(0, 1000, max_items=1000)},
        # combination codes of the configurations trained (hybridperf.learn.domain.combination_codes)
        "combinations": {"type": "array", "maxItems": 4096,
                         "items": {"type": "integer", "minimum": 0, "maximum": 2**53 - 1}},
    }, required=["gpus"]) | {"patternProperties": {  # the flat layout of models trained before the sizes/configs one
        r"^size\.": _array(_FINITE, 2, minItems=2), r"^config\.": {**_numbers(max_items=256), "minItems": 1}}}},
    # The descriptors trained with: kernel name -> (descriptor name, sha256), and each TOML text once by
    # sha256 (read by the descriptor parser: formulas, never code).
    "descriptors_": {"type": "object", "maxProperties": 100_000,
                     "additionalProperties": _obj({"name": _NAME, "sha256": _SHA})},
    "descriptor_texts_": {"type": "object", "maxProperties": 1000, "additionalProperties": False,
                          "patternProperties": {"^[0-9a-f]{64}$": {"type": "string", "minLength": 1,
                                                                  "maxLength": MAX_TOML_BYTES}}},
}, required=["params", "baselines_", "baseline_", "columns_", "domain_"])

_ESTIMATOR_PARAMS = {
    "regressor": {"oneOf": [{"type": "null"}, BOOSTER_PARAM_SCHEMA]},
    "baseline_column": {"oneOf": [{"type": "null"}, _NAME, {"type": "integer", "minimum": 0}]},
    "mode": {"enum": list(MODES)},
    "coverage": {"oneOf": [{"type": "null"}, _unit()]},
    "n_splits": {"type": "integer", "minimum": 2, "maximum": 100},
    "random_state": {"oneOf": [{"type": "null"}, _SEED]},
    "group_columns": {"oneOf": [{"type": "null"}, _array({"oneOf": [_NAME, {"type": "integer", "minimum": 0}]},
                                                          10)]},
    "shrink_residual": {"type": "boolean"},
    "calibration": {"enum": list(CALIBRATIONS)},
    "extrapolation_columns": {"oneOf": [{"type": "null"}, _NAME, _array(_NAME, MAX_FEATURES)]},
    "transfer": {"type": "boolean"},
    "weighting": {"enum": list(WEIGHTINGS)},
    "unseen_baseline_column": {"oneOf": [{"type": "null"}, _NAME]},
    "transfer_baseline_column": {"oneOf": [{"type": "null"}, _NAME, {"type": "integer", "minimum": 0}]},
}
# Parameters added later: absent in files written before them, which were fitted with the class default.
_LATER_PARAMS = {"weighting", "unseen_baseline_column", "transfer_baseline_column"}

_ESTIMATOR_FIELDS = {
    "params": _obj(_ESTIMATOR_PARAMS, required=[k for k in _ESTIMATOR_PARAMS if k not in _LATER_PARAMS]),
    "n_features_in_": {"type": "integer", "minimum": 1, "maximum": MAX_FEATURES},
    "feature_names_in_": _array(_NAME, MAX_FEATURES),
    "offset_": _LOG,
    "group_offsets_": _array(_array(_array(_FINITE, 3, minItems=3, prefixItems=[
        _ID, _LOG, {"type": "number", "minimum": 0, "maximum": 1e12}]), _MAX_ITEMS), 10),
    "residual_weight_": _unit(exclusive_low=False),
    "residual_weights_": _array(_array(_FINITE, 2, minItems=2, prefixItems=[_ID, _unit(exclusive_low=False)])),
    "oof_abs_log_errors_": {"oneOf": [{"type": "null"}, _numbers(0, 1000, nullable=True, encoded=True)]},
    "extrap_abs_log_errors_": {"oneOf": [{"type": "null"}, _numbers(0, 1000, nullable=True, encoded=True)]},
    "feature_min_": _numbers(nullable=True, max_items=MAX_FEATURES, encoded=True),
    "feature_max_": _numbers(nullable=True, max_items=MAX_FEATURES, encoded=True),
    "extrapolation_mask_": _array({"type": "boolean"}, MAX_FEATURES),
    "booster": {"oneOf": [{"type": "null"}, {"type": "string", "minLength": 2, "maxLength": MAX_MODEL_BYTES}]},
    "transfer_offsets_": _array(_array(_array(_FINITE, 3, minItems=3, prefixItems=[
        _ID, _LOG, {"type": "number", "minimum": 0, "maximum": 1e12}]), _MAX_ITEMS), 10),
    "transfer_offset_": _LOG,
    "transfer_booster": {"oneOf": [{"type": "null"}, {"type": "string", "minLength": 2, "maxLength": MAX_MODEL_BYTES}]},
    # kernel ids (estimator_state); absent in files written before it
    "transfer_kernels_": _array(_ID),
    # the residual weights inside the trained sizes, and each (kernel, GPU)'s (min, max) log2 sizes; absent in files
    # written before them and where a model has no forward fits
    "within_weight_": _unit(exclusive_low=False),
    "within_weights_": _array(_array(_FINITE, 2, minItems=2, prefixItems=[_ID, _unit(exclusive_low=False)])),
    "size_ranges_": _array(_array({}, 3, minItems=3, prefixItems=[
        _ID, _numbers(-1100, 1100, nullable=True, max_items=MAX_FEATURES),
        _numbers(-1100, 1100, nullable=True, max_items=MAX_FEATURES)])),
}
_LATER_FIELDS = {"transfer_kernels_", "within_weight_", "within_weights_", "size_ranges_"}
_ESTIMATOR = {**_obj(_ESTIMATOR_FIELDS, required=[k for k in _ESTIMATOR_FIELDS if k not in _LATER_FIELDS]),
              "dependentRequired": {"within_weight_": ["within_weights_", "size_ranges_"]}}

_INTERVALS = _obj({
    "version": {"type": "integer", "minimum": 1, "maximum": 1000},
    "scores": {"type": "object", "maxProperties": 10_000,
               "additionalProperties": _numbers(0, 1e9, nullable=True, encoded=True)},
    "shift_ref": {"type": "object", "maxProperties": 10_000, "additionalProperties": _FINITE},
    "min_bin": {"type": "integer", "minimum": 1, "maximum": 1_000_000},
    "difficulty": {"oneOf": [{"type": "null"}, {"type": "string", "minLength": 2, "maxLength": MAX_MODEL_BYTES}]},
    "difficulty_columns": _array({"type": "integer", "minimum": 0, "maximum": MAX_FEATURES}, MAX_FEATURES),
    "sigma_unseen_gpu": {"oneOf": [{"type": "null"}, {"type": "number", "exclusiveMinimum": 0, "maximum": 1e9}]},
    "sigma_few_runs": {"oneOf": [{"type": "null"}, {"type": "number", "exclusiveMinimum": 0, "maximum": 1e9}]},
    "sigma_beyond_sizes": {"oneOf": [{"type": "null"}, {"type": "number", "exclusiveMinimum": 0, "maximum": 1e9}]},
    "sigma_unseen_kernel": {"oneOf": [{"type": "null"}, {"type": "number", "exclusiveMinimum": 0, "maximum": 1e9}]},
    "shortlist_hits": {"type": "object", "maxProperties": 10_000, "additionalProperties": _obj({
        "q": _array({"type": "number", "exclusiveMinimum": 0, "maximum": 1}, 64, minItems=1),
        "p": _array({"type": "number", "minimum": 0, "maximum": 1}, 64, minItems=1),
        "groups": _array({"type": "number", "minimum": 1, "maximum": 1e12}, 64, minItems=1),
        "rho": {"type": "number", "exclusiveMinimum": -1, "exclusiveMaximum": 1}}, required=["q", "p", "groups"])},
    # hybridperf.learn.donors; absent in files written before it and where no GPU has few runs
    "donor_stacks": _array(_obj({
        "kernel": _NAME, "gpu": _NAME, "donors": _array(_NAME, 1000, minItems=1),
        "weights": _array({"type": "number", "minimum": 0, "maximum": 1}, 1001, minItems=2), "level": _LOG}), 10_000),
}, required=["scores"])

_METADATA = _obj({
    "created": {"type": "string", "maxLength": 64},
    "feature_version": {"type": "integer", "minimum": 0, "maximum": 1000},
    "n_rows": {"type": "integer", "minimum": 0, "maximum": 10**12},
    "n_dropped_not_ok": {"type": "integer", "minimum": 0, "maximum": 10**12},
    "kernels": {"type": "object", "additionalProperties": {"oneOf": [_SHA, {"const": ""}]}},
    "gpus": {"type": "object", "additionalProperties": {"oneOf": [_SHA, {"const": ""}]}},
    "versions": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 100}},
    "booster_params": BOOSTER_PARAM_SCHEMA,
    "tuning": _obj({"trials": {"type": "integer", "minimum": 0, "maximum": 1_000_000},
                    "cv_log_rmse": {"type": "number", "minimum": 0},
                    "study": {"oneOf": [{"type": "null"}, _TEXT]}}, required=[]),
    "training_log_rmse": {"type": "number", "minimum": 0},
    "data": {"type": "object", "additionalProperties": _SHA},
    "command": _TEXT,
}, required=[], extra=True)  # further provenance (train_model(provenance=...)) is free-form JSON


@functools.cache
def body_schema() -> dict[str, Any]:
    """The JSON schema (draft 2020-12) of a model file's body."""
    from hybridperf.learn.features import FEATURE_VERSION
    from hybridperf.learn.persist import READABLE_FORMATS

    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **_obj({"format": {"enum": list(READABLE_FORMATS)}, "feature_version": {"const": FEATURE_VERSION},
                "features": _FEATURES, "estimator": _ESTIMATOR, "metadata": _METADATA,
                "intervals": {"oneOf": [{"type": "null"}, _INTERVALS]}},
               required=["format", "feature_version", "features", "estimator", "metadata"]),
    }


@functools.cache
def _validator() -> Any:
    from jsonschema import Draft202012Validator, validators

    cls = validators.extend(Draft202012Validator, {"numbers": _check_numbers, "type": _check_type})
    return cls(body_schema())


def validate_body(body: Any) -> str | None:
    """The first schema violation of a model file body as ``'field $.a.b: why'``, or None if it conforms."""
    from jsonschema.exceptions import best_match

    error = best_match(_validator().iter_errors(body))
    if error is None:
        return None
    message = " ".join(error.message.split())
    if len(message) > 160:
        message = message[:157] + "..."
    return f"field {error.json_path}: {message}"

