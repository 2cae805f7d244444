"""AIWC / OpenDwarfs kernel times with AIWC features (Johnston & Milthorpe 2018) to sweeps."""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from hybridperf.errors import SweepError
from hybridperf.importers._common import (
    aggregate_repeats,
    first_non_numeric,
    make_provenance,
    read_csv,
    require_columns,
    resolve_devices,
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


def _check_names(t: pd.DataFrame, source: str) -> None:
    """Every run names its application, size, kernel and device."""
    ids = t[list(_REQUIRED[:4])].isna()
    if ids.any(axis=None):
        raise SweepError(f"{source}: {int(ids.any(axis=1).sum())} rows lack "
                         "application, size, kernel or device; fix the file")


def _keep_devices(t: pd.DataFrame, devices: Iterable[str] | None, source: str) -> tuple[pd.DataFrame, int]:
    """The runs recorded on ``devices`` (all when None) and how many were left out (warned)."""
    if devices is None:
        return t, 0
    keep = t["device"].astype("str").isin(set(devices))
    left_out = int((~keep).sum())
    t = t[keep].reset_index(drop=True)
    if left_out:
        warn(f"{source}: left out {left_out} of {len(keep)} rows recorded on devices not in devices=", depth=1)
    if t.empty:
        raise SweepError(f"{source}: no rows left for devices {sorted(devices)}; check the device names")
    return t, left_out


def _size_classes(t: pd.DataFrame, source: str) -> pd.Series:
    classes = t["size"].astype("str").str.strip().str.lower()
    unknown = sorted(set(classes) - set(SIZE_CLASSES))
    if unknown:
        raise SweepError(f"{source}: unknown size class {unknown[0]!r} in column 'size'; "
                         f"use {', '.join(SIZE_CLASSES)}")
    return classes


def _features(t: pd.DataFrame, source: str) -> list[str]:
    """The AIWC feature columns, after checking that they and the times are numeric."""
    numeric = ["kernel_time", *[c for c in ("total_time", "run", "invocation") if c in t.columns]]
    features = [c for c in t.columns if c not in _NOT_FEATURES]
    bad = first_non_numeric(t, numeric + features)
    if bad is not None:
        raise SweepError(f"{source}: non-numeric values in column {bad[0]!r}; AIWC features and times are numbers")
    return features


def _runs(t: pd.DataFrame, classes: pd.Series, gpus: dict[str, str], features: list[str],
          factor: float) -> pd.DataFrame:
    """One sweep-like row per run: kernel, gpu, size.*, time_ms (NaN unless positive), counters."""
    runs = pd.DataFrame({
        "kernel": ("aiwc-" + t["application"].astype("str").map(slug) + "-"
                   + t["kernel"].astype("str").map(lambda k: slug(k, keep="_"))),
        "gpu": t["device"].astype("str").map(gpus),
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
    return runs


def _configurations(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration: median time and total_time over its runs; failed without a positive time."""
    key = [c for c in runs.columns if c in ("kernel", "gpu") or c.startswith("size.")]
    out = aggregate_repeats(runs, key)
    if "counter.total_time_ms" in runs.columns:
        total = runs.groupby(key, sort=False, dropna=False)["counter.total_time_ms"].median().reset_index()
        out = out.drop(columns="counter.total_time_ms").merge(total, on=key, how="left")
    bad = out["time_ms"].isna().to_numpy()
    out["status"] = np.where(bad, "failed", "ok")
    out["reason"] = np.where(bad, "no positive kernel_time recorded", "")
    out["repeats"] = out["repeats"].where(~bad, pd.NA)
    return out


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
    require_columns(t, _REQUIRED, source, f"expected {', '.join(_REQUIRED)}")
    factor = time_factor(time_unit, source)
    rows_in = len(t)
    _check_names(t, source)
    t, left_out = _keep_devices(t, devices, source)
    classes = _size_classes(t, source)
    features = _features(t, source)
    gpus = resolve_devices(t["device"].astype("str").unique(), source)
    runs = _runs(t, classes, gpus, features, factor)
    out = _configurations(runs)
    out.attrs["provenance"] = make_provenance(
        {s: d for d, s in gpus.items()},
        {"time_ms": f"ms; converted from kernel_time assumed in {time_unit} (not stated by the source); "
                    "median over runs", "counter.total_time_ms": f"ms (from total_time in {time_unit})"},
        kernels={k: "OpenDwarfs OpenCL kernel" for k in out["kernel"].unique()},
        aiwc={"source_rows": rows_in, "rows_left_out_by_device": left_out, "runs_used": len(runs)})
    return out
