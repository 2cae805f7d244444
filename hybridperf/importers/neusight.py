"""NeuSight operator latency CSVs (GEMM/bmm/linear, conv, elementwise, layernorm, softmax) to sweeps."""
from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

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
from hybridperf.importers._common import progress as _progress

__all__ = ["GEMM_OPS", "read_neusight"]

GEMM_OPS = ("bmm", "linear")
_COUNTERS = {"Warps per SM": "warps_per_sm", "Blocks per SM": "blocks_per_sm",
             "Grid x": "grid_x", "Grid y": "grid_y", "Grid z": "grid_z",
             "Block x": "block_x", "Block y": "block_y", "Block z": "block_z"}
_INFO = {"Kernel Name": "library_kernel", "Kernels": "kernels", "large": "large"}
_VERSIONS = ("Torch Version", "CUDNN Version", "CUDA Version")
_SIZE_NAMES = {"Kernel_Szie": "Kernel_Size"}  # NeuSight's column has a typo
_PER_GPU_DIR = re.compile(r"^p\d")


_TILE = re.compile(r"_sgemm_(\d+)x(\d+)")


def _gemm_config(out: pd.DataFrame) -> None:
    """Config columns of the neusight-gemm descriptor, read from the record (in place).

    TILE_M x TILE_N from the cuBLAS kernel name (``<arch>_sgemm_<TM>x<TN>...``), SLICED = 4 for
    ``sliced1x4`` kernels, THREADS = Block x, SPLITK = Grid z / B (bmm) or Grid z (linear), LINEAR = 1
    for nn.Linear. Rows with a generic kernel name keep these empty (the descriptor's defaults apply).
    """
    gemm = out["config.op"].notna()
    name = out.get("info.library_kernel", pd.Series("", index=out.index)).astype(str)
    tiles = name.str.extract(_TILE).astype("float64")
    known = gemm & tiles[0].notna()
    out["config.TILE_M"] = tiles[0].where(known)
    out["config.TILE_N"] = tiles[1].where(known)
    out["config.SLICED"] = np.where(name.str.contains("sliced1x4"), 4.0, 1.0)
    out["config.SLICED"] = out["config.SLICED"].where(known)
    linear = out["config.op"] == "linear"
    if "counter.block_x" in out.columns:
        out["config.THREADS"] = out["counter.block_x"].where(known)
    if "counter.grid_z" in out.columns and "size.B" in out.columns:
        out["config.SPLITK"] = np.where(linear, out["counter.grid_z"], out["counter.grid_z"] / out["size.B"])
        out["config.SPLITK"] = out["config.SPLITK"].where(known)
    out["config.LINEAR"] = linear.astype("float64").where(gemm)


def _files(root: Path) -> list[Path]:
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.name.lower().endswith((".csv", ".csv.gz"))
                   and _PER_GPU_DIR.match(p.parent.name))
    if not files:
        raise SweepError(f"{root}: no per-GPU NeuSight files (<op>/p<torch version>/<GPU>.csv[.gz]) below this "
                         "folder; pass one CSV file or the dataset/train/collect folder")
    return files


def _read_one(path: Path, ops: set[str] | None, gpu: str | None, factor: float,
              gpus: dict[str, str]) -> tuple[pd.DataFrame, int, dict[str, set[str]]]:
    t = read_csv(path, expected="NeuSight's header and rows")
    missing = [c for c in ("OPName", "Latency", "Device") if c not in t.columns]
    if missing:
        raise SweepError(f"{path}: missing column {missing[0]!r}; "
                         "expected NeuSight's OPName, Latency, Device, ... layout")
    if ops is not None:
        t = t[t["OPName"].isin(ops)].reset_index(drop=True)
    if t.empty:
        which = f" for ops {', '.join(sorted(ops))}" if ops else ""
        raise SweepError(f"{path}: no rows{which}; check the file or ops=")
    if t["OPName"].isna().any() or t["Device"].isna().any():
        n = int((t["OPName"].isna() | t["Device"].isna()).sum())
        raise SweepError(f"{path}: {n} rows lack OPName or Device; fix the file")
    size_cols = [c for c in t.columns if c not in _COUNTERS and c not in _INFO and c not in _VERSIONS
                 and c not in ("OPName", "Latency", "Device")]
    for c in size_cols + list(_COUNTERS) + ["Latency"]:
        if c in t.columns and not pd.api.types.is_numeric_dtype(t[c]):
            bad = pd.to_numeric(t[c], errors="coerce").isna() & t[c].notna()
            raise SweepError(f"{path}: non-numeric values in column {c!r} ({int(bad.sum())} rows); "
                             "a column NeuSight does not define is read as a size parameter")
    ops_col, devices = t["OPName"].astype("str"), t["Device"].astype("str")
    for d in devices.unique():
        if d not in gpus:
            gpus[d] = gpu or resolve_gpu(d, str(path))
    out = pd.DataFrame({
        "kernel": np.where(ops_col.isin(GEMM_OPS), "neusight-gemm", "neusight-" + ops_col.map(slug)),
        "gpu": devices.map(gpus),
    })
    for c in size_cols:
        out[f"size.{_SIZE_NAMES.get(c, re.sub(r'[^A-Za-z0-9_]+', '_', c).strip('_'))}"] = t[c].astype("float64")
    if ops_col.isin(GEMM_OPS).any():
        out["config.op"] = ops_col.where(ops_col.isin(GEMM_OPS))
    latency = t["Latency"].astype("float64") * factor
    out["time_ms"] = latency.where(latency > 0)
    present = [c for c in _COUNTERS if c in t.columns]
    for c in present:
        out[f"counter.{_COUNTERS[c]}"] = t[c].astype("float64")
    if {"Block x", "Block y", "Block z"} <= set(present):
        out["counter.threads_per_block"] = t["Block x"] * t["Block y"] * t["Block z"]
    if {"Grid x", "Grid y", "Grid z"} <= set(present):
        out["counter.blocks"] = t["Grid x"] * t["Grid y"] * t["Grid z"]
    for c, name in _INFO.items():
        if c in t.columns:
            out[f"info.{name}"] = t[c].astype("str").where(t[c].notna(), "")
    if "config.op" in out.columns:
        _gemm_config(out)
    versions = {c: {str(v) for v in t[c].dropna().unique()} for c in _VERSIONS if c in t.columns}
    key = [c for c in out.columns if c in ("kernel", "gpu") or c.startswith(("size.", "config."))]
    failed = out[out["time_ms"].isna()]
    ok = aggregate_repeats(out[out["time_ms"].notna()], key)
    ok["status"], ok["reason"] = "ok", ""
    if len(failed):
        failed = failed.assign(repeats=pd.array([pd.NA] * len(failed), dtype="Int64"),
                               status="failed", reason="no positive latency recorded")
    merged = int(out["time_ms"].notna().sum()) - len(ok)
    return pd.concat([ok, failed], ignore_index=True), merged, versions


def read_neusight(source: str | Path, *, ops: Iterable[str] | None = None, gpu: str | None = None,
                  time_unit: str = "ms", progress: bool | None = None) -> pd.DataFrame:
    """Read NeuSight latency CSVs (one file, or every per-GPU file below a folder) into sweep rows.

    Parameters
    ----------
    source : str or Path
        A NeuSight CSV (``.csv`` or ``.csv.gz``), or a folder: then every
        ``<op>/p<torch version>/<GPU>.csv[.gz]`` below it is read (the combined per-op files
        next to them duplicate those rows and are skipped).
    ops : iterable of str, optional
        Only these ``OPName`` values (e.g. ``["bmm", "linear"]``).
    gpu : str, optional
        Override the GPU spec stem (default: resolved from the ``Device`` column).
    time_unit : str
        Unit of ``Latency`` (NeuSight records milliseconds).
    progress : bool, optional
        Show a progress bar over files on stderr (default: only on a terminal).

    Returns
    -------
    pandas.DataFrame
        ``bmm`` and ``linear`` become kernel ``neusight-gemm`` with ``config.op`` telling them
        apart; other ops become ``neusight-<op>``. Every column NeuSight does not define as
        metadata (B, M, N, K, H, Input_Channel, ...) is a ``size.*`` column; grid/block and
        occupancy are ``counter.*``; the cuBLAS/cuDNN kernel name is ``info.library_kernel``.
        Rows repeating the same shape on the same GPU are merged (median; ``repeats`` counts
        the merged rows, each of which NeuSight already averaged over its own timing loop) and
        the merge is reported as a warning.
    """
    root = Path(source)
    files = _files(root) if root.is_dir() else [root]
    factor = time_factor(time_unit, str(source))
    wanted = set(ops) if ops is not None else None
    frames, merged, gpus = [], 0, {}
    versions: dict[str, set[str]] = {}
    rows_in = 0
    for f in _progress(files, total=len(files), desc="neusight", enabled=progress):
        df, m, v = _read_one(f, wanted, gpu, factor, gpus)
        frames.append(df)
        merged += m
        rows_in += len(df) + m
        for k, vals in v.items():
            versions.setdefault(k, set()).update(vals)
    out = pd.concat(frames, ignore_index=True)
    if merged:
        warn(f"{source}: merged {merged} repeated measurements of an already-recorded shape "
             f"({rows_in} source rows -> {len(out)} rows; median, repeats = rows merged)")
    prov: dict[str, Any] = {
        "source_devices": {s: d for d, s in gpus.items()},
        "source_kernels": dict.fromkeys(out["kernel"].unique(), "PyTorch op (library kernel: info.library_kernel)"),
        "units": {"time_ms": f"ms; NeuSight 'Latency' ({time_unit}), itself a mean over NeuSight's timing loop"},
        "neusight": {"files": len(files), "source_rows": rows_in, "merged_duplicate_rows": merged,
                     "versions": {k: sorted(v) for k, v in versions.items()}},
        "notes": [],
    }
    out.attrs["provenance"] = prov
    return out
