"""Safe model files: JSON state + xgboost's native JSON booster, checksummed, optionally signed, written atomically."""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from hybridperf.errors import HybridperfError
from hybridperf.files import atomic_write_text
from hybridperf.inputs import check_json_size, decode_text, read_input
from hybridperf.limits import MAX_MODEL_BYTES

__all__ = [
    "ARRAY_PREFIX",
    "FORMAT",
    "KEY_ENV",
    "READABLE_FORMATS",
    "ModelFileError",
    "binary_array",
    "booster_from_json",
    "booster_to_json",
    "decode_array",
    "encode_array",
    "first_non_number",
    "read_model_document",
    "regressor_from_params",
    "regressor_params",
    "write_model_document",
]

# A model file is {"body": {...}, "sha256": "...", ["hmac_sha256": "..."]}. The sha256 of the canonical body
# (sorted keys, no NaN) detects accidental damage (a truncated copy, a flipped bit, an edit that did not
# re-hash): integrity, not authenticity, since anyone can edit the body and recompute it. With
# $HYBRIDPERF_MODEL_KEY set, writing adds an HMAC-SHA256 of the same bytes under that key and reading refuses
# files without a valid one: only holders of the key can then produce files that load. Either way loading
# never runs code from the file (no pickle) and checks every field against a schema with ranges
# (hybridperf.learn.schema) and the booster's trees (hybridperf.learn.booster) before use.
FORMAT = "hybridperf-model/3"
# Formats this version reads: /2 stored float arrays as JSON lists of numbers, /3 as ARRAY_PREFIX strings.
READABLE_FORMATS = (FORMAT, "hybridperf-model/2")
# A float array as text: little-endian float64 bytes in base64 (NaN for a missing value, never inf). A model's
# 366k conformal scores as JSON numbers took 0.25 s to parse and 0.26 s to format again for the checksum, half
# of loading the shipped model.
ARRAY_PREFIX = "f8le:"
KEY_ENV = "HYBRIDPERF_MODEL_KEY"
_DOC_KEYS = {"body", "sha256", "hmac_sha256"}


class ModelFileError(HybridperfError):
    """A model file is missing, truncated, tampered with or from an incompatible version."""


def encode_array(a: Any) -> str:
    """Floats as :data:`ARRAY_PREFIX` + base64 of their little-endian float64 bytes (NaN and inf as NaN)."""
    v = np.asarray(a, dtype=np.float64).ravel()
    v = np.where(np.isfinite(v), v, np.nan).astype("<f8")
    return ARRAY_PREFIX + base64.b64encode(v.tobytes()).decode("ascii")


def binary_array(text: str) -> np.ndarray | None:
    """The float64 array of an :func:`encode_array` string; None if it is not one (prefix, base64 or length)."""
    if not text.startswith(ARRAY_PREFIX):
        return None
    try:
        raw = base64.b64decode(text[len(ARRAY_PREFIX):], validate=True)
    except (ValueError, binascii.Error):
        return None
    if len(raw) % 8:
        return None
    return np.frombuffer(raw, dtype="<f8").astype(np.float64)


_JSON_NUMBER_TYPES = frozenset({int, float, type(None)})


def first_non_number(values: list[Any], nullable: bool) -> int | None:
    """The index of the first item of ``values`` that is not a number (bool is not one) or, where
    ``nullable``, None; None when there is none. One pass over the items' exact types first: the types
    json.loads gives, so the item-by-item test only runs for other lists (a model's 400k scores: 0.2 s -> 0.02 s)."""
    if {type(x) for x in values} <= (_JSON_NUMBER_TYPES if nullable else _JSON_NUMBER_TYPES - {type(None)}):
        return None
    for i, x in enumerate(values):
        if not (isinstance(x, (int, float)) and not isinstance(x, bool)) and not (x is None and nullable):
            return i
    return None


def decode_array(v: Any, what: str) -> np.ndarray:
    """The inverse of :func:`encode_array`, or a format-2 list of numbers (null -> NaN); a ModelFileError if
    ``v`` is neither or holds an infinity."""
    if isinstance(v, str):
        out = binary_array(v)
        if out is None or np.isinf(out).any():
            raise ModelFileError(f"model file field {what!r} is not an encoded float array; retrain the model")
        return out
    if not isinstance(v, list) or first_non_number(v, nullable=True) is not None:
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
    """A fitted XGBRegressor from :func:`booster_to_json`'s text, checked to take ``n_features``.

    The text is checked first (:func:`hybridperf.learn.booster.check_booster`): xgboost's own reader
    aborts or crashes the process on some malformed boosters. xgboost then reads the checked document as
    UBJSON bytes written here (:mod:`hybridperf.learn.ubjson`), never the file's text: 7x faster than its JSON
    reader, and no difference between what was checked and what it parses.
    """
    from hybridperf.learn.booster import check_booster
    from hybridperf.learn.ubjson import encode

    doc = check_booster(text, n_features, ModelFileError)
    from xgboost import XGBRegressor
    from xgboost.core import XGBoostError

    try:
        raw = encode(doc)
    except ValueError as exc:
        raise ModelFileError(f"malformed xgboost booster: {exc}; retrain the model") from None
    reg = XGBRegressor()
    try:
        reg.load_model(raw)
    except XGBoostError as exc:
        raise ModelFileError(f"xgboost cannot read the booster ({str(exc).splitlines()[0][:120]})") from None
    if reg.n_features_in_ != n_features:
        raise ModelFileError(f"booster expects {reg.n_features_in_} features, the model has {n_features}")
    return reg


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _key() -> bytes | None:
    """The signing key from ``$HYBRIDPERF_MODEL_KEY`` (None when unset or empty)."""
    key = os.environ.get(KEY_ENV, "")
    return key.encode("utf-8") if key else None


def _hmac(key: bytes, payload: bytes) -> str:
    return hmac.new(key, payload, hashlib.sha256).hexdigest()


def write_model_document(body: Mapping[str, Any], path: str | Path) -> Path:
    """Write ``body`` (JSON values) as a checksummed model file, atomically; signed (HMAC-SHA256) when
    ``$HYBRIDPERF_MODEL_KEY`` is set."""
    body = {"format": FORMAT, **body}
    try:
        payload = json.dumps(body, sort_keys=True, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise ModelFileError(f"{path}: the model holds a value JSON cannot store ({exc})") from None
    doc: dict[str, Any] = {"sha256": _sha(payload), "body": json.loads(payload)}
    key = _key()
    if key is not None:
        doc["hmac_sha256"] = _hmac(key, payload)
    text = json.dumps(doc, sort_keys=True, indent=1, allow_nan=False)
    path = Path(path)
    if not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text, error=ModelFileError)
    return path


def _refuse_constant(name: str) -> Any:
    raise ModelFileError(f"non-finite number {name}")


def _checked_int(text: str) -> int:
    """An integer of the model file (77 of them in the shipped model, so a Python call each is free), refused
    beyond the float range: the schema and the state readers convert numbers to float."""
    value = int(text)
    if abs(value) > sys.float_info.max:
        raise ModelFileError(f"number {text[:30]}... is out of range")
    return value


def _parse(path: Path) -> Any:
    raw = read_input(path, error=ModelFileError, what="model file", max_bytes=MAX_MODEL_BYTES, decompress=False)
    text = decode_text(raw, str(path), ModelFileError)
    check_json_size(text, str(path))
    try:
        # Numbers too large for a float parse as inf: read_model_document refuses them when it hashes the body
        # (a parse_float hook did so here, at a Python call per number: 0.2 s of each load of the shipped model).
        return json.loads(text, parse_constant=_refuse_constant, parse_int=_checked_int)
    except json.JSONDecodeError as exc:
        raise ModelFileError(f"{path}: not a complete JSON model file ({exc.msg} at char {exc.pos}); "
                             "it may be truncated: retrain or restore it") from None
    except ModelFileError as exc:
        raise ModelFileError(f"{path}: {exc} in the model file; retrain or restore it") from None
    except (ValueError, RecursionError) as exc:  # integers with too many digits, nesting too deep
        raise ModelFileError(f"{path}: unreadable JSON ({' '.join(str(exc).split())[:100]}); retrain or restore "
                             "it") from None


def _check_signature(path: Path, doc: dict[str, Any], payload: bytes) -> None:
    key = _key()
    if key is None:
        return
    mac = doc.get("hmac_sha256")
    if not isinstance(mac, str):
        raise ModelFileError(f"{path}: the model file is not signed, and {KEY_ENV} is set so only files signed "
                             f"with that key load; re-save it with the key set, or unset {KEY_ENV}")
    if not hmac.compare_digest(mac, _hmac(key, payload)):
        raise ModelFileError(f"{path}: the signature does not match {KEY_ENV}: the file was modified or signed "
                             "with another key; retrain it, or use the key it was signed with")


def read_model_document(path: str | Path) -> dict[str, Any]:
    """The checked body of a model file written by :func:`write_model_document`.

    The file must be a regular file of at most :data:`~hybridperf.limits.MAX_MODEL_BYTES` (checked
    before it is opened, so a FIFO or ``/dev/zero`` is refused at once), UTF-8 JSON without NaN or
    infinities, whose body matches its sha256 and, when ``$HYBRIDPERF_MODEL_KEY`` is set, its HMAC.

    Raises
    ------
    ModelFileError
        If the file is unreadable, not JSON, truncated, fails its checksum or signature, or has another format.
    """
    path = Path(path)
    doc = _parse(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("body"), dict) or not isinstance(doc.get("sha256"), str) \
            or set(doc) - _DOC_KEYS:
        raise ModelFileError(f"{path}: not a hybridperf model file (expected body, sha256 and an optional "
                             "hmac_sha256); train one with 'hybridperf train'")
    body = doc["body"]
    try:
        payload = json.dumps(body, sort_keys=True, allow_nan=False).encode("utf-8")
    except ValueError:  # allow_nan=False: a number beyond the float range parsed as inf
        raise ModelFileError(f"{path}: a number in the model file is out of range (beyond 1.8e308); retrain or "
                             "restore it") from None
    if _sha(payload) != doc["sha256"]:
        raise ModelFileError(f"{path}: checksum mismatch: the file was modified after it was written; retrain it")
    _check_signature(path, doc, payload)
    if body.get("format") not in READABLE_FORMATS:
        raise ModelFileError(f"{path}: model format {str(body.get('format'))[:40]!r} is not {FORMAT!r}; "
                             "retrain with this version")
    return body
