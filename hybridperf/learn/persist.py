"""Safe model files: JSON state + xgboost's native JSON booster, checksummed, written atomically; never pickle."""
from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from hybridperf.errors import HybridperfError
from hybridperf.files import atomic_write_text

__all__ = [
    "FORMAT",
    "ModelFileError",
    "booster_from_json",
    "booster_to_json",
    "decode_array",
    "encode_array",
    "read_model_document",
    "regressor_from_params",
    "regressor_params",
    "write_model_document",
]

FORMAT = "hybridperf-model/2"


class ModelFileError(HybridperfError):
    """A model file is missing, truncated, tampered with or from an incompatible version."""


def encode_array(a: Any) -> list[float | None]:
    """Floats as a JSON list (NaN and inf as null)."""
    return [None if not math.isfinite(v) else float(v) for v in np.asarray(a, dtype=np.float64).ravel()]


def decode_array(v: Any, what: str) -> np.ndarray:
    """The inverse of :func:`encode_array` (null -> NaN); a ModelFileError if ``v`` is not such a list."""
    if not isinstance(v, list) or not all(x is None or (isinstance(x, (int, float)) and not isinstance(x, bool))
                                          for x in v):
        raise ModelFileError(f"model file field {what!r} must be a list of numbers; retrain the model")
    return np.array([np.nan if x is None else x for x in v], dtype=np.float64)


def _json_scalar(v: Any) -> bool:
    if isinstance(v, (list, tuple)):
        return all(_json_scalar(x) for x in v)
    if isinstance(v, dict):
        return all(isinstance(k, str) and _json_scalar(x) for k, x in v.items())
    return isinstance(v, (str, bool, int)) or (isinstance(v, float) and math.isfinite(v))


def regressor_params(reg: Any) -> dict[str, Any] | None:
    """The constructor parameters of an (unfitted) XGBRegressor as JSON, defaults left out; None for None."""
    if reg is None:
        return None
    from xgboost import XGBRegressor

    if type(reg) is not XGBRegressor:
        raise ModelFileError(f"model files store xgboost's XGBRegressor as the residual learner, not "
                             f"{type(reg).__name__}; pass regressor=XGBRegressor(...) or keep the default")
    params = {}
    for k, v in reg.get_params(deep=False).items():
        if v is None or (k == "missing" and isinstance(v, float) and math.isnan(v)):
            continue
        if not _json_scalar(v):
            raise ModelFileError(f"XGBRegressor parameter {k}={v!r} cannot be stored in a model file; "
                                 "use numbers, strings or lists of them")
        params[k] = v
    return params


def regressor_from_params(params: Any) -> Any:
    """An unfitted XGBRegressor from :func:`regressor_params`' output (None for None)."""
    if params is None:
        return None
    if not isinstance(params, dict) or not _json_scalar(params):
        raise ModelFileError("model file field 'regressor' must be an object of XGBRegressor parameters")
    from xgboost import XGBRegressor

    try:
        return XGBRegressor(**params)
    except TypeError as exc:
        raise ModelFileError(f"model file regressor parameters are not XGBRegressor's ({exc})") from None


def booster_to_json(reg: Any) -> str | None:
    """A fitted XGBRegressor's booster in xgboost's native JSON format (None for None)."""
    return None if reg is None else reg.get_booster().save_raw(raw_format="json").decode("utf-8")


def booster_from_json(text: Any, n_features: int) -> Any:
    """A fitted XGBRegressor from :func:`booster_to_json`'s text, checked to take ``n_features``."""
    if not isinstance(text, str) or not text.strip():
        raise ModelFileError("model file has no booster where its mode needs one; retrain it")
    from xgboost import XGBRegressor
    from xgboost.core import XGBoostError

    reg = XGBRegressor()
    try:
        reg.load_model(bytearray(text.encode("utf-8")))
    except XGBoostError as exc:
        raise ModelFileError(f"xgboost cannot read the booster ({str(exc).splitlines()[0][:120]})") from None
    if reg.n_features_in_ != n_features:
        raise ModelFileError(f"booster expects {reg.n_features_in_} features, the model has {n_features}")
    return reg


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_model_document(body: Mapping[str, Any], path: str | Path) -> Path:
    """Write ``body`` (JSON values) as a checksummed model file, atomically."""
    body = {"format": FORMAT, **body}
    try:
        payload = json.dumps(body, sort_keys=True, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise ModelFileError(f"{path}: the model holds a value JSON cannot store ({exc})") from None
    doc = json.dumps({"sha256": _sha(payload), "body": json.loads(payload)}, sort_keys=True, indent=1,
                     allow_nan=False)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, doc)
    return path


def read_model_document(path: str | Path) -> dict[str, Any]:
    """The checked body of a model file written by :func:`write_model_document`.

    Raises
    ------
    ModelFileError
        If the file is unreadable, not JSON, truncated, fails its checksum, or has another format.
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
        raise ModelFileError(f"{path}: model format {body.get('format')!r} is not {FORMAT!r}; "
                             "retrain with this version")
    return body
