"""Shared steps of the importers: reading bytes, JSON and CSV, units, GPU names, columns, repeats, provenance."""
from __future__ import annotations

import io
import json
import re
import warnings
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from hybridperf.errors import HybridperfError, SweepError
from hybridperf.hardware import load_gpu, normalize_name
from hybridperf.inputs import check_csv_table, check_json_size, read_input

T = TypeVar("T")

# Time units accepted by the importers, as factors to milliseconds.
UNIT_TO_MS: dict[str, float] = {
    "ns": 1e-6, "nanoseconds": 1e-6,
    "us": 1e-3, "µs": 1e-3, "microseconds": 1e-3,
    "ms": 1.0, "milliseconds": 1.0,
    "s": 1e3, "seconds": 1e3,
}

# Source device names (normalised: lower-case alphanumerics) that no shipped spec alias covers,
# mapped to the spec stem they would have. load_gpu() is tried first, so a spec added later wins.
_DEVICE_STEMS: dict[str, str] = {
    "gtx680": "geforce-gtx-680",
    "titanx": "geforce-gtx-titan-x",
    "gtx1080": "geforce-gtx-1080",
    "gtx1080ti": "geforce-gtx-1080-ti",
    "k20c": "tesla-k20c",
    "k40c": "tesla-k40c",
    "fijifuryx": "radeon-r9-fury-x",
    "hawaiir9290x": "radeon-r9-290x",
    "hawaiir9295x2": "radeon-r9-295x2",
    "polarisrx480": "radeon-rx-480",
    "tahitihd7970": "radeon-hd-7970",
    "firepros9150": "firepro-s9150",
    "xeones2697v2": "xeon-e5-2697-v2",
    "i76700k": "core-i7-6700k",
    "i53350": "core-i5-3350",
    "knl": "xeon-phi-knl",
    "teslav100pcie32gb": "tesla-v100-pcie-32gb",
    "nvidiaa10080gbpcie": "a100-pcie-80gb",
}


def slug(text: str, *, keep: str = "") -> str:
    """Lower-case name with runs of other characters replaced by '-' (``keep`` lists extra characters)."""
    pattern = rf"[^a-z0-9{re.escape(keep)}]+"
    return re.sub(pattern, "-", str(text).lower()).strip("-")


def resolve_gpu(device: str, source: str) -> str:
    """Map a device name recorded by a tool (e.g. 'NVIDIA GeForce RTX 2080 Ti') to a spec stem."""
    if not isinstance(device, str) or not device.strip():
        raise SweepError(f"{source}: no device name recorded; pass gpu=<spec name> (see 'hybridperf gpus')")
    candidates = [device, re.sub(r"^(nvidia|amd)\s+", "", device, flags=re.IGNORECASE)]
    hint = _DEVICE_STEMS.get(normalize_name(device))
    if hint:
        candidates.append(hint)
    for name in candidates:
        try:
            return load_gpu(name).key
        except HybridperfError:
            continue
    return hint or slug(re.sub(r"^(nvidia|amd)\s+", "", device, flags=re.IGNORECASE))


def resolve_devices(devices: Iterable[str], source: str, known: dict[str, str] | None = None,
                    gpu: str | None = None) -> dict[str, str]:
    """Source device name -> GPU spec stem for each name in ``devices`` not yet in ``known`` (updated).

    ``gpu``, when given, is the stem of every device (the user's override).
    """
    out = {} if known is None else known
    for device in devices:
        if device not in out:
            out[device] = gpu or resolve_gpu(device, source)
    return out


def time_factor(unit: str, source: str) -> float:
    """Factor converting ``unit`` to milliseconds."""
    key = str(unit).strip()
    factor = UNIT_TO_MS.get(key) or UNIT_TO_MS.get(key.lower())
    if factor is None:
        raise SweepError(f"{source}: unknown time unit {unit!r}; use one of {', '.join(sorted(set(UNIT_TO_MS)))}")
    return factor


def read_bytes(source: str | Path) -> bytes:
    """Read a regular file within the input size limit, gunzipping it (by magic number, not by name) in blocks
    within the same limit (:func:`hybridperf.inputs.read_input`)."""
    path = Path(source)
    raw = read_input(path, error=SweepError, what="source file")
    if not raw.strip():
        raise SweepError(f"{path}: the file is empty; check that the export finished")
    return raw


def short(exc: BaseException) -> str:
    """An exception's message on one line, at most 120 characters."""
    return " ".join(str(exc).split())[:120]


def read_csv(source: str | Path, *, expected: str, raw: bytes | None = None) -> pd.DataFrame:
    """A CSV file (gzip'd or not, or given as bytes) as a DataFrame; SweepErrors for bad input."""
    data = read_bytes(source) if raw is None else raw
    check_csv_table(data, str(source), SweepError)  # size, and no column named twice (pandas renames it 'x.1')
    try:
        return pd.read_csv(io.BytesIO(data), low_memory=False)
    except pd.errors.EmptyDataError:
        raise SweepError(f"{source}: the CSV is empty; expected {expected}") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        raise SweepError(f"{source}: cannot parse the CSV ({short(exc)}); check the file") from None


def read_text(source: str | Path) -> str:
    raw = read_bytes(source)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SweepError(f"{source}: not UTF-8 text (byte {exc.start}); check the file format") from None


def load_json(text: str, source: str | Path) -> Any:
    check_json_size(text, str(source))
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SweepError(f"{source}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
                         "the file may be truncated: re-export it") from None
    except (RecursionError, ValueError) as exc:  # nesting too deep, integers with too many digits
        raise SweepError(f"{source}: unreadable JSON ({short(exc)}); check the file") from None


def require(doc: Any, key: str, kind: type | tuple[type, ...], source: str | Path, where: str = "") -> Any:
    """``doc[key]`` checked for type; a SweepError naming the field otherwise."""
    place = f"{where}: " if where else ""
    if not isinstance(doc, dict):
        raise SweepError(f"{source}: {place}expected a JSON object, got {type(doc).__name__}; check the file format")
    if key not in doc:
        raise SweepError(f"{source}: {place}missing field {key!r}; check the file format or re-export it")
    value = doc[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        names = "/".join(k.__name__ for k in kinds)
        raise SweepError(f"{source}: {place}field {key!r} must be {names}, got {type(value).__name__}; "
                         "check the file format")
    return value


def require_columns(table: pd.DataFrame, names: Iterable[str], source: str | Path, fix: str,
                    what: str = "column") -> None:
    """A SweepError naming the first of ``names`` that ``table`` lacks, followed by ``fix``."""
    missing = [c for c in names if c not in table.columns]
    if missing:
        raise SweepError(f"{source}: missing {what} {missing[0]!r}; {fix}")


def first_non_numeric(table: pd.DataFrame, names: Iterable[str]) -> tuple[str, int] | None:
    """The first of ``names`` present in ``table`` whose dtype is not numeric, with its count of
    cells that are not numbers; None when every such column is numeric."""
    for c in names:
        if c in table.columns and not pd.api.types.is_numeric_dtype(table[c]):
            bad = pd.to_numeric(table[c], errors="coerce").isna() & table[c].notna()
            return c, int(bad.sum())
    return None


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def progress(items: Iterable[T], *, total: int | None = None, desc: str = "",
             enabled: bool | None = None) -> Iterator[T] | Iterable[T]:
    """Report the iteration's progress (:mod:`hybridperf.progress`: the command line draws a bar on a
    terminal); ``enabled=False`` reports nothing."""
    if enabled is False:
        return items
    from hybridperf.progress import track

    return track(items, f"import {desc}", total)


def warn(message: str, *, depth: int = 0) -> None:
    """A UserWarning attributed to the caller of the importer (``depth``: helper levels in between)."""
    warnings.warn(message, UserWarning, stacklevel=3 + depth)


def column_from_values(values: list[Any], name: str, source: str | Path) -> pd.Series:
    """A config column from raw values: int64 if all integers, float64 if numbers, else strings."""
    fast = pd.Series(values)  # numpy inference handles the common all-int / all-float cases quickly
    if pd.api.types.is_integer_dtype(fast) or pd.api.types.is_float_dtype(fast):
        return fast
    if pd.api.types.is_bool_dtype(fast):
        return fast.astype("int64")
    present = [v for v in values if v is not None]
    if all(isinstance(v, bool) for v in present) and present:
        dtype = "float64" if len(present) < len(values) else "int64"
        return pd.Series([None if v is None else int(v) for v in values], dtype=dtype)
    if all(is_number(v) or isinstance(v, bool) for v in present):
        nums = [np.nan if v is None else (int(v) if isinstance(v, bool) else v) for v in values]
        if len(present) == len(values) and all(isinstance(v, int) for v in nums):
            return pd.Series(nums, dtype="int64")
        return pd.Series(nums, dtype="float64")
    if all(isinstance(v, (str, int, float)) for v in present):
        return pd.Series([None if v is None else str(v) for v in values], dtype="str")
    bad = next(v for v in present if not isinstance(v, (str, int, float)))
    raise SweepError(f"{source}: parameter {name!r} has a value of type {type(bad).__name__} ({str(bad)[:30]}); "
                     "parameters must be numbers, booleans or strings")


def identity_columns(kernel: str, gpu: str, n: int) -> dict[str, pd.Series]:
    """The ``kernel`` and ``gpu`` columns (strings) of ``n`` rows of one kernel on one GPU."""
    return {"kernel": pd.Series([kernel] * n, dtype="str"), "gpu": pd.Series([gpu] * n, dtype="str")}


def size_columns(sizes: Mapping[str, Any], n: int) -> dict[str, np.ndarray]:
    """Constant ``size.<name>`` columns (float64) of ``n`` rows."""
    return {f"size.{k}": np.full(n, float(v)) for k, v in sizes.items()}


def repeat_stats(times: np.ndarray) -> dict[str, Any]:
    """Median, sample standard deviation (ddof=1; NaN for one repeat), min and max of repeated times
    (ms) along the last axis, under the sweep column names ``time_ms``, ``time_std_ms``..."""
    return {"time_ms": np.median(times, axis=-1),
            "time_std_ms": times.std(axis=-1, ddof=1) if times.shape[-1] > 1 else np.nan,
            "time_min_ms": times.min(axis=-1), "time_max_ms": times.max(axis=-1)}


def make_provenance(devices: Mapping[str, Any], units: Mapping[str, str], *, kernels: Mapping[str, Any] | None = None,
                    notes: list[str] | None = None, **details: Any) -> dict[str, Any]:
    """An importer's provenance: spec stem -> source device name, kernel -> source kernel name, units,
    format-specific ``details`` and notes (in this key order)."""
    prov: dict[str, Any] = {"source_devices": dict(devices)}
    if kernels is not None:
        prov["source_kernels"] = dict(kernels)
    prov["units"] = dict(units)
    prov.update(details)
    prov["notes"] = list(notes or [])
    return prov


def aggregate_repeats(runs: pd.DataFrame, key: list[str], time_col: str = "time_ms") -> pd.DataFrame:
    """One row per configuration from one row per run: median, count, std (ddof=1), min, max.

    Columns outside ``key`` and ``time_col`` keep their first non-missing value.
    """
    g = runs.groupby(key, sort=False, dropna=False)
    stats = g[time_col].agg(["median", "count", "std", "min", "max"])
    stats.columns = ["time_ms", "repeats", "time_std_ms", "time_min_ms", "time_max_ms"]
    rest = [c for c in runs.columns if c not in key and c != time_col]
    out = stats if not rest else g[rest].first().join(stats)
    out = out.reset_index()
    out["repeats"] = out["repeats"].astype("Int64")
    return out
