"""Checking a kernel descriptor: that it evaluates, and how its counts and times agree with recorded runs."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from hybridperf.analytical.run import TIME_MODELS
from hybridperf.descriptor import KernelDescriptor
from hybridperf.errors import HybridperfError
from hybridperf.kernel import kernel_key, load_kernel
from hybridperf.profile import PROFILE_FIELDS
from hybridperf.rowcheck import check_rows
from hybridperf.sweep import param_columns

__all__ = ["COUNTER_FIELDS", "SPACE_CHECKED", "DescriptorCheck", "check_descriptor"]

# Counter columns (without the ``counter.`` prefix) that measure a descriptor field under another name:
# Kernel Tuner's RegisterObserver records num_regs, this project's recorder local_bytes (the compiled function's
# local memory per thread). Counters named like a field (KTT's import) match as is.
COUNTER_FIELDS = {"num_regs": "registers_per_thread", "local_bytes": "local_bytes_per_thread",
                  **{f: f for f in PROFILE_FIELDS}}
_MIN_RUNS = 5  # runs a rank correlation needs before it is worth printing


@dataclass(frozen=True, slots=True)
class DescriptorCheck:
    """What :func:`check_descriptor` found.

    ``notes``: one line each (parameters no formula reads, defaults that cannot be evaluated, rows of
    the data that do not fit the descriptor, ...). With data: ``feasibility`` counts the runs by
    measured status (ok / failed / invalid) and analytical feasibility; ``models`` gives, per GPU and
    time model, the ok feasible runs compared, the Spearman rank correlation of the model's time with
    the measured one, and the median |log(measured / model)| as it stands and after one scale per GPU;
    ``counters`` compares counter columns that measure a descriptor field (``COUNTER_FIELDS``).
    """

    kernel: KernelDescriptor
    space: int
    notes: tuple[str, ...] = ()
    runs: int = 0
    feasibility: pd.DataFrame | None = None
    models: pd.DataFrame | None = None
    counters: pd.DataFrame | None = field(default=None)


# Configurations `kernels check` evaluates every formula on (at the default sizes); larger spaces: the defaults.
SPACE_CHECKED = 200_000


def _unused(desc: KernelDescriptor) -> list[str]:
    used: set[str] = set()
    for f in [*desc.launch.values(), *desc.counts.values(), *desc.constraints]:
        used |= set(f.names)
    return [name for name in desc.parameters if name not in used]


def _static_notes(desc: KernelDescriptor) -> list[str]:
    notes = [f"{kind} parameter {name} enters no formula (it only tells configurations apart)"
             for name in _unused(desc) for kind in ["config" if name in desc.config_names else "size"]]
    no_default = [p.name for p in desc.sizes + desc.config if p.default is None]
    if no_default:
        notes.append(f"no default for {', '.join(no_default)}: every row and --set must give them")
    else:
        desc.profile({})  # the defaults evaluate: finite, non-negative (a DescriptorError names the field)
    free = [p.name for p in desc.config if p.values is None]
    if free:
        notes.append(f"config parameter(s) {', '.join(free)} have no values list: rank needs --space for them")
    elif not no_default:
        _evaluate_space(desc, notes)
    return notes


def _evaluate_space(desc: KernelDescriptor, notes: list[str]) -> None:
    """Every configuration the constraints allow, at the default sizes, evaluates (a DescriptorError names the
    field and the first configuration where a formula is not finite or negative: BLOCK - 32 in a divisor passed
    the check at the default BLOCK and failed 'rank'); spaces over SPACE_CHECKED are left to a note."""
    if desc.space_size() > SPACE_CHECKED:
        notes.append(f"the formulas were evaluated at the defaults only: the space holds over {SPACE_CHECKED:,} "
                     "configurations")
        return
    sizes = {p.name: p.default for p in desc.sizes}
    for cfg in desc.config_space():
        values = {**{k: np.full(len(cfg), v) for k, v in sizes.items()}, **{c: cfg[c].to_numpy() for c in cfg}}
        ok = desc.constraint_mask(values)[0]
        if ok.any():
            desc.profile({k: np.broadcast_to(v, ok.shape)[ok] for k, v in values.items()})


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < _MIN_RUNS or np.ptp(a[ok]) == 0 or np.ptp(b[ok]) == 0:
        return float("nan")
    return float(spearmanr(a[ok], b[ok]).statistic)


def _model_table(rows: pd.DataFrame, feats: pd.DataFrame, ok: np.ndarray) -> pd.DataFrame:
    """Per GPU and time model: runs, Spearman rho, median |log error| uncalibrated and after a per-GPU scale."""
    from hybridperf.learn.baseline import baseline_column

    logy = np.log(pd.to_numeric(rows["time_ms"], errors="coerce").to_numpy(dtype=np.float64))
    out = []
    for gpu in sorted(rows["gpu"].astype(str).unique()):
        m = ok & (rows["gpu"].astype(str).to_numpy() == gpu)
        for model in TIME_MODELS:
            logt = feats[baseline_column(model)].to_numpy(dtype=np.float64)
            err = logy[m] - logt[m]
            err = err[np.isfinite(err)]
            out.append({"gpu": gpu, "model": model, "runs": len(err), "spearman": _spearman(logt[m], logy[m]),
                        "median_abs_log_error": float(np.median(np.abs(err))) if len(err) else np.nan,
                        "after_scale": float(np.median(np.abs(err - np.median(err)))) if len(err) else np.nan})
    return pd.DataFrame(out)


def _counter_table(rows: pd.DataFrame, desc: KernelDescriptor) -> pd.DataFrame | None:
    """Counters that measure a descriptor field: runs, Spearman rho, median counter / descriptor value."""
    from hybridperf.learn.features import descriptor_params

    cols = [c for c in param_columns(rows, "counter.") if c.split(".", 1)[1] in COUNTER_FIELDS]
    if not cols:
        return None
    prof = desc.profile({k: v.to_numpy() for k, v in descriptor_params(desc, rows).items()})
    out = []
    for col in cols:
        name = COUNTER_FIELDS[col.split(".", 1)[1]]
        measured = pd.to_numeric(rows[col], errors="coerce").to_numpy(dtype=np.float64)
        counted = np.broadcast_to(np.asarray(getattr(prof, name), dtype=np.float64), measured.shape)
        ok = np.isfinite(measured) & (counted > 0)
        ratio = measured[ok] / counted[ok]
        out.append({"counter": col, "field": name, "runs": int(ok.sum()), "spearman": _spearman(counted, measured),
                    "median_ratio": float(np.median(ratio)) if len(ratio) else np.nan})
    return pd.DataFrame(out)


def _unit_notes(rows: pd.DataFrame, feats: pd.DataFrame, ok: np.ndarray) -> list[str]:
    """A note per GPU whose runs the hierarchical roofline (the product's fallback model) puts over 300x away, in
    the median, near the 1000x of a time unit mixed up (the seed-004 TITAN V times, which include more than the
    kernel, lie 106-130x from it)."""
    out = []
    model = feats.get("log_hierarchical_ms")
    if model is None:
        return out
    with np.errstate(divide="ignore", invalid="ignore"):
        err = model.to_numpy(dtype=np.float64) - np.log(rows["time_ms"].to_numpy(dtype=np.float64))
    for gpu in pd.unique(rows["gpu"].astype(str)):
        m = ok & (rows["gpu"].astype(str).to_numpy() == gpu) & np.isfinite(err)
        if m.any() and abs(float(np.median(err[m]))) > np.log(300.0):
            ratio = float(np.exp(-np.median(err[m])))
            unit = ("microseconds labelled ms read 1000x slower" if ratio > 1
                    else "seconds labelled ms read 1000x faster")
            out.append(f"{gpu}: the runs take {ratio:.3g}x the hierarchical roofline's time (median): check their time "
                       f"unit (time_ms must be milliseconds; {unit}) and what the times include")
    return out


def _rows_of(data: pd.DataFrame, desc: KernelDescriptor, notes: list[str]) -> pd.DataFrame:
    import fnmatch

    names = {desc.name, kernel_key(desc), *(desc.aliases)}
    if desc.path:
        names.add(desc.path)
    kernel = data["kernel"].astype(str)
    # A family descriptor (aiwc-counted: matches = ["aiwc-*"]) describes the runs of every kernel its globs match.
    family = kernel.map(lambda k: any(fnmatch.fnmatchcase(k, p) for p in desc.matches)) if desc.matches else False
    rows = data[kernel.isin(names) | family]
    kernels = sorted(map(str, data["kernel"].unique()))
    if rows.empty and len(kernels) == 1:
        notes.append(f"the data's rows name kernel {kernels[0]!r}; checked as {desc.name} (import with "
                     f"--option kernel={desc.name} to name them so)")
        return data.assign(kernel=desc.name)
    if rows.empty:
        raise HybridperfError(f"the data holds no runs of kernel {desc.name} (it holds {', '.join(kernels[:8])})")
    return rows.assign(kernel=desc.name)


def check_descriptor(kernel: str | Path | KernelDescriptor, data: pd.DataFrame | None = None, *,
                     gpus: Sequence[str] | None = None) -> DescriptorCheck:
    """Read and evaluate a descriptor; with recorded runs (a sweep table), compare it with them.

    The descriptor must parse, and evaluate on its defaults where every parameter has one. With
    ``data`` (its rows of this kernel: by name, or all rows if the data holds one kernel), rows that
    do not fit the descriptor (unknown parameter values, bounds) are counted in a note, and the
    rest compared: analytical feasibility against the measured status (a run measured ok that the
    descriptor calls infeasible means its resources are overstated; failed runs it calls feasible
    are failures it does not explain), each time model against the measured times per GPU, and
    counter columns against the fields they measure. ``gpus`` limits the comparison to those GPUs.
    """
    from hybridperf.learn.features import analytical_features

    desc = load_kernel(kernel)
    notes = _static_notes(desc)
    if data is None:
        return DescriptorCheck(kernel=desc, space=desc.space_size(), notes=tuple(notes))
    rows = _rows_of(data, desc, notes)
    if gpus:
        rows = rows[rows["gpu"].astype(str).isin(gpus)]
    check = check_rows(rows, {desc.name: desc})
    if check.n_bad:
        notes.append(check.summary("runs") + " (left out of the comparison)")
    rows = rows.loc[check.ok].reset_index(drop=True)
    if rows.empty:
        return DescriptorCheck(kernel=desc, space=desc.space_size(), notes=tuple(notes))
    feats = analytical_features(rows, kernels={desc.name: desc})
    feasible = feats["feasible"].to_numpy() > 0
    status = rows["status"].astype(str).to_numpy() if "status" in rows else np.full(len(rows), "ok")
    table = pd.crosstab(pd.Series(status, name="measured"),
                        pd.Series(np.where(feasible, "feasible", "infeasible"), name="analytical"))
    ok = (status == "ok") & feasible
    notes += _unit_notes(rows, feats, ok)
    return DescriptorCheck(kernel=desc, space=desc.space_size(), notes=tuple(notes), runs=len(rows),
                           feasibility=table, models=_model_table(rows, feats, ok),
                           counters=_counter_table(rows, desc))
