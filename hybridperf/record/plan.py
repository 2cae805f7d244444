"""Planning a recording: the rows to run, minus those already recorded, with infeasible ones screened."""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hybridperf.analytical.occupancy import occupancy
from hybridperf.errors import RecordError
from hybridperf.hardware import GPUSpec
from hybridperf.kernel import KernelDescriptor
from hybridperf.profile import LAUNCH_KEYS

__all__ = ["Plan", "PlannedRow", "RowKey", "done_keys", "existing_keys", "plan_sweep", "row_key"]

RowKey = tuple[str, str, tuple[float, ...], tuple[float, ...]]
# Leave room for the CUDA context, CuPy's memory pool and fragmentation.
_MEMORY_HEADROOM = 0.9


@dataclass(frozen=True, slots=True)
class PlannedRow:
    """One configuration to record: kernel, GPU spec stem, size and config values, and either
    ``status == "pending"`` (to run) or ``"invalid"`` with the ``reason`` it cannot run."""

    kernel: str
    gpu: str
    sizes: tuple[tuple[str, float], ...]
    config: tuple[tuple[str, float], ...]
    status: str = "pending"
    reason: str = ""

    @property
    def params(self) -> dict[str, float]:
        return dict(self.sizes + self.config)

    @property
    def key(self) -> RowKey:
        return (self.kernel, self.gpu, tuple(v for _, v in self.sizes), tuple(v for _, v in self.config))

    def label(self) -> str:
        """``N=4096 BLOCK=256``: short text for progress bars and file names."""
        return " ".join(f"{k}={v:g}" for k, v in self.sizes + self.config)


@dataclass(frozen=True, slots=True)
class Plan:
    """The rows left to record (pending and invalid, in grid order) and how many were skipped."""

    rows: tuple[PlannedRow, ...]
    total: int
    skipped: int

    @property
    def pending(self) -> int:
        return sum(r.status == "pending" for r in self.rows)

    @property
    def invalid(self) -> int:
        return sum(r.status == "invalid" for r in self.rows)


def row_key(kernel: str, gpu: str, params: Mapping[str, float], size_names: Sequence[str],
            config_names: Sequence[str]) -> RowKey:
    """The identity of a row: kernel, GPU and the values of every size and config parameter."""
    return (kernel, gpu, tuple(float(params[n]) for n in size_names), tuple(float(params[n]) for n in config_names))


def existing_keys(existing: pd.DataFrame | None, kernel: KernelDescriptor) -> list[RowKey | None]:
    """The key of every row of ``existing`` (a sweep table), None for rows of other kernels or
    without every size/config column of ``kernel``; aligned with the table's rows."""
    if existing is None or len(existing) == 0:
        return []
    cols = [f"size.{n}" for n in kernel.size_names] + [f"config.{n}" for n in kernel.config_names]
    if any(c not in existing.columns for c in cols):
        return [None] * len(existing)
    ns = len(kernel.size_names)
    keys: list[RowKey | None] = []
    for name, gpu, *vals in existing[["kernel", "gpu", *cols]].itertuples(index=False, name=None):
        try:
            fv = tuple(float(v) for v in vals)
        except (TypeError, ValueError):
            fv = ()
        ok = name == kernel.name and len(fv) == len(cols) and not any(math.isnan(v) for v in fv)
        keys.append((kernel.name, str(gpu), fv[:ns], fv[ns:]) if ok else None)
    return keys


def done_keys(existing: pd.DataFrame | None, kernel: KernelDescriptor, *, retry_failed: bool = False) -> set[RowKey]:
    """Keys of the rows of ``existing`` (a sweep table) that belong to ``kernel`` and need no rerun.

    Rows of other kernels, or without every size/config column of ``kernel``, never match. Failed
    rows count as done unless ``retry_failed``.
    """
    keys = existing_keys(existing, kernel)
    if not keys:
        return set()
    status = existing["status"].tolist() if existing is not None else []
    return {k for k, st in zip(keys, status) if k is not None and not (retry_failed and st == "failed")}


def _grid(names: Sequence[str], values: Mapping[str, Sequence[float]]) -> np.ndarray:
    arrays = [np.asarray(values[n], dtype=np.float64) for n in names]
    if not arrays:
        return np.zeros((1, 0))
    mesh = np.meshgrid(*arrays, indexing="ij")
    return np.stack([m.reshape(-1) for m in mesh], axis=1)


def _check_names(kernel: KernelDescriptor, sizes: Mapping[str, Any], space: Mapping[str, Any]) -> None:
    for name in sizes:
        if name not in kernel.size_names:
            hint = " (a config parameter: give it in the space)" if name in kernel.config_names else ""
            raise RecordError(f"{kernel.name}: {name!r} is not a size parameter{hint}; sizes: "
                              f"{', '.join(kernel.size_names) or 'none'}")
    for name in space:
        if name not in kernel.config_names:
            hint = " (a size parameter: give it in the sizes)" if name in kernel.size_names else ""
            raise RecordError(f"{kernel.name}: {name!r} is not a config parameter{hint}; config: "
                              f"{', '.join(kernel.config_names) or 'none'}")
    for name, vals in {**sizes, **space}.items():
        if len(list(vals)) == 0:
            raise RecordError(f"{kernel.name}: no values given for {name}; give at least one")


def plan_sweep(kernel: KernelDescriptor, gpu: GPUSpec, sizes: Mapping[str, Sequence[float]],
               space: Mapping[str, Sequence[float]] | None = None, *, done: Iterable[RowKey] = (),
               bench: Any = None) -> Plan:
    """The rows of sizes x config space to record on ``gpu``, screened, minus ``done``.

    Parameters
    ----------
    kernel : KernelDescriptor
    gpu : GPUSpec
        Its file stem names the rows' ``gpu``; its per-SM limits screen the launches.
    sizes : mapping of size parameter name to values
        Size parameters left out take their descriptor default.
    space : mapping of config parameter name to values, optional
        Overrides the descriptor's allowed values (``--space``); left out: the descriptor's values.
    done : iterable of RowKey
        Rows already recorded (:func:`done_keys`); they are skipped and counted.
    bench : BenchSetup, optional
        When given, launches whose grid, block or buffers exceed CUDA or device-memory limits, or
        whose scalar arguments overflow their C type, are screened too.

    Returns
    -------
    Plan
        Rows in grid order (sizes outermost, then configs in descriptor order). A row is
        ``invalid`` when a ``[space]`` constraint fails, when the occupancy calculator finds a hard
        limit exceeded (threads, registers or shared memory per block, from the descriptor's launch
        formulas), or when ``bench`` finds the launch impossible; the reason says which.
    """
    space = dict(space or {})
    _check_names(kernel, sizes, space)
    if space:
        kernel = kernel.with_space({k: tuple(float(v) for v in vals) for k, vals in space.items()})
    size_vals = {n: list(sizes[n]) if n in sizes else [kernel.parameters[n].default] for n in kernel.size_names}
    missing = [n for n, v in size_vals.items() if v == [None]]
    if missing:
        raise RecordError(f"{kernel.name}: size {missing[0]} has no default; give it, e.g. {missing[0]}=1024")
    free = [p.name for p in kernel.config if p.values is None]
    if free:
        raise RecordError(f"{kernel.name}: config parameter {free[0]} has no list of values; give it in the space")
    config_vals = {p.name: list(p.values or ()) for p in kernel.config}
    sgrid, cgrid = _grid(kernel.size_names, size_vals), _grid(kernel.config_names, config_vals)
    n_rows = len(sgrid) * len(cgrid)
    if n_rows > 10_000_000:
        raise RecordError(f"{kernel.name}: {n_rows} configurations are too many to record; narrow the sizes or space")
    full = np.concatenate([np.repeat(sgrid, len(cgrid), axis=0), np.tile(cgrid, (len(sgrid), 1))], axis=1)
    names = list(kernel.size_names) + list(kernel.config_names)
    values = {n: full[:, i] for i, n in enumerate(names)}
    ok, reasons = kernel.constraint_mask(values)
    ok = np.broadcast_to(ok, (n_rows,)).copy()
    reason = np.broadcast_to(np.asarray(reasons, dtype=object), (n_rows,)).copy()
    prof = kernel.profile(values)
    occ = occupancy(gpu.limits, prof.threads_per_block, prof.registers_per_thread, prof.smem_per_block_bytes)
    feasible = np.broadcast_to(occ.feasible, (n_rows,))
    occ_reason = np.broadcast_to(occ.reason, (n_rows,))
    bad = ok & ~feasible
    reason[bad] = ["occupancy: " + str(r) for r in occ_reason[bad]]
    ok &= feasible

    if bench is not None:
        env: dict[str, Any] = dict(values)
        env.update({k: getattr(prof, k) for k in LAUNCH_KEYS})
        launch_reason, nbytes = bench.screen(env, n_rows)
        bad = ok & (launch_reason != "")
        reason[bad] = ["launch: " + str(r) for r in launch_reason[bad]]
        ok &= launch_reason == ""
        memory_bytes = gpu.memory_gib * 2**30 * _MEMORY_HEADROOM
        bad = ok & (nbytes > memory_bytes)
        reason[bad] = [f"memory: needs {b / 2**30:.3g} GiB of buffers, more than {_MEMORY_HEADROOM:.0%} of the "
                       f"GPU's {gpu.memory_gib:g} GiB" for b in nbytes[bad]]
        ok &= ~bad

    stem = Path(gpu.path).stem if gpu.path else gpu.name
    done_set = set(done)
    ns = len(kernel.size_names)
    rows: list[PlannedRow] = []
    skipped = 0
    for i in range(n_rows):
        sizes_t = tuple((n, float(full[i, j])) for j, n in enumerate(kernel.size_names))
        config_t = tuple((n, float(full[i, ns + j])) for j, n in enumerate(kernel.config_names))
        row = PlannedRow(kernel=kernel.name, gpu=stem, sizes=sizes_t, config=config_t)
        if row.key in done_set:
            skipped += 1
            continue
        if not ok[i]:
            row = PlannedRow(kernel=row.kernel, gpu=stem, sizes=sizes_t, config=config_t, status="invalid",
                             reason=str(reason[i]))
        rows.append(row)
    return Plan(rows=tuple(rows), total=n_rows, skipped=skipped)

