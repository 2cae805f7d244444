"""Nsight Compute collection: run one configuration under ncu in a child process, parse its CSV."""
from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hybridperf.record.child import child_spec

__all__ = [
    "NCU_METRICS",
    "NcuResult",
    "child_command",
    "collect_ncu",
    "find_ncu",
    "metrics_command",
    "parse_metrics_csv",
    "stall_commands",
]

# Metrics recorded as counter.<metric name> (docs/record.md lists their meaning and units).
NCU_METRICS = (
    "gpu__time_duration.sum",
    "sm__cycles_elapsed.avg",
    "sm__cycles_elapsed.avg.per_second",
    "smsp__inst_executed.sum",
    "smsp__inst_executed_op_global_ld.sum",
    "smsp__inst_executed_op_global_st.sum",
    "smsp__inst_executed_op_shared_ld.sum",
    "smsp__inst_executed_op_shared_st.sum",
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "launch__registers_per_thread",
    "launch__shared_mem_per_block_static",
)
_METRIC_NAME = re.compile(r"[a-z0-9_]+__[a-z0-9_]+(?:\.[a-z0-9_]+)*")


@dataclass(frozen=True, slots=True)
class NcuResult:
    """Counters read from ncu, the stall-sample CSV written (or None), and what went wrong ('' if nothing)."""

    counters: Mapping[str, float] = field(default_factory=dict)
    stall_csv: Path | None = None
    error: str = ""


def find_ncu() -> str | None:
    """Path of the ``ncu`` executable on PATH, or None."""
    return shutil.which("ncu")


def child_command(kernel: str, bench: str, params: Mapping[str, float], device: int = 0) -> list[str]:
    """The command that runs one configuration once (``python -m hybridperf.record.child SPEC``)."""
    return [sys.executable, "-m", "hybridperf.record.child", child_spec(kernel, bench, params, device)]


def _filter(entry: str) -> list[str]:
    return ["--kernel-name", f"regex:^{re.escape(entry)}$", "--launch-count", "1", "--target-processes", "all"]


def metrics_command(ncu: str, entry: str, metrics: Sequence[str], child: Sequence[str]) -> list[str]:
    """``ncu --csv --page raw --print-units base --metrics ... -k regex:^ENTRY$ -c 1 CHILD``."""
    return [ncu, "--csv", "--page", "raw", "--print-units", "base", "--metrics", ",".join(metrics),
            *_filter(entry), *child]


def stall_commands(ncu: str, entry: str, report: Path, child: Sequence[str]) -> tuple[list[str], list[str]]:
    """Profile with the SourceCounters and WarpStateStats sections (PC sampling of warp stalls) into
    ``report``, then export its source page per SASS instruction as CSV (the input of
    ``hybridperf.advise.gpa``'s Nsight Compute reader)."""
    profile = [ncu, "--section", "SourceCounters", "--section", "WarpStateStats", "--force-overwrite",
               "--export", str(report), *_filter(entry), *child]
    export = [ncu, "--import", f"{report}.ncu-rep", "--page", "source", "--csv", "--print-source", "sass"]
    return profile, export


def _number(text: str) -> float | None:
    t = text.strip().replace(",", "")
    if t in ("", "n/a", "N/A", "-"):
        return None
    try:
        return float(t)
    except ValueError:
        return None


def parse_metrics_csv(text: str, metrics: Sequence[str]) -> dict[str, float]:
    """Values of ``metrics`` for the first profiled kernel in ncu's ``--csv --page raw`` output.

    Lines ncu writes about itself (``==PROF==``, ``==WARNING==``) and the units row under the header
    are skipped; values with thousands separators are read; missing metrics are left out.
    """
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("==")]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    header_at = next((i for i, r in enumerate(rows) if "Kernel Name" in r or "ID" in r), None)
    if header_at is None:
        return {}
    header = rows[header_at]
    id_col = header.index("ID") if "ID" in header else None
    for r in rows[header_at + 1:]:
        if len(r) != len(header) or (id_col is not None and not r[id_col].strip()):
            continue  # the units row has an empty ID
        out = {}
        for m in metrics:
            if m in header:
                v = _number(r[header.index(m)])
                if v is not None:
                    out[m] = v
        return out
    return {}


def _run(cmd: Sequence[str], timeout_s: float, env: Mapping[str, str]) -> tuple[int, str]:
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout_s, check=False, env=dict(env))
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout_s:g} s"
    except OSError as exc:
        return 127, f"cannot run {cmd[0]}: {exc.strerror}"
    return proc.returncode, proc.stdout + "\n" + proc.stderr


def _first_error(output: str) -> str:
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    err = next((ln for ln in lines if "ERROR" in ln or "error" in ln), lines[-1] if lines else "no output")
    return err[:300]


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])  # the folder holding the hybridperf package
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def collect_ncu(ncu: str, entry: str, kernel: str, bench: str, params: Mapping[str, float], *,
                device: int = 0, stall_csv: Path | None = None, metrics: Sequence[str] = NCU_METRICS,
                timeout_s: float = 600.0) -> NcuResult:
    """Profile one configuration with ncu in a child process.

    Metrics ncu does not know on this GPU or version are dropped and the run repeated (up to
    three times). With ``stall_csv``, a second ncu run samples warp stalls per instruction and
    the source page is written there as CSV. Failures are returned in ``error`` (the timing row
    stays valid), e.g. when profiling needs permissions (ERR_NVGPUCTRPERM).
    """
    env = _child_env()
    child = child_command(kernel, bench, params, device)
    wanted = list(metrics)
    counters: dict[str, float] = {}
    error = ""
    for _ in range(4):
        code, out = _run(metrics_command(ncu, entry, wanted, child), timeout_s, env)
        if code == 0:
            counters = parse_metrics_csv(out, wanted)
            if not counters:
                error = f"ncu printed no metrics for {entry}: {_first_error(out)}"
            break
        unknown = [m for m in wanted if m in out and re.search(r"(?i)(fail|invalid|unknown|not found)", out)]
        mentioned = set(_METRIC_NAME.findall(" ".join(ln for ln in out.splitlines() if "ERROR" in ln)))
        drop = [m for m in unknown if m in mentioned]
        if not drop:
            error = f"ncu failed ({code}): {_first_error(out)}"
            break
        wanted = [m for m in wanted if m not in drop]
    stall_path = None
    if stall_csv is not None and not error:
        with tempfile.TemporaryDirectory(prefix="hybridperf-ncu-") as tmp:
            profile, export = stall_commands(ncu, entry, Path(tmp) / "report", child)
            code, out = _run(profile, timeout_s, env)
            if code != 0:
                error = f"ncu stall sampling failed ({code}): {_first_error(out)}"
            else:
                try:
                    proc = subprocess.run(export, capture_output=True, text=True, timeout=timeout_s, check=False)
                except (OSError, subprocess.TimeoutExpired) as exc:
                    error = f"ncu source export failed: {exc}"
                else:
                    if proc.returncode != 0 or not proc.stdout.strip():
                        error = f"ncu source export failed ({proc.returncode}): {_first_error(proc.stderr)}"
                    else:
                        stall_csv.parent.mkdir(parents=True, exist_ok=True)
                        tmp_csv = stall_csv.with_name(stall_csv.name + ".tmp")
                        tmp_csv.write_text(proc.stdout)
                        os.replace(tmp_csv, stall_csv)
                        stall_path = stall_csv
    return NcuResult(counters=counters, stall_csv=stall_path, error=error)
