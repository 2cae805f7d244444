"""record_sweep: time every configuration of a shipped benchmark kernel on a CUDA GPU into a sweep file."""
from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from hybridperf.errors import RecordError
from hybridperf.hardware import GPUSpec, load_gpu
from hybridperf.kernel import KernelDescriptor, load_kernel
from hybridperf.progress import task
from hybridperf.record.bench import BenchSetup, load_bench
from hybridperf.record.plan import Plan, PlannedRow, done_keys, existing_keys, plan_sweep
from hybridperf.record.runner import ContextLost, RunFailed, Runner
from hybridperf.record.stats import check_repeat_settings, measure
from hybridperf.record.table import make_record, merge_provenance, read_existing, write_records

__all__ = ["RecordSummary", "record_sweep"]


@dataclass(frozen=True, slots=True)
class RecordSummary:
    """What one call recorded: output path, kernel, GPU spec stem, the grid size, rows skipped
    because the file already had them, and the ok/failed/invalid rows written this time.
    ``stopped`` is non-empty when recording stopped early (lost CUDA context, interruption)."""

    path: Path
    kernel: str
    gpu: str
    total: int
    skipped: int
    ok: int
    failed: int
    invalid: int
    seconds: float
    stopped: str = ""

    @property
    def recorded(self) -> int:
        return self.ok + self.failed + self.invalid

    def describe(self) -> str:
        """One line for people: counts, file, and how to resume when stopped."""
        text = (f"{self.kernel} on {self.gpu}: {self.recorded} rows recorded ({self.ok} ok, {self.failed} failed, "
                f"{self.invalid} invalid), {self.skipped} already in {self.path}, {self.seconds:.1f} s")
        return text + (f"; stopped early: {self.stopped}" if self.stopped else "")


def _stall_path(out: Path, row: PlannedRow) -> Path:
    label = "__".join(f"{k}={int(v) if float(v).is_integer() else v}" for k, v in row.sizes + row.config)
    label = re.sub(r"[^A-Za-z0-9_.=-]+", "_", label)
    return out.with_name(out.name + ".stalls") / f"{row.kernel}__{row.gpu}__{label}.csv"


def _open(kernel: KernelDescriptor, bench: BenchSetup, gpu: str | Path | GPUSpec | None,
          runner: Runner | None) -> tuple[Runner, GPUSpec, Any]:
    if runner is not None:
        if gpu is None:
            raise RecordError("pass gpu= (a spec name or file) when you inject a runner")
        return runner, load_gpu(gpu), None
    from hybridperf.record.device import match_gpu_spec, open_device

    device = open_device()  # raises "no CUDA GPU found: ..." without CuPy or a GPU
    spec = gpu if isinstance(gpu, GPUSpec) else match_gpu_spec(
        device.name, device.compute_capability, device.sm_count, device.memory_bytes, requested=gpu)
    from hybridperf.record.cupy_runner import CupyRunner

    return CupyRunner(bench), spec, device


@dataclass(frozen=True, slots=True)
class _Session:
    """What recording each row needs: descriptor, setup, runner, output file, ncu and the timing stop rule."""

    desc: KernelDescriptor
    setup: BenchSetup
    run: Runner
    out: Path
    ncu_exe: str | None
    rule: dict[str, Any]


def _descriptor(kernel: str | Path | KernelDescriptor, space: Mapping[str, Sequence[float]] | None) -> KernelDescriptor:
    desc = load_kernel(kernel)
    if space:
        # Allow the requested values everywhere (planning, launch resolution) for this call.
        desc = desc.with_space({k: tuple(float(v) for v in vals) for k, vals in space.items()
                                if k in desc.config_names})
    return desc


def _output(out_path: str | Path) -> Path:
    out = Path(out_path)
    if not out.parent.is_dir():
        raise RecordError(f"{out}: directory {str(out.parent)!r} does not exist; create it first")
    return out


def _find_ncu(ncu: bool) -> str | None:
    """The ncu executable when ``ncu`` is asked for (an error if it is not on PATH), else None."""
    if not ncu:
        return None
    from hybridperf.record.ncu import find_ncu

    ncu_exe = find_ncu()
    if ncu_exe is None:
        raise RecordError("ncu (Nsight Compute) is not on PATH; install it or record without --ncu")
    return ncu_exe


def _plan(desc: KernelDescriptor, spec: GPUSpec, sizes: Mapping[str, Sequence[float]],
          space: Mapping[str, Sequence[float]] | None, setup: BenchSetup, out: Path,
          retry_failed: bool) -> tuple[Plan, pd.DataFrame | None]:
    """The rows left to record and the rows of the existing file to keep (the failed rows planned
    again are replaced by their new result)."""
    existing = read_existing(out)
    plan = plan_sweep(desc, spec, sizes, space, done=done_keys(existing, desc, retry_failed=retry_failed),
                      bench=setup)
    if existing is not None and retry_failed:
        rerun = {r.key for r in plan.rows}
        keep = [k is None or k not in rerun for k in existing_keys(existing, desc)]
        existing = existing[keep].reset_index(drop=True)
    return plan, existing


def _record_rows(session: _Session, plan: Plan, existing: pd.DataFrame | None, provenance: dict[str, Any],
                 flush_every: int, progress: bool) -> tuple[dict[str, int], str]:
    """Record the planned rows in order, rewriting the file every ``flush_every`` rows and at the end;
    returns the ok/failed/invalid counts and why recording stopped early ('' if it did not)."""
    records: list[dict[str, Any]] = []
    counts = {"ok": 0, "failed": 0, "invalid": 0}
    stopped = ""
    try:
        with task(f"record {session.desc.name}", len(plan.rows)) if progress else contextlib.nullcontext() as t:
            for row in plan.rows:
                rec, lost = _record_row(row, session)
                records.append(rec)
                counts[rec["status"]] += 1
                if t is not None:
                    t.advance()
                if lost:
                    stopped = (f"the CUDA context was lost at {row.label()} ({rec['reason']}); rerun the same "
                               "command to resume after it")
                    break
                if len(records) % flush_every == 0:
                    write_records(session.out, existing, records, provenance)
    finally:
        if records:
            write_records(session.out, existing, records, provenance)
        if hasattr(session.run, "close"):
            session.run.close()
    return counts, stopped


def record_sweep(kernel: str | Path | KernelDescriptor, sizes: Mapping[str, Sequence[float]],
                 space: Mapping[str, Sequence[float]] | None, out_path: str | Path, *,
                 gpu: str | Path | GPUSpec | None = None, min_repeats: int = 5, max_repeats: int = 50,
                 target_cv: float = 0.02, warmup: int = 3, ncu: bool = False, progress: bool = True,
                 runner: Runner | None = None, bench: str | Path | None = None, retry_failed: bool = False,
                 flush_every: int = 10, time_budget_s: float = 10.0) -> RecordSummary:
    """Time every configuration of sizes x config space of a benchmark kernel and write a sweep.

    Each configuration is compiled with CuPy (NVRTC, config parameters as ``-DNAME=VALUE``), run
    ``warmup`` times, then timed with CUDA events until the coefficient of variation (sample
    standard deviation / median) is at most ``target_cv`` after at least ``min_repeats`` repeats, or
    ``max_repeats`` repeats or ``time_budget_s`` seconds of kernel time are reached. The row gets
    the median, repeats and spread, and the compiled function's registers, static shared memory
    and local memory (``counter.registers``, ``counter.static_smem_bytes``, ``counter.local_bytes``).
    Failures (compile, launch, resources) become ``failed`` rows with the reason; configurations
    that break a descriptor constraint or a hard occupancy limit, or need more memory than the GPU
    has, become ``invalid`` rows without running.

    Parameters
    ----------
    kernel : str, Path or KernelDescriptor
        A descriptor that ships with a CUDA setup (``hybridperf/kernels/cuda/<name>.toml``), or any
        descriptor together with ``bench``.
    sizes : mapping of size parameter to values
        E.g. ``{"N": [1024, 2048]}``; left-out sizes take their default.
    space : mapping of config parameter to values, optional
        Overrides the descriptor's allowed values; None records the descriptor's whole space.
    out_path : str or Path
        ``*.csv``, ``*.csv.gz`` or ``*.parquet``. Rows already there (same kernel, GPU, sizes,
        config) are skipped, so rerunning the same call resumes. The file is rewritten atomically
        (temporary file + ``os.replace``) every ``flush_every`` rows and at the end.
    gpu : str, Path or GPUSpec, optional
        The GPU spec for the ``gpu`` column and the occupancy screen; default: matched from the
        device (name, compute capability, SM count, memory).
    min_repeats, max_repeats, target_cv, warmup, time_budget_s
        The timing stop rule (see :func:`hybridperf.record.stats.should_stop`).
    ncu : bool
        Also run each ok configuration under Nsight Compute (``ncu`` on PATH): metrics become
        ``counter.<metric>`` columns and per-instruction warp-stall samples a CSV next to the
        sweep (``info.stall_samples``); ncu problems go to ``info.ncu`` and never fail the row.
    progress : bool
        Show a progress bar on stderr.
    runner : callable, optional
        ``runner(row, launch) -> Launch`` replaces CuPy (tests inject a fake; ``gpu`` is then required).
    bench : str or Path, optional
        A setup file for a descriptor that does not ship one.
    retry_failed : bool
        Rerun rows recorded as failed instead of skipping them.

    Returns
    -------
    RecordSummary

    Raises
    ------
    RecordError
        ``no CUDA GPU found: ...`` without CuPy or a GPU (and no ``runner``); bad arguments; an
        unreadable existing output file.
    """
    t0 = time.monotonic()
    check_repeat_settings(min_repeats, max_repeats, target_cv, warmup)
    if not isinstance(flush_every, int) or flush_every < 1:
        raise RecordError(f"flush_every must be a whole number >= 1, got {flush_every!r}")
    desc = _descriptor(kernel, space)
    setup = load_bench(desc, bench)
    out = _output(out_path)
    run, spec, device = _open(desc, setup, gpu, runner)
    ncu_exe = _find_ncu(ncu)
    plan, existing = _plan(desc, spec, sizes, space, setup, out, retry_failed)
    from hybridperf.record.device import session_provenance

    provenance = merge_provenance(out, session_provenance(device, spec, {
        "kernel": desc.name, "descriptor_sha256": desc.sha256, "bench": setup.path,
        "bench_sha256": setup.sha256, "cuda_source_sha256": setup.source_sha256(),
        "min_repeats": min_repeats, "max_repeats": max_repeats, "target_cv": target_cv, "warmup": warmup,
        "time_budget_s": time_budget_s, "ncu": bool(ncu), "timer": "CUDA events around one launch",
    }))
    rule = {"warmup": warmup, "min_repeats": min_repeats, "max_repeats": max_repeats, "target_cv": target_cv,
            "time_budget_s": time_budget_s}
    session = _Session(desc=desc, setup=setup, run=run, out=out, ncu_exe=ncu_exe, rule=rule)
    counts, stopped = _record_rows(session, plan, existing, provenance, flush_every, progress)
    return RecordSummary(path=out, kernel=desc.name, gpu=Path(spec.path).stem if spec.path else spec.name,
                         total=plan.total, skipped=plan.skipped, seconds=time.monotonic() - t0,
                         stopped=stopped, **counts)


def _record_row(row: PlannedRow, session: _Session) -> tuple[dict[str, Any], bool]:
    """Run one planned row; returns its sweep record and whether the CUDA context was lost."""
    if row.status == "invalid":
        return make_record(row), False
    launch = session.setup.resolve(session.desc, row.params)
    try:
        handle = session.run(row, launch)
    except ContextLost as exc:
        return make_record(row, status="failed", reason=str(exc), counters=exc.counters), True
    except RunFailed as exc:
        return make_record(row, status="failed", reason=str(exc), counters=exc.counters), False
    counters = dict(handle.counters)
    try:
        stats = measure(handle.time_ms, **session.rule)
    except ContextLost as exc:
        return make_record(row, status="failed", reason=str(exc), counters=counters), True
    except RunFailed as exc:
        return make_record(row, status="failed", reason=str(exc), counters=counters), False
    finally:
        handle.close()
    info: dict[str, str] = {}
    if not stats.converged and stats.repeats > 1:
        info["timing"] = f"cv {stats.cv:.3g} above target {session.rule['target_cv']:g} after {stats.repeats} repeats"
    if session.ncu_exe is not None:
        from hybridperf.record.ncu import collect_ncu

        stall = _stall_path(session.out, row)
        res = collect_ncu(session.ncu_exe, session.setup.entry, session.desc.path or session.desc.name,
                          session.setup.path, row.params, stall_csv=stall)
        counters.update(res.counters)
        info["ncu"] = res.error or "ok"
        if res.stall_csv is not None:
            info["stall_samples"] = str(res.stall_csv.relative_to(session.out.parent))
    return make_record(row, stats=stats, counters=counters, info=info), False
