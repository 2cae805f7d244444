"""NeuSight operator latency CSVs (GEMM/bmm/linear, conv, elementwise, layernorm, softmax) to sweeps."""
from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from hybridperf.errors import LimitError, SweepError
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
from hybridperf.importers._common import progress as _progress
from hybridperf.importers._gemm_names import gemm_tile
from hybridperf.kernel import load_kernel
from hybridperf.learn.domain import DEFAULTED_COLUMN
from hybridperf.limits import max_input_bytes, mib

__all__ = ["GEMM_OPS", "read_neusight"]

GEMM_OPS = ("bmm", "linear")
_COUNTERS = {"Warps per SM": "warps_per_sm", "Blocks per SM": "blocks_per_sm",
             "Grid x": "grid_x", "Grid y": "grid_y", "Grid z": "grid_z",
             "Block x": "block_x", "Block y": "block_y", "Block z": "block_z"}
_INFO = {"Kernel Name": "library_kernel", "Kernels": "kernels", "large": "large"}
_VERSIONS = ("Torch Version", "CUDNN Version", "CUDA Version")
_SIZE_NAMES = {"Kernel_Szie": "Kernel_Size"}  # NeuSight's column has a typo
_PER_GPU_DIR = re.compile(r"^p\d")


_GEMM_CONFIG = ("TILE_M", "TILE_N", "SLICED", "THREADS", "SPLITK")


def _tiles(names: pd.Series) -> pd.DataFrame:
    """TILE_M, TILE_N, SLICED per row from the kernel name (NaN where no scheme matches or the kernel uses
    tensor cores, which neusight-gemm does not model)."""
    out = {}
    for name in names.unique():
        t = gemm_tile(name)
        out[name] = (np.nan, np.nan, np.nan) if t is None or t.tensor_cores else (t.m, t.n, t.sliced)
    return pd.DataFrame([out[n] for n in names], columns=["TILE_M", "TILE_N", "SLICED"], index=names.index,
                        dtype="float64")


def _gemm_config(out: pd.DataFrame) -> None:
    """Config columns of the neusight-gemm descriptor, read from the record (in place).

    TILE_M x TILE_N and SLICED from the cuBLAS/CUTLASS kernel name (:func:`gemm_tile`), kept where the
    recorded grid confirms them (Grid x = ceil(K / TILE_M), Grid y = ceil(rows / TILE_N); rows = M, or
    B * M for linear); THREADS = Block x; SPLITK = Grid z / B (bmm) or Grid z (linear) where a whole
    number (B > 65535 caps Grid z); LINEAR = 1 for nn.Linear. A value the descriptor does not list is
    not kept either. What is not kept stays empty and is named in ``info.defaulted``, so a prediction
    of the row says its config was defaulted.
    """
    gemm = out["config.op"].notna()
    name = out.get("info.library_kernel", pd.Series("", index=out.index)).astype(str)
    cfg = _tiles(name)
    linear = out["config.op"] == "linear"
    rows = np.where(linear, out.get("size.B", 1.0) * out.get("size.M", np.nan), out.get("size.M", np.nan))
    if {"counter.grid_x", "counter.grid_y", "size.K"} <= set(out.columns):
        confirmed = ((out["counter.grid_x"] == np.ceil(out["size.K"] / cfg["TILE_M"]))
                     & (out["counter.grid_y"] == np.ceil(rows / cfg["TILE_N"])))
        cfg.loc[~confirmed, ["TILE_M", "TILE_N", "SLICED"]] = np.nan
    cfg["THREADS"] = out["counter.block_x"] if "counter.block_x" in out.columns else np.nan
    if "counter.grid_z" in out.columns and "size.B" in out.columns:
        split = np.where(linear, out["counter.grid_z"], out["counter.grid_z"] / out["size.B"])
        cfg["SPLITK"] = np.where((split >= 1) & (split == np.round(split)), split, np.nan)
    else:
        cfg["SPLITK"] = np.nan
    cfg.loc[cfg["TILE_M"].isna(), list(_GEMM_CONFIG)] = np.nan  # no confirmed tile: the rest means nothing
    allowed = load_kernel("neusight-gemm").parameters
    for col in _GEMM_CONFIG:
        cfg[col] = cfg[col].where(cfg[col].isin(allowed[col].values or ()))
        out[f"config.{col}"] = cfg[col].where(gemm)
    out["config.LINEAR"] = linear.astype("float64").where(gemm)
    missing = cfg[list(_GEMM_CONFIG)].isna() & gemm.to_numpy()[:, None]
    marked = missing.apply(lambda r: ",".join(c for c, m in r.items() if m), axis=1)
    if marked.str.len().gt(0).any():
        out[DEFAULTED_COLUMN] = marked


def _files(root: Path) -> list[Path]:
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.name.lower().endswith((".csv", ".csv.gz"))
                   and _PER_GPU_DIR.match(p.parent.name))
    if not files:
        raise SweepError(f"{root}: no per-GPU NeuSight files (<op>/p<torch version>/<GPU>.csv[.gz]) below this "
                         "folder; pass one CSV file or the dataset/train/collect folder")
    total, limit = sum(p.stat().st_size for p in files), max_input_bytes()
    if total > limit:  # each file is also held to the limit once decompressed
        raise LimitError(f"{root}: {len(files)} files of {mib(total)} in all, over the {mib(limit)} limit; import "
                         "fewer folders at a time or set HYBRIDPERF_MAX_INPUT_MB to raise the limit")
    return files


def _load(path: Path, ops: set[str] | None, devices: set[str] | None = None) -> pd.DataFrame:
    """The rows of one file (of ``ops`` and ``devices`` when given), each naming its op and device."""
    t = read_csv(path, expected="NeuSight's header and rows")
    require_columns(t, ("OPName", "Latency", "Device"), path, "expected NeuSight's OPName, Latency, Device, ... layout")
    if t.empty:
        raise SweepError(f"{path}: no rows; check the file")
    if ops is not None:
        t = t[t["OPName"].isin(ops)].reset_index(drop=True)
    if devices is not None:
        t = t[t["Device"].astype("str").isin(devices)].reset_index(drop=True)
    if t["OPName"].isna().any() or t["Device"].isna().any():
        n = int((t["OPName"].isna() | t["Device"].isna()).sum())
        raise SweepError(f"{path}: {n} rows lack OPName or Device; fix the file")
    return t


def _size_names(t: pd.DataFrame, path: Path) -> list[str]:
    """Every column NeuSight does not define as metadata is a size; they, the counters and Latency are numbers."""
    size_cols = [c for c in t.columns if c not in _COUNTERS and c not in _INFO and c not in _VERSIONS
                 and c not in ("OPName", "Latency", "Device")]
    bad = first_non_numeric(t, size_cols + list(_COUNTERS) + ["Latency"])
    if bad is not None:
        hint = ("; a column NeuSight does not define is read as a size parameter" if bad[0] in size_cols else
                "; fix the file (NeuSight records numbers there)")
        raise SweepError(f"{path}: non-numeric values in column {bad[0]!r} ({bad[1]} rows){hint}")
    return size_cols


def _rows(t: pd.DataFrame, size_cols: list[str], gpus: dict[str, str], factor: float) -> pd.DataFrame:
    """One row per source row: kernel, gpu, size.*, config.op (GEMM ops), time_ms (NaN unless positive)."""
    ops_col = t["OPName"].astype("str")
    out = pd.DataFrame({
        "kernel": np.where(ops_col.isin(GEMM_OPS), "neusight-gemm", "neusight-" + ops_col.map(slug)),
        "gpu": t["Device"].astype("str").map(gpus),
    })
    for c in size_cols:
        out[f"size.{_SIZE_NAMES.get(c, re.sub(r'[^A-Za-z0-9_]+', '_', c).strip('_'))}"] = t[c].astype("float64")
    if ops_col.isin(GEMM_OPS).any():
        out["config.op"] = ops_col.where(ops_col.isin(GEMM_OPS))
    latency = t["Latency"].astype("float64") * factor
    out["time_ms"] = latency.where(latency > 0)
    return out


def _add_counters(t: pd.DataFrame, out: pd.DataFrame) -> None:
    """Grid, block and occupancy as counter.* (with threads per block and blocks), names as info.* (in place)."""
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


def _merge_repeats(out: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Rows with a time merged per shape (median; see aggregate_repeats), then the failed rows; and
    how many rows the merge removed."""
    key = [c for c in out.columns if c in ("kernel", "gpu") or c.startswith(("size.", "config."))]
    failed = out[out["time_ms"].isna()]
    ok = aggregate_repeats(out[out["time_ms"].notna()], key)
    ok["status"], ok["reason"] = "ok", ""
    if len(failed):
        failed = failed.assign(repeats=pd.array([pd.NA] * len(failed), dtype="Int64"),
                               status="failed", reason="no positive latency recorded")
    merged = int(out["time_ms"].notna().sum()) - len(ok)
    return pd.concat([ok, failed], ignore_index=True), merged


def _read_one(path: Path, ops: set[str] | None, gpu: str | None, factor: float, gpus: dict[str, str],
              devices: set[str] | None = None) -> tuple[pd.DataFrame, int, dict[str, set[str]]]:
    """One file's sweep rows, the rows merged, and the library versions it records; ``gpus`` (source
    device -> spec stem) is extended with its devices."""
    t = _load(path, ops, devices)
    if t.empty:  # a file of other ops or devices (ops=, devices=)
        return pd.DataFrame(), 0, {}
    size_cols = _size_names(t, path)
    resolve_devices(t["Device"].astype("str").unique(), str(path), known=gpus, gpu=gpu)
    out = _rows(t, size_cols, gpus, factor)
    _add_counters(t, out)
    if "config.op" in out.columns:
        _gemm_config(out)
    versions = {c: {str(v) for v in t[c].dropna().unique()} for c in _VERSIONS if c in t.columns}
    frame, merged = _merge_repeats(out)
    return frame, merged, versions


def read_neusight(source: str | Path, *, ops: Iterable[str] | None = None, gpu: str | None = None,
                  devices: Iterable[str] | None = None, time_unit: str = "ms",
                  progress: bool | None = None) -> pd.DataFrame:
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
        Override the GPU spec stem (default: resolved from the ``Device`` column); refused when the
        source records several devices, which it would merge under one name.
    devices : iterable of str, optional
        Only the rows of these ``Device`` values (e.g. ``["Tesla T4"]``): import one device of a
        multi-device file, e.g. to give it ``gpu=``.
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
        df, m, v = _read_one(f, wanted, gpu, factor, gpus, None if devices is None else set(devices))
        frames.append(df)
        merged += m
        rows_in += len(df) + m
        for k, vals in v.items():
            versions.setdefault(k, set()).update(vals)
    frames = [f for f in frames if len(f)]
    if not frames:
        which = [f"ops {', '.join(sorted(wanted))}"] if wanted is not None else []
        which += [f"devices {', '.join(sorted(devices))}"] if devices is not None else []
        raise SweepError(f"{source}: no rows for {' and '.join(which) or 'any op'}; check ops= and devices= (the "
                         "Device column names devices as NeuSight recorded them, e.g. 'Tesla T4')")
    out = pd.concat(frames, ignore_index=True)
    if merged:
        warn(f"{source}: merged {merged} repeated measurements of an already-recorded shape "
             f"({rows_in} source rows -> {len(out)} rows; median, repeats = rows merged)")
    out.attrs["provenance"] = make_provenance(
        {s: d for d, s in gpus.items()},
        {"time_ms": f"ms; NeuSight 'Latency' ({time_unit}), itself a mean over NeuSight's timing loop"},
        kernels=dict.fromkeys(out["kernel"].unique(), "PyTorch op (library kernel: info.library_kernel)"),
        neusight={"files": len(files), "source_rows": rows_in, "merged_duplicate_rows": merged,
                  "versions": {k: sorted(v) for k, v in versions.items()}})
    return out
