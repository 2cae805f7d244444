"""Kernel Tuner cache files (every schema version, open caches too) to sweeps, and back."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hybridperf.errors import SweepError
from hybridperf.importers._common import (
    column_from_values,
    identity_columns,
    is_number,
    make_provenance,
    read_text,
    repeat_stats,
    require,
    resolve_gpu,
    size_columns,
    slug,
)
from hybridperf.importers._common import progress as _progress
from hybridperf.importers._kt_format import (
    BOOKKEEPING,
    ERRORS,
    FAILED_SENTINEL,
    KERNELS,
    OWN,
    TIME_COLUMNS,
    TIMES_COLUMN,
    counter_name,
)
from hybridperf.importers.kernel_tuner_export import export_kernel_tuner
from hybridperf.inputs import check_json_size

__all__ = ["FAILED_SENTINEL", "KERNELS", "export_kernel_tuner", "read_kernel_tuner"]


def _parse(text: str, source: str) -> tuple[dict[str, Any], list[str]]:
    check_json_size(text, source)  # each JSON object or array becomes a Python object: count them first
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
    own = doc.get(f"{OWN}sizes")
    if isinstance(own, dict) and size_names is None:
        out = dict(own)
    else:
        ps = doc.get("problem_size")
        values = [ps] if is_number(ps) else ps if isinstance(ps, list) else []
        # Kernel Tuner writes 'callable' for a problem size computed by a function: no sizes then (sizes= gives them)
        if not all(is_number(v) for v in values):
            raise SweepError(f"{source}: problem_size must be a number or a list of numbers, got {ps!r}; "
                             "pass sizes={'N': ...} and fix the file")
        names = list(size_names) if size_names is not None else list(KERNELS.get(kname, ("", ()))[1])
        if values and len(names) != len(values):
            if size_names is not None or names:
                what = "size_names has" if size_names is not None else f"kernel {kname} has"
                raise SweepError(f"{source}: {what} {len(names)} size names ({', '.join(names)}) but problem_size "
                                 f"has {len(values)} values; give one name per value (size_names=, or sizes=)")
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


def _tune_keys(doc: dict[str, Any], source: str) -> list[str]:
    keys = require(doc, "tune_params_keys", list, source)
    if not keys or not all(isinstance(k, str) for k in keys):
        raise SweepError(f"{source}: tune_params_keys must be a non-empty list of names; check the file")
    return keys


def _names(doc: dict[str, Any], kernel: str | None, gpu: str | None, source: str) -> tuple[Any, str, Any, str]:
    """Kernel Tuner's kernel_name, the sweep's kernel name, the recorded device name and the GPU stem."""
    kname = doc.get("kernel_name")
    if kernel is None and not isinstance(doc.get(f"{OWN}kernel"), str) and not isinstance(kname, str):
        raise SweepError(f"{source}: no kernel_name recorded; pass kernel=<name>")
    kernel = kernel or doc.get(f"{OWN}kernel") or KERNELS.get(kname, ("kt-" + slug(kname, keep="_"),))[0]
    device = doc.get("device_name")
    gpu = gpu or doc.get(f"{OWN}gpu") or resolve_gpu(device, source)
    return kname, kernel, device, gpu


def _problem_sizes(doc: dict[str, Any], kname: Any, sizes: dict[str, float] | None,
                   size_names: list[str] | None, source: str, notes: list[str]) -> dict[str, float]:
    """The size parameters, with an Xgemm cache's K derived from GFLOP/s when not given (noted)."""
    size_values = _sizes(doc, kname if isinstance(kname, str) else "", sizes, size_names, source)
    if kname == "Xgemm" and {"M", "N"} <= set(size_values) and "K" not in size_values:
        size_values["K"], note = _xgemm_k(doc, size_values["M"], size_values["N"], source)
        notes.append(note)
    return size_values


@dataclass(frozen=True, slots=True)
class _Entries:
    """Columns filled entry by entry; ok entries with a ``times`` list are grouped by its length
    (repeats -> (rows, times)) so that their statistics are computed vectorised."""

    params: dict[str, list[Any]]
    cols: dict[str, np.ndarray]
    status: list[str]
    reason: list[str]
    counters: dict[str, dict[int, float]]
    by_len: dict[int, tuple[list[int], list[list[float]]]]
    times: dict[int, str]  # row -> the entry's ``times`` as JSON (kept for an export)
    fields: dict[str, str]  # counter name -> the cache's field name where they differ (GFLOP/s)

    @classmethod
    def empty(cls, keys: list[str], n: int) -> _Entries:
        return cls(params={k: [] for k in keys}, cols={c: np.full(n, np.nan) for c in TIME_COLUMNS},
                   status=[""] * n, reason=[""] * n, counters={}, by_len={}, times={}, fields={})


def _entry_time(entry: dict[str, Any], objective: Any, where: str, source: str) -> Any:
    """The entry's time: a number, or an error name (also under a custom objective)."""
    if "time" in entry:
        return entry["time"]
    if isinstance(objective, str) and isinstance(entry.get(objective), str):
        return entry[objective]
    raise SweepError(f"{source}: {where} has no 'time'; every Kernel Tuner entry records one")


def _time_status(t: Any, where: str, source: str) -> tuple[str, str]:
    """(status, reason) of an entry's time: an error name, the failure sentinel or a non-positive
    time fail; a positive number is ok."""
    if isinstance(t, str):
        return ERRORS.get(t, "failed"), t
    if not is_number(t):
        raise SweepError(f"{source}: {where}: time must be a number or an error name, got {type(t).__name__}")
    if not math.isfinite(t) or t >= FAILED_SENTINEL:
        return "failed", f"time={t:g} (Kernel Tuner failure sentinel)"
    if t <= 0:
        return "failed", f"non-positive time {t:g} recorded"
    return "ok", ""


def _ok_times(acc: _Entries, i: int, entry: dict[str, Any], t: float) -> None:
    """Queue the entry's ``times`` for the vectorised statistics, or take its time and own spread."""
    times = entry.get("times")
    if isinstance(times, list) and times:
        rows, lists = acc.by_len.setdefault(len(times), ([], []))
        rows.append(i)
        lists.append(times)
        if all(is_number(x) for x in times):
            acc.times[i] = json.dumps(times)
        return
    acc.cols["time_ms"][i] = t
    for c in TIME_COLUMNS[1:]:
        v = entry.get(OWN + c)
        acc.cols[c][i] = v if is_number(v) else np.nan


def _add_entry(acc: _Entries, i: int, ckey: Any, entry: Any, keys: list[str], objective: Any, source: str) -> None:
    where = f"cache entry {str(ckey)[:40]!r}"
    if not isinstance(entry, dict):
        raise SweepError(f"{source}: {where} is a {type(entry).__name__}, expected an object; check the file")
    for k in keys:
        if k not in entry:
            raise SweepError(f"{source}: {where} lacks parameter {k!r}; the entry does not match tune_params_keys")
        acc.params[k].append(entry[k])
    t = _entry_time(entry, objective, where, source)
    acc.status[i], acc.reason[i] = _time_status(t, where, source)
    if acc.status[i] == "ok":
        _ok_times(acc, i, entry, t)
    elif isinstance(entry.get(f"{OWN}reason"), str):
        acc.reason[i] = entry[f"{OWN}reason"]
    skip = set(keys)
    for k, v in entry.items():
        if k in skip or k in BOOKKEEPING or k.startswith(OWN) or not is_number(v):
            continue
        name = counter_name(k)
        acc.counters.setdefault(name, {})[i] = v
        if name != k:
            acc.fields[name] = k


def _repeat_columns(acc: _Entries, cache: dict[str, Any], source: str) -> None:
    """Median, count and spread of the queued ``times`` lists, one vectorised pass per length."""
    for length, (rows, times) in acc.by_len.items():
        try:
            arr = np.asarray(times, dtype="float64")
        except (TypeError, ValueError):
            bad = next(r for r, t in zip(rows, times) if not all(is_number(x) for x in t))
            raise SweepError(f"{source}: cache entry {str(list(cache)[bad])[:40]!r}: 'times' must be a list "
                             "of numbers") from None
        for c, v in repeat_stats(arr).items():
            acc.cols[c][rows] = v
        acc.cols["repeats"][rows] = length


def _frame(acc: _Entries, keys: list[str], kernel: str, gpu: str, size_values: dict[str, float],
           source: str) -> pd.DataFrame:
    n = len(acc.status)
    data: dict[str, Any] = identity_columns(kernel, gpu, n)
    data.update(size_columns(size_values, n))
    data.update({f"config.{k}": column_from_values(acc.params[k], k, source) for k in keys})
    data.update(acc.cols)
    data["status"], data["reason"] = pd.Series(acc.status, dtype="str"), pd.Series(acc.reason, dtype="str")
    for k, v in acc.counters.items():
        data[f"counter.{k}"] = pd.Series(v, dtype="float64").reindex(range(n)).to_numpy()
    if acc.times:
        data[TIMES_COLUMN] = pd.Series(acc.times, dtype="object").reindex(range(n)).to_numpy()
    df = pd.DataFrame(data)
    df["repeats"] = pd.Series(acc.cols["repeats"]).astype("Int64")
    return df


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
    keys = _tune_keys(doc, source)
    cache = require(doc, "cache", dict, source)
    objective = doc.get("objective", "time")
    kname, kernel, device, gpu = _names(doc, kernel, gpu, source)
    size_values = _problem_sizes(doc, kname, sizes, size_names, source, notes)
    acc = _Entries.empty(keys, len(cache))
    for i, (ckey, entry) in enumerate(_progress(cache.items(), total=len(cache), desc="kernel-tuner",
                                                enabled=progress)):
        _add_entry(acc, i, ckey, entry, keys, objective, source)
    _repeat_columns(acc, cache, source)
    df = _frame(acc, keys, kernel, gpu, size_values, source)
    df.attrs["provenance"] = make_provenance(
        {gpu: device}, {"time_ms": "ms; median of the entry's 'times' (Kernel Tuner's own 'time' is their mean)"},
        kernels={kernel: kname},
        kernel_tuner={"schema_version": doc.get("schema_version", "unversioned"), "objective": objective,
                      "problem_size": doc.get("problem_size"), "fields": acc.fields},
        notes=notes)
    return df
