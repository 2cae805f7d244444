"""Kernel Tuner cache files (every schema version, open caches too) to sweeps, and back."""
from __future__ import annotations

import functools
import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hybridperf.errors import SweepError
from hybridperf.files import atomic_write_text
from hybridperf.importers._common import (
    column_from_values,
    is_number,
    read_text,
    require,
    resolve_gpu,
    slug,
)
from hybridperf.importers._common import progress as _progress
from hybridperf.sweep import param_columns, validate_sweep

__all__ = ["FAILED_SENTINEL", "KERNELS", "export_kernel_tuner", "read_kernel_tuner"]

# Kernel Tuner's kernel_name -> (hybridperf kernel name, names of the problem_size entries).
KERNELS: dict[str, tuple[str, tuple[str, ...]]] = {
    "Xgemm": ("clblast-xgemm", ("M", "N")),
    "convolution_kernel": ("kt-convolution", ("W", "H")),
    "dedispersion_kernel": ("kt-dedispersion", ("samples", "dms", "beams")),
    "cn_pnpoly": ("kt-pnpoly", ("N",)),
    "calculate_temp": ("kt-hotspot", ("W", "H")),
    "ExpDist": ("kt-expdist", ()),
}
# Kernel Tuner < 0.4 recorded failed compilations/launches as this time.
FAILED_SENTINEL = 1e20
_ERRORS = {"InvalidConfig": "invalid", "CompilationFailedConfig": "failed", "RuntimeFailedConfig": "failed"}
# Per-entry fields about the tuning process itself, not the kernel: not imported.
_BOOKKEEPING = frozenset({"time", "times", "compile_time", "verification_time", "benchmark_time",
                          "strategy_time", "framework_time", "timestamp"})
_OWN = "hybridperf_"


def _parse(text: str, source: str) -> tuple[dict[str, Any], list[str]]:
    try:
        doc = json.loads(text)
        notes: list[str] = []
    except json.JSONDecodeError as exc:
        # An unfinished cache ends after the last entry's comma; Kernel Tuner itself closes it so.
        body = text.rstrip()
        body = body.removesuffix(",")
        try:
            doc = json.loads(body + "}}")
        except json.JSONDecodeError:
            raise SweepError(
                f"{source}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}), not even as an "
                "open Kernel Tuner cache; if the last entry is cut off, delete that line and retry") from None
        notes = ["open (unfinished) cache: trailing comma stripped and '}}' appended"]
    if not isinstance(doc, dict):
        raise SweepError(f"{source}: expected a JSON object (a Kernel Tuner cache), got {type(doc).__name__}; "
                         "check the format name")
    return doc, notes


def _sizes(doc: dict[str, Any], kname: str, sizes: dict[str, float] | None,
           size_names: list[str] | tuple[str, ...] | None, source: str) -> dict[str, float]:
    own = doc.get(f"{_OWN}sizes")
    if isinstance(own, dict) and size_names is None:
        out = dict(own)
    else:
        ps = doc.get("problem_size")
        values = [ps] if is_number(ps) else ps if isinstance(ps, list) else []
        if not all(is_number(v) for v in values):
            raise SweepError(f"{source}: problem_size must be a number or a list of numbers, got {ps!r}; "
                             "pass sizes={'N': ...} and fix the file")
        names = list(size_names) if size_names is not None else list(KERNELS.get(kname, ("", ()))[1])
        if values and len(names) != len(values):
            if size_names is not None:
                raise SweepError(f"{source}: size_names has {len(names)} names but problem_size has "
                                 f"{len(values)} values; give one name per value")
            names = [f"p{i}" for i in range(len(values))]
        out = dict(zip(names, values))
    out.update(sizes or {})
    for name, value in out.items():
        if not is_number(value) or not math.isfinite(value):
            raise SweepError(f"{source}: size {name!r} must be a finite number, got {value!r}; fix sizes=")
    return {str(k): float(v) for k, v in out.items()}


def _xgemm_k(doc: dict[str, Any], m: float, n: float, source: str) -> tuple[float, str]:
    """K of an Xgemm cache, whose problem_size holds only (M, N): solved from each entry's GFLOP/s and time.

    Kernel Tuner's gemm scripts record GFLOP/s = flops / time with flops = 2MNK + 2MK (the benchmark
    hub's ``ops``) or 2MNK. Both candidates are tried; the kernel needs K % KWG == 0 for every recorded
    KWG, which tells them apart (at M = N = K = 4096 the second reads 4097).
    """
    per_entry = [e["GFLOP/s"] * e["time"] * 1e6 for e in doc["cache"].values()
                 if isinstance(e, dict) and is_number(e.get("GFLOP/s")) and is_number(e.get("time"))
                 and 0 < e["time"] < FAILED_SENTINEL and e["GFLOP/s"] > 0]
    fix = "pass sizes={'K': ...} (CLI: --option sizes=K=...)"
    if not per_entry:
        raise SweepError(f"{source}: an Xgemm cache's problem_size gives M and N only, and no entry records GFLOP/s "
                         f"to derive K from; {fix}")
    flops = np.asarray(per_entry)
    kwg = [v for v in (doc.get("tune_params") or {}).get("KWG", []) if is_number(v) and v > 0]
    fits = []  # (distance to the nearest integer, K, formula) of the candidates the kernel accepts
    for formula, k in (("2MNK + 2MK", flops / (2 * m * (n + 1))), ("2MNK", flops / (2 * m * n))):
        k_med = float(np.median(k))
        if np.max(np.abs(k / k_med - 1)) > 0.01:
            raise SweepError(f"{source}: the K implied by GFLOP/s varies over entries ({k.min():.6g}-{k.max():.6g}); "
                             f"the metric is not 2MNK-based; {fix}")
        if round(k_med) >= 1 and all(round(k_med) % v == 0 for v in kwg):
            fits.append((abs(k_med - round(k_med)), round(k_med), formula))
    if not fits:
        raise SweepError(f"{source}: no K derived from GFLOP/s is a multiple of every KWG {kwg}; {fix}")
    _, k_int, formula = min(fits, key=lambda f: f[0])  # ties keep the hub's formula
    return float(k_int), f"K = {k_int} derived from the entries' GFLOP/s (flops = {formula})"


@functools.cache
def _counter_name(key: str) -> str:
    return slug(key.replace("/", "_per_"), keep="_.").replace("-", "_")


def read_kernel_tuner(source: str | Path, *, kernel: str | None = None, gpu: str | None = None,
                      sizes: dict[str, float] | None = None, size_names: list[str] | None = None,
                      progress: bool | None = None) -> pd.DataFrame:
    """Read a Kernel Tuner cache file (JSON, optionally gzip'd) into sweep rows.

    Parameters
    ----------
    source : str or Path
        The cache file. Closed and open (unfinished) caches of every schema version are read.
    kernel, gpu : str, optional
        Override the kernel name (default from :data:`KERNELS`, else ``kt-<kernel_name>``) and
        the GPU spec stem (default: resolved from ``device_name``).
    sizes : dict, optional
        Extra or overriding size parameters, e.g. ``{"K": 4096}``. An Xgemm cache's problem_size
        holds only M and N; without ``K`` here it is derived from the recorded GFLOP/s.
    size_names : list of str, optional
        Names for the entries of ``problem_size`` (default from :data:`KERNELS`, else p0, p1, ...).
    progress : bool, optional
        Show a progress bar on stderr (default: only on a terminal).

    Returns
    -------
    pandas.DataFrame
        One row per cache entry: ``time_ms`` is the median of ``times`` (ms), ``repeats`` its
        length; entries whose time is an error string or 1e20 become ``failed`` (or ``invalid``
        for ``InvalidConfig``) with the string as reason. Scalar numeric extras (GFLOP/s,
        registers, clocks...) become ``counter.*`` columns. Not yet validated.
    """
    source = str(source)
    doc, notes = _parse(read_text(source), source)
    keys = require(doc, "tune_params_keys", list, source)
    if not keys or not all(isinstance(k, str) for k in keys):
        raise SweepError(f"{source}: tune_params_keys must be a non-empty list of names; check the file")
    cache = require(doc, "cache", dict, source)
    objective = doc.get("objective", "time")
    kname = doc.get("kernel_name")
    if kernel is None and not isinstance(doc.get(f"{_OWN}kernel"), str) and not isinstance(kname, str):
        raise SweepError(f"{source}: no kernel_name recorded; pass kernel=<name>")
    kernel = kernel or doc.get(f"{_OWN}kernel") or KERNELS.get(kname, ("kt-" + slug(kname, keep="_"),))[0]
    device = doc.get("device_name")
    gpu = gpu or doc.get(f"{_OWN}gpu") or resolve_gpu(device, source)
    size_values = _sizes(doc, kname if isinstance(kname, str) else "", sizes, size_names, source)
    if kname == "Xgemm" and {"M", "N"} <= set(size_values) and "K" not in size_values:
        size_values["K"], note = _xgemm_k(doc, size_values["M"], size_values["N"], source)
        notes.append(note)

    n = len(cache)
    params: dict[str, list[Any]] = {k: [] for k in keys}
    cols = {c: np.full(n, np.nan) for c in ("time_ms", "repeats", "time_std_ms", "time_min_ms", "time_max_ms")}
    status, reason = [""] * n, [""] * n
    counters: dict[str, dict[int, float]] = {}
    by_len: dict[int, tuple[list[int], list[list[float]]]] = {}  # repeats -> (rows, times): vectorised below
    keyset = set(keys)
    for i, (ckey, entry) in enumerate(_progress(cache.items(), total=n, desc="kernel-tuner", enabled=progress)):
        where = f"cache entry {str(ckey)[:40]!r}"
        if not isinstance(entry, dict):
            raise SweepError(f"{source}: {where} is a {type(entry).__name__}, expected an object; check the file")
        for k in keys:
            if k not in entry:
                raise SweepError(f"{source}: {where} lacks parameter {k!r}; the entry does not match tune_params_keys")
            params[k].append(entry[k])
        if "time" in entry:
            t = entry["time"]
        elif isinstance(objective, str) and isinstance(entry.get(objective), str):
            t = entry[objective]
        else:
            raise SweepError(f"{source}: {where} has no 'time'; every Kernel Tuner entry records one")
        if isinstance(t, str):
            status[i], reason[i] = _ERRORS.get(t, "failed"), t
        elif not is_number(t):
            raise SweepError(f"{source}: {where}: time must be a number or an error name, got {type(t).__name__}")
        elif not math.isfinite(t) or t >= FAILED_SENTINEL:
            status[i], reason[i] = "failed", f"time={t:g} (Kernel Tuner failure sentinel)"
        elif t <= 0:
            status[i], reason[i] = "failed", f"non-positive time {t:g} recorded"
        else:
            status[i] = "ok"
            times = entry.get("times")
            if isinstance(times, list) and times:
                by_len.setdefault(len(times), ([], []))
                by_len[len(times)][0].append(i)
                by_len[len(times)][1].append(times)
            else:
                cols["time_ms"][i] = t
                for c in ("repeats", "time_std_ms", "time_min_ms", "time_max_ms"):
                    v = entry.get(_OWN + c)
                    cols[c][i] = v if is_number(v) else np.nan
        if status[i] != "ok" and isinstance(entry.get(f"{_OWN}reason"), str):
            reason[i] = entry[f"{_OWN}reason"]
        for k, v in entry.items():
            if k in keyset or k in _BOOKKEEPING or k.startswith(_OWN) or not is_number(v):
                continue
            counters.setdefault(_counter_name(k), {})[i] = v

    for length, (rows, times) in by_len.items():
        try:
            arr = np.asarray(times, dtype="float64")
        except (TypeError, ValueError):
            bad = next(r for r, t in zip(rows, times) if not all(is_number(x) for x in t))
            raise SweepError(f"{source}: cache entry {str(list(cache)[bad])[:40]!r}: 'times' must be a list "
                             "of numbers") from None
        cols["time_ms"][rows], cols["repeats"][rows] = np.median(arr, axis=1), length
        cols["time_std_ms"][rows] = arr.std(axis=1, ddof=1) if length > 1 else np.nan
        cols["time_min_ms"][rows], cols["time_max_ms"][rows] = arr.min(axis=1), arr.max(axis=1)

    data: dict[str, Any] = {"kernel": pd.Series([kernel] * n, dtype="str"), "gpu": pd.Series([gpu] * n, dtype="str")}
    data.update({f"size.{k}": np.full(n, v) for k, v in size_values.items()})
    data.update({f"config.{k}": column_from_values(params[k], k, source) for k in keys})
    data.update(cols)
    data["status"], data["reason"] = pd.Series(status, dtype="str"), pd.Series(reason, dtype="str")
    for k, v in counters.items():
        data[f"counter.{k}"] = pd.Series(v, dtype="float64").reindex(range(n)).to_numpy()
    df = pd.DataFrame(data)
    df["repeats"] = pd.Series(cols["repeats"]).astype("Int64")
    df.attrs["provenance"] = {
        "source_devices": {gpu: device}, "source_kernels": {kernel: kname},
        "units": {"time_ms": "ms; median of the entry's 'times' (Kernel Tuner's own 'time' is their mean)"},
        "kernel_tuner": {"schema_version": doc.get("schema_version", "unversioned"), "objective": objective,
                         "problem_size": doc.get("problem_size")},
        "notes": notes,
    }
    return df


def _py(value: Any) -> Any:
    """A config value as Kernel Tuner writes it: integral numbers as int."""
    if isinstance(value, str):
        return value
    v = float(value)
    return int(v) if v.is_integer() else v


def export_kernel_tuner(df: pd.DataFrame, path: str | Path, *, device_name: str | None = None,
                        kernel_name: str | None = None, timestamp: str | None = None) -> Path:
    """Write one (kernel, GPU, problem size) of a sweep as a Kernel Tuner cache file.

    Kernel Tuner can then replay the picks (``tune_kernel(..., cache=path)`` with a simulation
    runner). ``time`` is hybridperf's ``time_ms`` (a median; Kernel Tuner's own is a mean);
    repeats, spread, reason and counters travel as extra ``hybridperf_*``/counter keys, so
    :func:`read_kernel_tuner` restores the same table.

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
    kernel, gpu = str(df["kernel"].iloc[0]), str(df["gpu"].iloc[0])
    prov = df.attrs.get("provenance", {}) or {}
    device_name = device_name or (prov.get("source_devices") or {}).get(gpu) or gpu
    kernel_name = kernel_name or (prov.get("source_kernels") or {}).get(kernel) or kernel
    stamp = timestamp or datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f+00:00")
    names = [c[len("config."):] for c in config_cols]
    sizes = {c[len("size."):]: _py(df[c].iloc[0]) for c in size_cols}
    values = [[_py(v) for v in df[c].tolist()] for c in config_cols]
    counter_cols = param_columns(df, "counter.")
    extra_cols = ["repeats", "time_std_ms", "time_min_ms", "time_max_ms"]
    cache: dict[str, dict[str, Any]] = {}
    records = df[["time_ms", "status", "reason", *extra_cols, *counter_cols]].to_dict("records")
    for i, rec in enumerate(records):
        vals = [col[i] for col in values]
        key = ",".join(str(v) for v in vals)
        if key in cache:
            raise SweepError(f"{path}: two rows give the cache key {key!r}; make the config values distinct")
        entry: dict[str, Any] = dict(zip(names, vals))
        if rec["status"] == "ok":
            entry["time"] = float(rec["time_ms"])
        else:
            entry["time"] = rec["reason"] if rec["reason"] in _ERRORS else (
                "InvalidConfig" if rec["status"] == "invalid" else "RuntimeFailedConfig")
            entry[f"{_OWN}reason"] = rec["reason"]
        entry.update(compile_time=0, verification_time=0, benchmark_time=0, strategy_time=0,
                     framework_time=0, timestamp=stamp)
        for c in extra_cols:
            if not pd.isna(rec[c]):
                entry[_OWN + c] = int(rec[c]) if c == "repeats" else float(rec[c])
        for c in counter_cols:
            if not pd.isna(rec[c]):
                entry[c[len("counter."):]] = float(rec[c])
        cache[key] = entry
    head = {
        "schema_version": "1.0.0", "device_name": device_name, "kernel_name": kernel_name,
        "problem_size": list(sizes.values()), "tune_params_keys": names,
        "tune_params": {n: sorted(set(v), key=lambda x: (isinstance(x, str), x)) for n, v in zip(names, values)},
        "objective": "time", f"{_OWN}kernel": kernel, f"{_OWN}gpu": gpu, f"{_OWN}sizes": sizes,
    }
    lines = ["{"] + [f"{json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()] + ['"cache": {']
    body = ",\n".join(f"{json.dumps(k)}: {json.dumps(v, allow_nan=False)}" for k, v in cache.items())
    text = "\n".join(lines) + "\n" + body + "\n}\n}\n"
    atomic_write_text(path, text, error=SweepError)
    return path
