"""The sweep table: schema, column names, validation at the boundary, summaries and noise floor."""
from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hybridperf.errors import SweepError

__all__ = [
    "FORMAT_VERSION",
    "PREFIXES",
    "STATUSES",
    "SweepSummary",
    "configuration_key",
    "known_names",
    "launch_rows",
    "noise_floor",
    "param_columns",
    "param_name",
    "row_keys",
    "size_column",
    "size_metric",
    "summarize_sweep",
    "training_rows",
    "validate_sweep",
    "without_attrs",
]

FORMAT_VERSION = 1
STATUSES = ("ok", "failed", "invalid")
PREFIXES = ("size.", "config.", "counter.", "info.")
_REQUIRED = ("kernel", "gpu", "time_ms", "status")
# Times a kernel run can take (ms): a nanosecond to 28 hours. The recorded data span 0.01 .. 10,400 ms; a time
# far outside was stored in another unit, and the model's offsets would leave the range a model file holds.
MIN_TIME_MS, MAX_TIME_MS = 1e-6, 1e8
_SPREAD = ("time_std_ms", "time_min_ms", "time_max_ms")
_BASE_ORDER = ("kernel", "gpu", "time_ms", "repeats", *_SPREAD, "status", "reason")


@dataclass(frozen=True, slots=True)
class SweepSummary:
    """Counts and ranges of one sweep table.

    ``sizes`` and ``configs`` map a parameter name (without prefix) to ``(min, max, n_distinct)``;
    min and max are NaN for categorical (string) config parameters. ``time_ms`` is
    ``(min, median, max)`` over ``ok`` rows.
    """

    rows: int
    ok: int
    failed: int
    invalid: int
    kernels: tuple[str, ...]
    gpus: tuple[str, ...]
    sizes: dict[str, tuple[float, float, int]]
    configs: dict[str, tuple[float, float, int]]
    counters: tuple[str, ...]
    time_ms: tuple[float, float, float]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serialisable dict (tuples become lists)."""
        return json.loads(json.dumps(asdict(self), default=float, allow_nan=True))


def without_attrs(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` itself, or where it carries ``attrs`` (a loaded sweep's provenance) a copy without them sharing its data:
    pandas deep-copies a frame's attrs into the result of every operation on it, which cost a 1,000-row
    ``predict_rows`` a fifth of its time (66 -> 52 ms with a loaded sweep's 1.4 kB provenance)."""
    return pd.DataFrame(df) if df.attrs else df  # the constructor shares the data and leaves the attrs behind


def param_columns(df: pd.DataFrame, prefix: str | tuple[str, ...] = ("size.", "config.")) -> list[str]:
    """Columns of ``df`` in one or more namespaces, e.g. ``param_columns(df, "size.")``, in table
    order; by default the size and config parameters."""
    prefixes = (prefix,) if isinstance(prefix, str) else tuple(prefix)
    bad = [p for p in prefixes if p not in PREFIXES]
    if bad:
        raise SweepError(f"unknown column prefix {bad[0]!r}; use one of {', '.join(PREFIXES)}")
    return [c for c in df.columns if isinstance(c, str) and c.startswith(prefixes)]


def configuration_key(df: pd.DataFrame) -> list[str]:
    """The columns that name one configuration of a sweep (one row each): kernel, gpu, size.*, config.*."""
    return ["kernel", "gpu", *param_columns(df, "size."), *param_columns(df, "config.")]


def size_column(columns: Iterable[str], name: str) -> str | None:
    """The column holding size parameter ``name``: ``size.<name>``, else ``counter.<name>`` (where the
    features read a counter-described kernel's sizes, e.g. AIWC's); None when neither is there."""
    cols = set(columns)
    return next((c for c in (f"size.{name}", f"counter.{name}") if c in cols), None)


def row_keys(df: pd.DataFrame, cols: Iterable[str]) -> np.ndarray:
    """One string per row joining ``cols`` (e.g. kernel, GPU and sizes), for grouping rows.

    A parameter a row's kernel does not have (NaN where sweeps of kernels with different size
    names are mixed) is an empty field, so such rows still group; ``groupby`` would drop them.
    """
    cols = list(cols)
    if not cols:
        return np.full(len(df), "", dtype=object)
    parts = df[cols].astype(object).where(df[cols].notna(), "").astype(str)
    return parts.agg("|".join, axis=1).to_numpy(dtype=object)


def param_name(column: str) -> str:
    """The parameter a sweep column holds: ``"size.N"`` -> ``"N"`` (other names are returned as given)."""
    head, sep, tail = column.partition(".")
    return tail if sep and f"{head}." in PREFIXES else column


def size_metric(sweep: pd.DataFrame, columns: Mapping[str, Sequence[str]] | None = None) -> np.ndarray:
    """Per-row problem size: the largest size.* parameter (max(M, N, K) for GEMM, N otherwise), or for a
    kernel that ``columns`` names, the largest of its columns there (e.g. the counters a counter-described
    kernel's descriptor reads as sizes, :func:`hybridperf.learn.domain.size_columns`)."""
    cols = param_columns(sweep, "size.")
    named = {k: list(v) for k, v in (columns or {}).items() if v}
    if not cols and not named:
        raise SweepError("sweep has no size.* columns; size extrapolation needs size parameters")
    if cols:
        out = sweep[cols].apply(pd.to_numeric, errors="coerce").max(axis=1).to_numpy(dtype=np.float64, copy=True)
    else:
        out = np.full(len(sweep), np.nan)
    kernels = sweep["kernel"].astype(str).to_numpy() if named else None
    for kernel, kcols in named.items():
        m = kernels == kernel
        if m.any():
            out[m] = sweep.loc[m, kcols].apply(pd.to_numeric, errors="coerce").max(axis=1).to_numpy(dtype=np.float64)
    return out


def launch_rows(kernel: str, gpu: str, params: pd.DataFrame, size_names: Iterable[str],
                config_names: Iterable[str]) -> pd.DataFrame:
    """Sweep-format rows (kernel, gpu, size.*, config.*) for parameter values, e.g. to predict them.

    ``params`` holds one column per parameter (bare names); a name that is neither a size nor a
    config parameter is an error naming both lists.
    """
    sizes, configs = list(size_names), list(config_names)
    rows = pd.DataFrame({"kernel": kernel, "gpu": gpu}, index=params.index if len(params.columns) else
                        pd.RangeIndex(max(len(params), 1)))
    for name in params.columns:
        prefix = "size." if name in sizes else "config." if name in configs else None
        if prefix is None:
            raise SweepError(f"{kernel} has no parameter {name!r}; sizes: {', '.join(sizes) or 'none'}; "
                             f"config: {', '.join(configs) or 'none'}")
        rows[prefix + name] = params[name].to_numpy(dtype=np.float64)
    return rows


def training_rows(sweep: pd.DataFrame) -> pd.DataFrame:
    """The rows a model learns from: status ok with a positive time (failed/invalid are kept out, counted)."""
    if "time_ms" not in sweep.columns:
        raise SweepError("sweep has no time_ms column; read it with hybridperf.sweepfile.read_sweep")
    status = sweep["status"] if "status" in sweep.columns else pd.Series("ok", index=sweep.index)
    ok = (status == "ok") & (pd.to_numeric(sweep["time_ms"], errors="coerce") > 0)
    if not ok.any():
        raise SweepError(f"sweep has no usable rows (status ok with time_ms > 0) out of {len(sweep)}")
    return sweep.loc[ok]


def _rows(mask: np.ndarray | pd.Series) -> str:
    idx = np.flatnonzero(np.asarray(mask, dtype=bool))
    return f"{len(idx)} rows, e.g. data row {', '.join(str(i + 1) for i in idx[:3])}"


def _fail(source: str, what: str, fix: str) -> SweepError:
    return SweepError(f"{source}: {what}; {fix}")


def _check(source: str, bad: np.ndarray | pd.Series, what: str, fix: str) -> None:
    """Raise ``source: what (N rows, e.g. data row i); fix`` if any row is bad."""
    if np.any(bad):
        raise _fail(source, f"{what} ({_rows(bad)})", fix)


def _numeric(df: pd.DataFrame, col: str, source: str) -> pd.Series:
    s = df[col]
    if pd.api.types.is_datetime64_any_dtype(s) or pd.api.types.is_timedelta64_dtype(s):
        # pandas reads them as integer nanoseconds: a duration in time_ms was taken 10^6x too slow
        raise _fail(source, f"column {col!r} holds {'durations' if pd.api.types.is_timedelta64_dtype(s) else 'dates'}"
                            f", not numbers", "store plain numbers (times as milliseconds)")
    if pd.api.types.is_bool_dtype(s):
        return s.astype("int64")
    if pd.api.types.is_numeric_dtype(s):
        return s if pd.api.types.is_integer_dtype(s) and not s.hasnans else s.astype("float64")
    num = pd.to_numeric(s, errors="coerce")
    bad = num.isna() & s.notna()
    if bad.any():
        first = str(s[bad].iloc[0])[:40]
        raise _fail(source, f"non-numeric values in column {col!r} ({_rows(bad)}: {first!r})",
                    "store numbers only (booleans as 0/1)")
    return num.astype("float64")


def _finite(df: pd.DataFrame, col: str, source: str) -> pd.Series:
    v = _numeric(df, col, source)
    _check(source, np.isinf(v.to_numpy(dtype="float64", na_value=np.nan)), f"infinite values in {col!r}",
           "store finite numbers")
    return v


def _config(df: pd.DataFrame, col: str, source: str) -> pd.Series:
    s = df[col]
    if pd.api.types.is_bool_dtype(s) or pd.api.types.is_numeric_dtype(s):
        return _finite(df, col, source)
    kinds = {type(v) for v in s.dropna()}
    if kinds <= {str}:
        return s.astype("str")
    if not kinds & {str}:
        return _finite(df, col, source)
    raise _fail(source, f"column {col!r} mixes numbers and strings "
                        f"({_rows(s.notna() & ~s.map(type).eq(str))} not strings)",
                "use numbers (booleans as 0/1) or, for a truly categorical parameter, strings only")


def _canonical(name: str, what: str) -> str | None:
    """The canonical name an alias stands for, or None."""
    try:
        if what == "GPU":
            from hybridperf.hardware import load_gpu
            return Path(load_gpu(name).path).stem
        from hybridperf.kernel import load_kernel
        return load_kernel(name).name
    except Exception:  # noqa: BLE001 - any failure only means "no suggestion"
        return None


def _family_member(name: str) -> bool:
    from hybridperf.kernel import family_kernel

    try:
        return family_kernel(name) is not None
    except Exception:  # noqa: BLE001 - a broken search path only means "not a member" here
        return False


def _names(df: pd.DataFrame, col: str, source: str, known: set[str] | None, what: str) -> pd.Series:
    s = df[col]
    if pd.api.types.is_string_dtype(s) and not pd.api.types.is_object_dtype(s):
        missing = (s.isna() | s.str.strip().eq("")).to_numpy(dtype=bool)
    else:
        missing = s.map(lambda v: not isinstance(v, str) or not v.strip()).to_numpy(dtype=bool)
    _check(source, missing, f"missing or non-text {what} name in column {col!r}", f"give every row a {what} name")
    s = s.astype("str")
    for name in sorted(set(s.unique()) - known) if known else ():
        if what == "kernel" and _family_member(name):
            continue  # its own kernel, described by a family descriptor (matches = ["aiwc-*"])
        n, canon = int((s == name).sum()), _canonical(name, what)
        if canon and canon != name and canon in known:
            raise _fail(source, f"{what} {name!r} in column {col!r} ({n} rows) is an alias",
                        f"store the canonical name {canon!r}")
        if what == "GPU":
            raise _fail(source, f"unknown GPU {name!r} in column {col!r} ({n} rows)",
                        "use a shipped GPU name ('hybridperf gpus'), add a spec file (docs/gpu-spec-format.md) with "
                        "its folder on $HYBRIDPERF_GPU_PATH, or accept it when importing (--option known_gpus=NAME; "
                        "in Python: known_gpus=)")
        raise _fail(source, f"unknown kernel {name!r} in column {col!r} ({n} rows): no descriptor of that name",
                    "put its descriptor's folder on $HYBRIDPERF_KERNEL_PATH (docs/own-kernel.md), pass --kernel "
                    "FILE.toml where the command takes it, or, in Python, known_kernels=")
    return s


def known_names(kind: str) -> set[str] | None:
    """Shipped GPU stems / kernel names; None (check skipped) if none are installed."""
    try:
        if kind == "gpu":
            from hybridperf.hardware import gpu_names
            return set(gpu_names()) or None
        from hybridperf.kernel import kernel_names
        return set(kernel_names()) or None
    except ImportError:
        return None


def validate_sweep(df: pd.DataFrame, *, source: str = "<DataFrame>",
                   known_kernels: Iterable[str] | None = None,
                   known_gpus: Iterable[str] | None = None, check_names: bool = True) -> pd.DataFrame:
    """Check a sweep table once, where it enters, and return it normalised.

    Parameters
    ----------
    df : pandas.DataFrame
        The sweep (see docs/sweep-format.md).
    source : str
        Where the table came from (file name); every error message starts with it.
    known_kernels, known_gpus : iterable of str, optional
        Accepted kernel names and GPU spec stems. Default: the shipped kernel descriptors
        (``hybridperf.kernel.kernel_names()``) and GPU specs (``hybridperf.hardware.gpu_names()``);
        the check is skipped where none are installed.

    Returns
    -------
    pandas.DataFrame
        A shallow copy with canonical dtypes (``repeats`` Int64, times float64, booleans 0/1,
        empty ``reason`` for ok rows) and columns in canonical order.

    Raises
    ------
    SweepError
        On the first problem: missing or unknown columns, missing values where required,
        non-positive times on ok rows, unknown GPU or kernel, duplicate configurations.
    """
    if not check_names:
        return _validate(df, source, None, None)
    kernels = known_names("kernel") if known_kernels is None else {str(k) for k in known_kernels}
    gpus = known_names("gpu") if known_gpus is None else {str(g) for g in known_gpus}
    return _validate(df, source, kernels, gpus)


def _columns(df: pd.DataFrame, source: str) -> pd.DataFrame:
    """Shallow copy with string column names, checked against the schema."""
    if not isinstance(df, pd.DataFrame):
        raise SweepError(f"{source}: expected a pandas DataFrame, got {type(df).__name__}; "
                         "read the file with read_sweep")
    if len(df) == 0:
        raise _fail(source, "the sweep has no rows", "record at least one configuration")
    out = without_attrs(df).reset_index(drop=True)  # the attrs are restored once at the end
    out.columns = cols = [str(c) for c in out.columns]
    if len(set(cols)) != len(cols):
        raise _fail(source, f"column {min(c for c in cols if cols.count(c) > 1)!r} appears twice", "keep one copy")
    missing = [c for c in _REQUIRED if c not in cols]
    if missing:
        raise _fail(source, f"missing column {missing[0]!r} (have {', '.join(cols[:8])}"
                            f"{', ...' if len(cols) > 8 else ''})",
                    "see docs/sweep-format.md for the required columns")
    for c in cols:
        if c not in _BASE_ORDER and (not c.startswith(PREFIXES) or c.split(".", 1)[1] == ""):
            raise _fail(source, f"unknown column {c!r}",
                        "rename it to size.<name>, config.<name>, counter.<name> or info.<name>, or drop it")
    return out


def _validate(df: pd.DataFrame, source: str, kernels: set[str] | None, gpus: set[str] | None) -> pd.DataFrame:
    out = _columns(df, source)
    out["kernel"] = _names(out, "kernel", source, kernels, "kernel")
    out["gpu"] = _names(out, "gpu", source, gpus, "GPU")
    bad = ~out["status"].isin(STATUSES)
    _check(source, bad, f"invalid status {out['status'][bad].iloc[0] if bad.any() else ''!r} in column 'status'",
           f"use one of {', '.join(STATUSES)}")
    out["status"] = out["status"].astype("str")
    ok = (out["status"] == "ok").to_numpy()
    reason = out["reason"] if "reason" in out else pd.Series("", index=out.index)
    out["reason"] = reason = reason.astype("object").where(reason.notna(), "").astype("str")
    empty = (reason == "").to_numpy()
    _check(source, ok & ~empty, "'reason' is set on ok rows",
           "leave reason empty for ok rows or change their status")
    _check(source, ~ok & empty, "failed/invalid rows without a reason",
           "say why in column 'reason' (e.g. 'CompilationFailedConfig')")
    out["time_ms"] = _numeric(out, "time_ms", source).astype("float64")
    t = out["time_ms"].to_numpy()
    _check(source, ok & ~(np.isfinite(t) & (t > 0)), "missing, non-finite or non-positive time_ms on ok rows",
           "record a positive time in ms or set status to failed/invalid with a reason")
    with np.errstate(invalid="ignore"):
        _check(source, ok & ((t < MIN_TIME_MS) | (t > MAX_TIME_MS)),
               f"time_ms outside {MIN_TIME_MS:g} .. {MAX_TIME_MS:g} ms (1 ns .. 28 hours) on ok rows",
               "check the unit of the times (import --option time_unit=us|s|ns)")
    _check(source, ~ok & ~(np.isnan(t) | (np.isfinite(t) & (t > 0))),
           "non-positive or infinite time_ms on failed/invalid rows",
           "leave time_ms empty (NaN) when there is no valid measurement")
    rep = (_numeric(out, "repeats", source).astype("float64").to_numpy() if "repeats" in out
           else np.full(len(out), np.nan))
    _check(source, ~np.isnan(rep) & (~np.isfinite(rep) | (rep < 1) | (rep != np.round(rep))),
           "repeats must be a whole number >= 1", "leave it empty when unknown")
    out["repeats"] = pd.Series(rep, index=out.index).astype("Int64")
    for c in (c for c in _SPREAD if c in out):
        out[c] = v = _numeric(out, c, source).astype("float64")
        _check(source, ~(v.isna() | (np.isfinite(v) & (v >= 0))), f"negative or infinite values in {c!r}",
               "store spreads in ms, >= 0")
    if "time_min_ms" in out and "time_max_ms" in out:
        lo, hi, tol = out["time_min_ms"].to_numpy(), out["time_max_ms"].to_numpy(), 1e-9 * np.abs(t) + 1e-12
        _check(source, ok & ((lo > t + tol) | (hi < t - tol)), "time_ms outside [time_min_ms, time_max_ms]",
               "time_ms must be the median of the repeats")
    for c in list(out.columns):
        if c.startswith(("size.", "counter.")):
            out[c] = _finite(out, c, source)
            if c.startswith("size."):
                _check(source, (out[c] < 0).to_numpy(dtype=bool, na_value=False), f"negative values in {c!r}",
                       "problem sizes are counts >= 0: fix the value or the importer's sizes= option")
        elif c.startswith("config."):
            out[c] = _config(out, c, source)
    key = configuration_key(out)
    _check(source, out.duplicated(subset=key, keep=False).to_numpy(),
           f"duplicate configurations (same {', '.join(key[:4])}{', ...' if len(key) > 4 else ''})",
           "merge repeats into one row (time_ms = median, repeats = count) "
           "or add the parameter that distinguishes them as a config.* column")
    order = [*key, *(c for c in _BASE_ORDER[2:] if c in out)]
    order += param_columns(out, "counter.") + param_columns(out, "info.")
    result = out[order]
    result.attrs = dict(df.attrs)
    return result


def _range(s: pd.Series) -> tuple[float, float, int]:
    if pd.api.types.is_numeric_dtype(s):
        v = s.astype("float64")
        return (float(v.min()), float(v.max()), int(v.nunique()))
    return (math.nan, math.nan, int(s.nunique()))


def summarize_sweep(df: pd.DataFrame) -> SweepSummary:
    """Rows, ok/failed/invalid counts, GPUs, kernels and size/config ranges of a validated sweep."""
    counts = df["status"].value_counts()
    ok_t = df.loc[df["status"] == "ok", "time_ms"]
    times = (float(ok_t.min()), float(ok_t.median()), float(ok_t.max())) if len(ok_t) else (math.nan,) * 3
    return SweepSummary(
        rows=len(df), ok=int(counts.get("ok", 0)), failed=int(counts.get("failed", 0)),
        invalid=int(counts.get("invalid", 0)),
        kernels=tuple(sorted(df["kernel"].unique())), gpus=tuple(sorted(df["gpu"].unique())),
        sizes={c[5:]: _range(df[c]) for c in param_columns(df, "size.")},
        configs={c[7:]: _range(df[c]) for c in param_columns(df, "config.")},
        counters=tuple(c[8:] for c in param_columns(df, "counter.")),
        time_ms=times,
    )


def noise_floor(df: pd.DataFrame, *, min_repeats: int = 3) -> dict[str, Any]:
    """Run-to-run noise: per-configuration coefficient of variation of the repeats.

    CV = ``time_std_ms / time_ms`` (sample standard deviation over the recorded repeats divided by
    their median), over ok rows with at least ``min_repeats`` repeats and a recorded spread.

    Returns
    -------
    dict
        ``configs`` (rows used), ``cv_median``, ``cv_p95`` (fractions, NaN when no row qualifies),
        ``min_repeats`` and ``per_gpu`` (the same three numbers for each GPU).
    """
    empty = {"configs": 0, "cv_median": math.nan, "cv_p95": math.nan}
    if "time_std_ms" not in df.columns or "repeats" not in df.columns:
        return {**empty, "min_repeats": min_repeats, "per_gpu": {}}
    rep = df["repeats"].astype("float64")
    use = (df["status"] == "ok") & (rep >= min_repeats) & df["time_std_ms"].notna()
    cv = (df.loc[use, "time_std_ms"] / df.loc[use, "time_ms"]).astype("float64")
    sub = df.loc[use, ["gpu"]].assign(cv=cv)

    def stats(cv: pd.Series) -> dict[str, Any]:
        if len(cv) == 0:
            return dict(empty)
        return {"configs": len(cv), "cv_median": float(cv.median()), "cv_p95": float(cv.quantile(0.95))}

    per_gpu = {str(g): stats(grp["cv"]) for g, grp in sub.groupby("gpu", sort=True)}
    return {**stats(sub["cv"]), "min_repeats": min_repeats, "per_gpu": per_gpu}
