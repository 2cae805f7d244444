"""Sweeps back to Kernel Tuner cache files, which Kernel Tuner can replay and read_kernel_tuner reads back."""
from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hybridperf.errors import SweepError
from hybridperf.files import atomic_write_text
from hybridperf.importers._kt_format import ERRORS, FIELDS, OWN, TIME_COLUMNS, TIMES_COLUMN
from hybridperf.sweep import param_columns, validate_sweep

__all__ = ["export_kernel_tuner"]


def _py(value: Any) -> Any:
    """A config value as Kernel Tuner writes it: integral numbers as int."""
    if isinstance(value, str):
        return value
    v = float(value)
    return int(v) if v.is_integer() else v


def _export_columns(df: pd.DataFrame, path: Path) -> tuple[list[str], list[str]]:
    """The size and config columns of a sweep that fits one cache: one kernel, one GPU, one problem
    size, and every config parameter on every row."""
    for col in ("kernel", "gpu"):
        if df[col].nunique() != 1:
            raise SweepError(f"{path}: the sweep has {df[col].nunique()} values in {col!r}; export one at a time, "
                             f"e.g. df[df[{col!r}] == {df[col].iloc[0]!r}]")
    size_cols = [c for c in param_columns(df, "size.") if df[c].notna().any()]
    for c in size_cols:
        if df[c].nunique(dropna=False) != 1:
            raise SweepError(f"{path}: {c!r} has {df[c].nunique(dropna=False)} values; a cache holds one problem "
                             "size: export one at a time")
    config_cols = [c for c in param_columns(df, "config.") if df[c].notna().any()]
    if not config_cols:
        raise SweepError(f"{path}: the sweep has no config.* columns; a Kernel Tuner cache needs tunable parameters")
    for c in config_cols:
        if df[c].isna().any():
            raise SweepError(f"{path}: {c!r} is missing on {int(df[c].isna().sum())} rows; "
                             "Kernel Tuner needs every parameter on every entry")
    return size_cols, config_cols


def _times(rec: dict[str, Any]) -> list[float] | None:
    text = rec.get(TIMES_COLUMN)
    if not isinstance(text, str) or not text:
        return None
    times = json.loads(text)
    return [float(t) for t in times] if isinstance(times, list) and times else None


def _cache_entry(rec: dict[str, Any], params: dict[str, Any], stamp: str, counter_cols: list[str],
                 fields: dict[str, str]) -> dict[str, Any]:
    """One cache entry: the parameters, ``time`` (ms: the mean of ``times`` as Kernel Tuner records it, or
    the sweep's time where it kept no repeats; an error name on failed rows), ``times``, Kernel Tuner's
    bookkeeping fields, and hybridperf's repeats, spread, reason and counters (under Kernel Tuner's field
    names where it has one, e.g. ``GFLOP/s``)."""
    entry: dict[str, Any] = dict(params)
    times = _times(rec) if rec["status"] == "ok" else None
    if times:
        entry["time"] = float(np.mean(times))
        entry["times"] = times
    elif rec["status"] == "ok":
        entry["time"] = float(rec["time_ms"])
    else:
        entry["time"] = rec["reason"] if rec["reason"] in ERRORS else (
            "InvalidConfig" if rec["status"] == "invalid" else "RuntimeFailedConfig")
        entry[f"{OWN}reason"] = rec["reason"]
    entry.update(compile_time=0, verification_time=0, benchmark_time=0, strategy_time=0,
                 framework_time=0, timestamp=stamp)
    for c in TIME_COLUMNS[1:]:
        if c in rec and not pd.isna(rec[c]):
            entry[OWN + c] = int(rec[c]) if c == "repeats" else float(rec[c])
    for c in counter_cols:
        if not pd.isna(rec[c]):
            name = c[len("counter."):]
            entry[fields.get(name, name)] = float(rec[c])
    return entry


def _cache(df: pd.DataFrame, names: list[str], values: list[list[Any]], stamp: str,
           path: Path) -> dict[str, dict[str, Any]]:
    """Cache key (the config values joined by commas) -> entry, for every row."""
    counter_cols = param_columns(df, "counter.")
    cache: dict[str, dict[str, Any]] = {}
    spread = [c for c in TIME_COLUMNS[1:] if c in df.columns]  # repeats and spreads are optional sweep columns
    times = [TIMES_COLUMN] if TIMES_COLUMN in df.columns else []
    prov = df.attrs.get("provenance", {}) or {}
    fields = {**FIELDS, **dict((prov.get("kernel_tuner") or {}).get("fields") or {})}
    records = df[["time_ms", "status", "reason", *spread, *times, *counter_cols]].to_dict("records")
    for i, rec in enumerate(records):
        vals = [col[i] for col in values]
        key = ",".join(str(v) for v in vals)
        if key in cache:
            raise SweepError(f"{path}: two rows give the cache key {key!r}; make the config values distinct")
        cache[key] = _cache_entry(rec, dict(zip(names, vals)), stamp, counter_cols, fields)
    return cache


def _cache_text(head: dict[str, Any], cache: dict[str, dict[str, Any]]) -> str:
    """The cache file as Kernel Tuner writes it: header fields one per line, then one entry per line."""
    lines = ["{"] + [f"{json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()] + ['"cache": {']
    body = ",\n".join(f"{json.dumps(k)}: {json.dumps(v, allow_nan=False)}" for k, v in cache.items())
    return "\n".join(lines) + "\n" + body + "\n}\n}\n"


def _time_note(df: pd.DataFrame) -> str:
    ok = df["status"] == "ok"
    with_times = int(df.loc[ok, TIMES_COLUMN].notna().sum()) if TIMES_COLUMN in df.columns else 0
    if with_times == int(ok.sum()):
        return "mean of times (ms), as Kernel Tuner records it"
    return (f"mean of times (ms) on the {with_times} entries with times; the sweep's median time_ms on the other "
            f"{int(ok.sum()) - with_times} ok entries (it kept no repeats for them)")


def export_kernel_tuner(df: pd.DataFrame, path: str | Path, *, device_name: str | None = None,
                        kernel_name: str | None = None, timestamp: str | None = None) -> Path:
    """Write one (kernel, GPU, problem size) of a sweep as a Kernel Tuner cache file.

    Kernel Tuner can then replay the picks (``tune_kernel(..., cache=path)`` with a simulation
    runner). ``time`` is Kernel Tuner's: the mean of the entry's ``times``, both kept where the sweep
    came from a cache with repeats (``info.times_ms``); a sweep that kept no repeats has only its
    median ``time_ms`` to give, and the header's ``hybridperf_time`` says which. Repeats, spread, reason
    and counters travel as extra ``hybridperf_*``/counter keys (counters under Kernel Tuner's names,
    e.g. ``GFLOP/s``), so :func:`read_kernel_tuner` restores the same table.

    Parameters
    ----------
    df : pandas.DataFrame
        A sweep with one kernel, one GPU and one value per size column.
    path : str or Path
        Output ``.json`` file, written atomically.
    device_name, kernel_name : str, optional
        The names Kernel Tuner checks on replay; default the recorded source names
        (``df.attrs["provenance"]``), else the GPU stem and kernel name.
    timestamp : str, optional
        Timestamp stored in every entry (default: now, UTC).

    Returns
    -------
    Path
        The file written.
    """
    path = Path(path)
    df = validate_sweep(df, source=str(path), check_names=False)
    size_cols, config_cols = _export_columns(df, path)
    kernel, gpu = str(df["kernel"].iloc[0]), str(df["gpu"].iloc[0])
    prov = df.attrs.get("provenance", {}) or {}
    device_name = device_name or (prov.get("source_devices") or {}).get(gpu) or gpu
    kernel_name = kernel_name or (prov.get("source_kernels") or {}).get(kernel) or kernel
    stamp = timestamp or datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f+00:00")
    names = [c[len("config."):] for c in config_cols]
    sizes = {c[len("size."):]: _py(df[c].iloc[0]) for c in size_cols}
    values = [[_py(v) for v in df[c].tolist()] for c in config_cols]
    cache = _cache(df, names, values, stamp, path)
    head = {
        "schema_version": "1.0.0", "device_name": device_name, "kernel_name": kernel_name,
        "problem_size": list(sizes.values()), "tune_params_keys": names,
        "tune_params": {n: sorted(set(v), key=lambda x: (isinstance(x, str), x)) for n, v in zip(names, values)},
        "objective": "time", f"{OWN}time": _time_note(df), f"{OWN}kernel": kernel, f"{OWN}gpu": gpu,
        f"{OWN}sizes": sizes,
    }
    atomic_write_text(path, _cache_text(head, cache), error=SweepError)
    return path
