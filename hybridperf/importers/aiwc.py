"""AIWC / OpenDwarfs kernel times with AIWC features (Johnston & Milthorpe 2018) to sweeps."""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from hybridperf.errors import SweepError
from hybridperf.importers._common import (
    aggregate_repeats,
    read_csv,
    resolve_gpu,
    slug,
    time_factor,
    warn,
)

__all__ = ["GPU_DEVICES", "SIZE_CLASSES", "read_aiwc"]

# OpenDwarfs problem-size classes, coded in size.class.
SIZE_CLASSES = {"tiny": 1, "small": 2, "medium": 3, "large": 4}
# Device names in the AIWC data that are GPUs (the others are CPUs and a Xeon Phi).
GPU_DEVICES = ("titanx", "gtx1080", "gtx1080ti", "k20c", "k40c", "fiji-furyx", "hawaii-r9-290x",
               "hawaii-r9-295x2", "polaris-rx480", "tahiti-hd7970", "firepro-s9150")
_REQUIRED = ("application", "size", "kernel", "device", "kernel_time")
_NOT_FEATURES = {*_REQUIRED, "total_time", "run", "invocation"}


def read_aiwc(source: str | Path, *, devices: Iterable[str] | None = None, time_unit: str = "us") -> pd.DataFrame:
    """Read an AIWC/OpenDwarfs CSV (``full_dat`` or ``rundata`` layout) into sweep rows.

    Parameters
    ----------
    source : str or Path
        CSV (optionally gzip'd) with one row per run: application, size, kernel, device,
        kernel_time (and optionally total_time, run, invocation, AIWC feature columns).
    devices : iterable of str, optional
        Keep only these source device names (e.g. :data:`GPU_DEVICES`); the rows left out are
        counted in a warning and in the provenance.
    time_unit : str
        Unit of kernel_time/total_time. The source does not state it; microseconds is concluded
        from the data (docs/datasets.md): per-GPU minima of 11-54 (a launch takes ~5-10 us)
        and ~9e12 AIWC instructions/s for lud_internal on a GTX 1080 Ti, near its 5.6e12 lane-op/s
        peak (ms would be 1000x below peak, ns 1000x above).

    Returns
    -------
    pandas.DataFrame
        One row per (application kernel, size class, invocation, device): kernel
        ``aiwc-<application>-<kernel>``, ``size.class`` (tiny=1, small=2, medium=3, large=4),
        ``time_ms`` the median kernel_time over runs with their count and spread, AIWC features
        as ``counter.aiwc_<feature>``, median total_time as ``counter.total_time_ms``.
    """
    source = str(source)
    t = read_csv(source, expected="the AIWC full_dat/rundata layout")
    missing = [c for c in _REQUIRED if c not in t.columns]
    if missing:
        raise SweepError(f"{source}: missing column {missing[0]!r}; expected {', '.join(_REQUIRED)}")
    factor = time_factor(time_unit, source)
    rows_in = len(t)
    if t[list(_REQUIRED[:4])].isna().any(axis=None):
        raise SweepError(f"{source}: {int(t[list(_REQUIRED[:4])].isna().any(axis=1).sum())} rows lack "
                         "application, size, kernel or device; fix the file")
    left_out = 0
    if devices is not None:
        keep = t["device"].astype("str").isin(set(devices))
        left_out = int((~keep).sum())
        t = t[keep].reset_index(drop=True)
        if left_out:
            warn(f"{source}: left out {left_out} of {rows_in} rows recorded on devices not in devices=")
        if t.empty:
            raise SweepError(f"{source}: no rows left for devices {sorted(devices)}; check the device names")
    classes = t["size"].astype("str").str.strip().str.lower()
    unknown = sorted(set(classes) - set(SIZE_CLASSES))
    if unknown:
        raise SweepError(f"{source}: unknown size class {unknown[0]!r} in column 'size'; "
                         f"use {', '.join(SIZE_CLASSES)}")
    numeric = ["kernel_time", *[c for c in ("total_time", "run", "invocation") if c in t.columns]]
    features = [c for c in t.columns if c not in _NOT_FEATURES]
    for c in numeric + features:
        if not pd.api.types.is_numeric_dtype(t[c]):
            raise SweepError(f"{source}: non-numeric values in column {c!r}; AIWC features and times are numbers")
    dev = t["device"].astype("str")
    gpus = {d: resolve_gpu(d, source) for d in dev.unique()}
    runs = pd.DataFrame({
        "kernel": ("aiwc-" + t["application"].astype("str").map(slug) + "-"
                   + t["kernel"].astype("str").map(lambda k: slug(k, keep="_"))),
        "gpu": dev.map(gpus),
        "size.class": classes.map(SIZE_CLASSES).astype("float64"),
    })
    if "invocation" in t.columns and t["invocation"].nunique() > 1:  # always 0 in the published data
        runs["size.invocation"] = t["invocation"].astype("float64")
    time = t["kernel_time"].astype("float64") * factor
    runs["time_ms"] = time.where(time > 0)
    if "total_time" in t.columns:
        runs["counter.total_time_ms"] = t["total_time"].astype("float64") * factor
    for c in features:
        runs[f"counter.aiwc_{slug(c, keep='_').replace('-', '_')}"] = t[c].astype("float64")
    runs["info.size_class"] = classes
    key = [c for c in runs.columns if c in ("kernel", "gpu") or c.startswith("size.")]
    out = aggregate_repeats(runs, key)
    if "counter.total_time_ms" in runs.columns:
        total = runs.groupby(key, sort=False, dropna=False)["counter.total_time_ms"].median().reset_index()
        out = out.drop(columns="counter.total_time_ms").merge(total, on=key, how="left")
    bad = out["time_ms"].isna().to_numpy()
    out["status"] = np.where(bad, "failed", "ok")
    out["reason"] = np.where(bad, "no positive kernel_time recorded", "")
    out["repeats"] = out["repeats"].where(~bad, pd.NA)
    out.attrs["provenance"] = {
        "source_devices": {s: d for d, s in gpus.items()},
        "source_kernels": {k: "OpenDwarfs OpenCL kernel" for k in out["kernel"].unique()},
        "units": {"time_ms": f"ms; converted from kernel_time assumed in {time_unit} (not stated by the source); "
                             "median over runs", "counter.total_time_ms": f"ms (from total_time in {time_unit})"},
        "aiwc": {"source_rows": rows_in, "rows_left_out_by_device": left_out, "runs_used": len(runs)},
        "notes": [],
    }
    return out
