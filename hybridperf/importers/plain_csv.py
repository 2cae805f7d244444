"""Plain CSV files with a column mapping and a time unit to sweeps."""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from hybridperf.errors import SweepError
from hybridperf.importers._common import (
    aggregate_repeats,
    make_provenance,
    read_csv,
    resolve_devices,
    size_columns,
    time_factor,
    warn,
)
from hybridperf.sweep import PREFIXES

__all__ = ["read_csv_sweep"]

_BASE = ("kernel", "gpu", "time_ms", "repeats", "time_std_ms", "time_min_ms", "time_max_ms", "status", "reason")
_TIMES = ("time_ms", "time_std_ms", "time_min_ms", "time_max_ms")


def _renamed(t: pd.DataFrame, mapping: dict[str, str], drop: list[str], source: str) -> pd.DataFrame:
    """The table with ``drop`` left out and ``mapping`` applied; every column left must be a sweep column."""
    for name in [*drop, *mapping]:
        if name not in t.columns:
            raise SweepError(f"{source}: column {name!r} named in mapping/drop is not in the file "
                             f"(have {', '.join(t.columns[:8])}); fix the name")
    for name, dest in mapping.items():
        prefix, _, rest = str(dest).partition(".")
        # a parameter's name is a formula's name; counter.* and info.* columns may hold any name (Nsight Compute's
        # dram__bytes_read.sum, a note's "Host Name")
        name_rule = r"[^=]*\S[^=]*" if prefix in ("counter", "info") else r"[A-Za-z_][A-Za-z0-9_]*"
        if dest not in _BASE and not (f"{prefix}." in PREFIXES and re.fullmatch(name_rule, rest)):
            raise SweepError(f"{source}: mapping {name}={dest!r} names no sweep column; map to kernel, gpu, time_ms, "
                             "status, reason or size.NAME / config.NAME / counter.NAME / info.NAME (NAME: letters, "
                             "digits and _)")
    t = t.drop(columns=drop).rename(columns=mapping)
    if len(set(t.columns)) != len(t.columns):
        raise SweepError(f"{source}: the mapping gives two columns the same name; map each to a distinct column")
    for c in t.columns:
        if c not in _BASE and not c.startswith(PREFIXES):
            raise SweepError(f"{source}: unmapped column {c!r}; map it to a sweep column (a time: --map {c}=time_ms "
                             f"with --option time_unit=us or ms; a parameter: --map {c}=config.{c} or size.{c}) or "
                             f"leave it out (--option drop={c}); in Python: mapping=, time_unit=, drop=")
    if t.empty:
        raise SweepError(f"{source}: the CSV has a header but no rows; record at least one run")
    return t


def _identify(t: pd.DataFrame, kernel: str | None, gpu: str | None, source: str) -> dict[str, str]:
    """Set the constant kernel/GPU columns and resolve GPU names to spec stems (in place); returns
    source device -> stem. Kernel, GPU and time columns are required."""
    for name, value in (("kernel", kernel), ("gpu", gpu)):
        if value is not None:
            t[name] = value
        elif name not in t.columns:
            raise SweepError(f"{source}: no {name!r} column; map one (--map COLUMN={name}) or give it to every row "
                             f"(--option {name}=NAME; in Python: {name}=)")
    if "time_ms" not in t.columns:
        raise SweepError(f"{source}: no time column; map one (--map time=time_ms with --option time_unit=us or ms; "
                         "in Python: mapping=, time_unit=)")
    devices = t["gpu"].astype("str")
    gpus = resolve_devices(devices.unique(), source)
    t["gpu"] = devices.map(gpus)
    return gpus


def _times_in_ms(t: pd.DataFrame, factor: float, source: str) -> None:
    """Convert the time columns to milliseconds (in place); they must hold numbers."""
    for c in _TIMES:
        if c in t.columns:
            num = pd.to_numeric(t[c], errors="coerce")
            bad = num.isna() & t[c].notna()
            if bad.any():
                raise SweepError(f"{source}: non-numeric values in {c!r} ({int(bad.sum())} rows); store numbers")
            t[c] = num * factor


def _status(t: pd.DataFrame, source: str, notes: list[str]) -> None:
    """Without a status column, rows with a positive time are ok and the others failed (warned);
    without a reason column, one is derived from the status (in place)."""
    if "status" not in t.columns:
        good = (t["time_ms"] > 0) & np.isfinite(t["time_ms"])
        t["status"] = np.where(good, "ok", "failed")
        t["reason"] = np.where(good, "", "no positive time recorded")
        if (~good).any():
            notes.append(f"{int((~good).sum())} rows without a positive time marked failed")
            warn(f"{source}: {notes[-1]}", depth=1)
    elif "reason" not in t.columns:
        t["reason"] = np.where(t["status"] == "ok", "", "status " + t["status"].astype("str") + " in source")


def _merge_runs(t: pd.DataFrame, source: str, notes: list[str]) -> pd.DataFrame:
    """Rows repeating a configuration, without a repeats column, are runs: the ok runs are merged
    (median, count, spread) and a configuration's failed runs kept only if it has no ok run (warned)."""
    key = ["kernel", "gpu", *[c for c in t.columns if c.startswith(("size.", "config."))]]
    if "repeats" in t.columns or not t.duplicated(subset=key).any():
        return t
    ok = t["status"] == "ok"
    per_config = ["status", "reason", "time_std_ms", "time_min_ms", "time_max_ms"]
    runs = t.loc[ok].drop(columns=per_config, errors="ignore")
    merged = aggregate_repeats(runs, key).assign(status="ok", reason="")
    bad = t.loc[~ok].drop_duplicates(subset=key)
    has_ok = bad.set_index(key).index.isin(merged.set_index(key).index)
    if has_ok.any():
        notes.append(f"{int((~ok).sum())} failed runs; {int(has_ok.sum())} configurations also had ok runs "
                     "and keep only those")
    notes.append(f"{int(ok.sum())} ok runs merged into {len(merged)} configurations")
    warn(f"{source}: " + "; ".join(notes), depth=1)
    return pd.concat([merged, bad.loc[~has_ok]], ignore_index=True)


def read_csv_sweep(source: str | Path, *, mapping: Mapping[str, str] | None = None, time_unit: str = "ms",
                   kernel: str | None = None, gpu: str | None = None, sizes: Mapping[str, float] | None = None,
                   drop: Iterable[str] = ()) -> pd.DataFrame:
    """Read a plain CSV (optionally gzip'd) whose columns are renamed into the sweep format.

    Parameters
    ----------
    source : str or Path
        The CSV file.
    mapping : mapping, optional
        Source column -> sweep column, e.g. ``{"time": "time_ms", "n": "size.N", "bs": "config.BLOCK"}``.
    time_unit : str
        Unit of the source time columns (``time_ms`` and the spread columns after mapping):
        ns, us, ms or s; converted to ms.
    kernel, gpu : str, optional
        Constant kernel name / GPU for every row (instead of a column). GPU names, from here
        or from a column, are resolved to spec stems where a shipped spec matches.
    sizes : mapping, optional
        Constant size parameters, e.g. ``{"N": 4096}``.
    drop : iterable of str
        Source columns to leave out on purpose.

    Returns
    -------
    pandas.DataFrame
        If rows repeat a configuration and there is no ``repeats`` column, each row is taken as
        one run and the runs are merged (median, count, spread). Without a ``status`` column,
        rows with a positive time are ``ok`` and the others ``failed`` (reported as a warning).
    """
    source = str(source)
    t = read_csv(source, expected="a header and data rows")
    t.columns = [str(c).strip() for c in t.columns]
    drop = list(drop)
    mapping = dict(mapping or {})
    t = _renamed(t, mapping, drop, source)
    gpus = _identify(t, kernel, gpu, source)
    for col, values in size_columns(sizes or {}, len(t)).items():
        t[col] = values
    _times_in_ms(t, time_factor(time_unit, source), source)
    notes: list[str] = []
    _status(t, source, notes)
    t = _merge_runs(t, source, notes)
    t.attrs["provenance"] = make_provenance(
        {s: d for d, s in gpus.items()}, {"time_ms": f"ms; converted from {time_unit}"},
        csv={"mapping": mapping, "dropped_columns": drop}, notes=notes)
    return t
