"""The training domain of a model (kernels, GPUs, size ranges, config values) and why a row lies outside it."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from hybridperf.sweep import param_name

__all__ = ["outside_reasons", "training_domain"]

_CLOSED_SET_MAX = 256  # a config parameter with more distinct training values is stored as a range


def training_domain(rows: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Per kernel: the GPUs trained on, each size's [min, max], and the config values seen.

    Config values are a closed set (sorted list) up to 256 distinct values, else a [min, max] range.
    """
    out: dict[str, dict[str, Any]] = {}
    for kernel, g in rows.groupby("kernel"):
        d: dict[str, Any] = {"gpus": sorted(map(str, g["gpu"].unique()))}
        for col in g.columns:
            if col.startswith("size."):
                v = pd.to_numeric(g[col], errors="coerce").dropna()
                if len(v):
                    d[col] = [float(v.min()), float(v.max())]
            elif col.startswith("config."):
                v = pd.to_numeric(g[col], errors="coerce").dropna().unique()
                if len(v):
                    d[col] = (sorted(float(x) for x in v) if len(v) <= _CLOSED_SET_MAX
                              else [float(v.min()), float(v.max())])
        out[str(kernel)] = d
    return out


def outside_reasons(rows: pd.DataFrame, domain: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Why each row lies outside ``domain`` ('' when inside): an untrained kernel or GPU, a size
    beyond its trained range, a config value never trained (at most three reasons per row)."""
    why: list[list[str]] = [[] for _ in range(len(rows))]
    kernels = rows["kernel"].astype(str).to_numpy()
    gpus = rows["gpu"].astype(str).to_numpy()
    for kernel in np.unique(kernels):
        idx = np.flatnonzero(kernels == kernel)
        d = domain.get(kernel)
        if d is None:
            for i in idx:
                why[i].append(f"kernel {kernel} never trained")
            continue
        for i in idx[~np.isin(gpus[idx], d["gpus"])]:
            why[i].append(f"GPU {gpus[i]} never trained for this kernel")
        for col, seen in d.items():
            if col != "gpus" and col in rows.columns:
                v = pd.to_numeric(rows[col].iloc[idx], errors="coerce").to_numpy(dtype=np.float64)
                for i, reason in _column_reasons(col, seen, v, idx):
                    why[i].append(reason)
    return ["; ".join(w[:3]) if w else "" for w in why]


def _column_reasons(col: str, seen: list[float], v: np.ndarray, idx: np.ndarray) -> list[tuple[int, str]]:
    """(row, reason) for the values ``v`` of rows ``idx`` outside one column's training domain."""
    name = param_name(col)
    if col.startswith("size."):
        bad = (v < seen[0]) | (v > seen[1])
        return [(i, f"{name} {x:g} outside trained {seen[0]:g}..{seen[1]:g}") for i, x in zip(idx[bad], v[bad])]
    bad = ~np.isin(v, seen) & np.isfinite(v)
    if len(seen) == 2:  # a long list was stored as a range
        bad &= (v < seen[0]) | (v > seen[1])
    return [(i, f"{name} {x:g} never trained") for i, x in zip(idx[bad], v[bad])]
