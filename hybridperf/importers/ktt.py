"""Kernel Tuning Toolkit (KTT) JSON results, with their profiler counters, to sweeps."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hybridperf.errors import SweepError
from hybridperf.importers._common import (
    column_from_values,
    identity_columns,
    is_number,
    load_json,
    make_provenance,
    read_text,
    repeat_stats,
    require,
    resolve_gpu,
    size_columns,
    slug,
    time_factor,
)
from hybridperf.importers._common import progress as _progress

__all__ = ["KERNELS", "STATUSES", "read_ktt"]

KERNELS: dict[str, str] = {"directCoulombSum": "ktt-coulomb-sum-3d", "directCoulombSum_kernel": "ktt-coulomb-sum-3d"}
# KTT ResultStatus -> sweep status.
STATUSES: dict[str, str] = {
    "Ok": "ok", "ComputationFailed": "failed", "ValidationFailed": "failed",
    "CompilationFailed": "failed", "DeviceLimitsExceeded": "invalid",
}
# CompilationData fields -> counter names shared with the kernel descriptors' launch keys.
_COMPILATION = {"RegistersCount": "registers_per_thread", "LocalMemorySize": "smem_per_block_bytes",
                "PrivateMemorySize": "local_bytes_per_thread", "ConstantMemorySize": "const_bytes"}


def _dims(cr: dict[str, Any], key: str, source: str, where: str) -> tuple[float, float, float]:
    d = require(cr, key, dict, source, where)
    out = tuple(d.get(a, 1) for a in ("X", "Y", "Z"))
    if not all(is_number(v) and v >= 1 for v in out):
        raise SweepError(f"{source}: {where}: {key} must hold positive X/Y/Z numbers, got {d!r}")
    return out  # type: ignore[return-value]


def _observed(result: dict[str, Any], grid_is_blocks: bool, source: str, where: str) -> dict[str, float]:
    """Launch geometry, compilation data and profiler counters of one KTT result."""
    crs = require(result, "ComputationResults", list, source, where)
    out: dict[str, float] = {}
    for cr in crs:
        if not isinstance(cr, dict):
            raise SweepError(f"{source}: {where}: ComputationResults must hold objects")
        prefix = "" if len(crs) == 1 else slug(str(cr.get("KernelFunction", "")), keep="_") + "."
        if "GlobalSize" in cr and "LocalSize" in cr:
            glob, loc = _dims(cr, "GlobalSize", source, where), _dims(cr, "LocalSize", source, where)
            grid = glob if grid_is_blocks else tuple(-(-g // b) for g, b in zip(glob, loc))
            for axis, g, b in zip("xyz", grid, loc):
                out[f"{prefix}grid_{axis}"], out[f"{prefix}block_{axis}"] = g, b
            out[f"{prefix}threads_per_block"] = float(np.prod(loc))
            out[f"{prefix}blocks"] = float(np.prod(grid))
        for key, name in _COMPILATION.items():
            v = (cr.get("CompilationData") or {}).get(key)
            if is_number(v):
                out[prefix + name] = v
        prof = cr.get("ProfilingData") or {}
        counters = prof.get("Counters", []) if isinstance(prof, dict) else []
        if not isinstance(counters, list):
            raise SweepError(f"{source}: {where}: ProfilingData.Counters must be a list")
        for c in counters:
            if not isinstance(c, dict) or not isinstance(c.get("Name"), str) or not is_number(c.get("Value")):
                raise SweepError(f"{source}: {where}: every profiler counter needs a Name and a numeric Value")
            out[prefix + c["Name"]] = c["Value"]
    return out


def _unit_factor(meta: dict[str, Any], time_unit: str | None, source: str) -> tuple[str, float]:
    """The time unit (``time_unit`` over Metadata.TimeUnit) and its factor to milliseconds."""
    unit = time_unit or meta.get("TimeUnit")
    if unit is None:
        raise SweepError(f"{source}: Metadata.TimeUnit is missing; pass time_unit='Microseconds' (or ns/ms/s)")
    return unit, time_factor(unit, source)


def _configuration(res: Any, names: list[str] | None, source: str,
                   where: str) -> tuple[list[str], dict[str, Any]]:
    """The parameter names and values of one result, which must name the same parameters as the earlier ones."""
    cfg = require(res, "Configuration", list, source, where)
    if not all(isinstance(c, dict) and isinstance(c.get("Name"), str) and "Value" in c for c in cfg):
        raise SweepError(f"{source}: {where}: Configuration must be a list of {{Name, Value}} objects")
    these = [c["Name"] for c in cfg]
    if names is not None and sorted(these) != sorted(names):
        raise SweepError(f"{source}: {where} has parameters {these} but earlier results have {names}; "
                         "import one kernel per file")
    return these, {c["Name"]: c["Value"] for c in cfg}


def _duration(res: dict[str, Any], source: str, where: str) -> float:
    """TotalDuration of an Ok result, else the sum of its kernels' Durations (source units)."""
    dur = res.get("TotalDuration")
    if dur is None:
        crs = require(res, "ComputationResults", list, source, where)
        dur = sum(cr.get("Duration", np.nan) if isinstance(cr, dict) else np.nan for cr in crs)
    if not is_number(dur) or not dur > 0:
        raise SweepError(f"{source}: {where}: status Ok but duration {dur!r} is not a positive number")
    return dur


def _group_results(results: list[Any], factor: float, grid_is_blocks: bool, source: str,
                   progress: bool | None) -> tuple[dict[tuple[Any, ...], dict[str, Any]], list[str] | None, set[str]]:
    """Results pooled per configuration (values, times in ms, observations, statuses), the parameter
    names, and the KernelNames seen."""
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    names: list[str] | None = None
    knames: set[str] = set()
    for i, res in enumerate(_progress(results, total=len(results), desc="ktt", enabled=progress)):
        where = f"Results[{i}]"
        these, values = _configuration(res, names, source, where)
        names = these if names is None else names
        key = tuple(values[n] for n in names)
        st = require(res, "Status", str, source, where)
        knames.add(str(res.get("KernelName", "")))
        g = groups.setdefault(key, {"values": values, "times": [], "observed": [], "status": [], "launch": None})
        g["status"].append(st)
        if STATUSES.get(st, "failed") == "ok":
            g["times"].append(_duration(res, source, where) * factor)
            g["observed"].append(_observed(res, grid_is_blocks, source, where))
    return groups, names, knames


def _row(g: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """The sweep columns of one configuration and how many of its results were not Ok although others were."""
    t = np.asarray(g["times"], dtype="float64")
    if not len(t):
        last = g["status"][-1]
        return {"status": STATUSES.get(last, "failed"), "reason": f"KTT status {last}", "time_ms": np.nan,
                "repeats": 0}, 0
    stats = repeat_stats(t)
    row: dict[str, Any] = {"status": "ok", "reason": "", "time_ms": stats["time_ms"], "repeats": len(t),
                           "time_std_ms": stats["time_std_ms"], "time_min_ms": stats["time_min_ms"],
                           "time_max_ms": stats["time_max_ms"]}
    names_seen = dict.fromkeys(k for o in g["observed"] for k in o)
    row.update({f"counter.{k}": float(np.median([o[k] for o in g["observed"] if k in o])) for k in names_seen})
    return row, sum(STATUSES.get(s, "failed") != "ok" for s in g["status"])


def _frame(values: list[dict[str, Any]], rows: list[dict[str, Any]], names: list[str], kernel: str, gpu: str,
           sizes: dict[str, float] | None, source: str) -> pd.DataFrame:
    """The sweep table: kernel, gpu, size.* (from ``sizes``), config.* (from ``values``), then ``rows``."""
    n = len(rows)
    for k, v in (sizes or {}).items():
        if not is_number(v):
            raise SweepError(f"{source}: size {k!r} must be a number, got {v!r}; fix sizes=")
    cols: dict[str, Any] = identity_columns(kernel, gpu, n)
    cols.update(size_columns(sizes or {}, n))
    for name in names:
        cols[f"config.{name}"] = column_from_values([v[name] for v in values], name, source)
    df = pd.concat([pd.DataFrame(cols), pd.DataFrame(rows)], axis=1)
    df["repeats"] = df["repeats"].replace(0, np.nan).astype("Int64")
    return df


def read_ktt(source: str | Path, *, kernel: str | None = None, gpu: str | None = None,
             sizes: dict[str, float] | None = None, time_unit: str | None = None,
             progress: bool | None = None) -> pd.DataFrame:
    """Read a KTT JSON output file (optionally gzip'd) into sweep rows.

    Parameters
    ----------
    source : str or Path
        KTT ``SaveResults(..., OutputFormat::JSON)`` output.
    kernel, gpu : str, optional
        Override the kernel name (default from :data:`KERNELS`, else ``ktt-<KernelName>``) and
        the GPU spec stem (default: resolved from ``Metadata.Device``).
    sizes : dict, optional
        Size parameters (KTT does not record the problem size), e.g. ``{"grid": 256}``.
    time_unit : str, optional
        Override ``Metadata.TimeUnit`` (Nanoseconds, Microseconds, Milliseconds, Seconds).
    progress : bool, optional
        Show a progress bar on stderr (default: only on a terminal).

    Returns
    -------
    pandas.DataFrame
        One row per distinct configuration. Repeated results of a configuration are pooled:
        ``time_ms`` is the median ``TotalDuration`` (converted to ms), ``repeats`` their count.
        Profiler counters become ``counter.<name>`` (median over profiled results), launch
        geometry ``counter.grid_x``... ``counter.threads_per_block``, ``counter.blocks``,
        compilation data ``counter.registers_per_thread``, ``counter.smem_per_block_bytes``...
    """
    source = str(source)
    doc = load_json(read_text(source), source)
    meta = require(doc, "Metadata", dict, source)
    results = require(doc, "Results", list, source)
    unit, factor = _unit_factor(meta, time_unit, source)
    grid_is_blocks = meta.get("GlobalSizeType", "OpenCL") == "CUDA"
    device = meta.get("Device")
    gpu = gpu or resolve_gpu(device, source)
    groups, names, knames = _group_results(results, factor, grid_is_blocks, source, progress)
    if not groups or names is None:
        raise SweepError(f"{source}: no Results recorded; check that tuning ran")
    if kernel is None:
        kname = min(knames)
        kernel = KERNELS.get(kname, "ktt-" + slug(kname, keep="_"))
    rows, failed_in_ok = zip(*(_row(g) for g in groups.values()))
    df = _frame([g["values"] for g in groups.values()], list(rows), names, kernel, gpu, sizes, source)
    df.attrs["provenance"] = make_provenance(
        {gpu: device},
        {"time_ms": f"ms; converted from KTT TimeUnit {unit} (TotalDuration), median over repeated results"},
        kernels={kernel: ",".join(sorted(knames))},
        ktt={"version": meta.get("KttVersion"), "compute_api": meta.get("ComputeApi"), "results": len(results),
             "configurations": len(groups),
             "failed_results_of_ok_configs": sum(failed_in_ok)})
    return df
