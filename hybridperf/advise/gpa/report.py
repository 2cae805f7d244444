"""GPA advice reports: run blamer, optimizers and estimators on a sample table and format them."""
from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from hybridperf.advise.gpa.arch import V100, GPAArch
from hybridperf.advise.gpa.blame import blame_samples
from hybridperf.advise.gpa.errors import GPAParameterError
from hybridperf.advise.gpa.optimizers import LaunchConfig, Suggestion, run_optimizers
from hybridperf.advise.gpa.readers import read_samples
from hybridperf.advise.gpa.samples import SampleTable

__all__ = ["GPAReport", "advise", "advise_from_samples", "format_report", "report_to_dict"]


@dataclass(frozen=True, slots=True)
class GPAReport:
    """GPA's advice for one kernel launch.

    Sample counts follow GPA.md Sec. 0: ``total_samples`` T, ``latency_samples`` L,
    ``active_samples`` A = T - L, ``issued_samples`` (reason NONE). ``suggestions`` are ranked
    by estimated speedup (1.0 = not applicable); ``label_totals`` are (label, all samples,
    latency samples) of the blamed samples, largest first.
    """

    source: str
    kernel: str
    total_samples: int
    active_samples: int
    latency_samples: int
    issued_samples: int
    launch: LaunchConfig
    arch: GPAArch
    suggestions: tuple[Suggestion, ...]
    label_totals: tuple[tuple[str, float, float], ...]
    single_dependency_coverage: float
    notes: tuple[str, ...] = ()

    @property
    def applicable(self) -> tuple[Suggestion, ...]:
        """Suggestions with an estimated speedup above 1, best first."""
        return tuple(s for s in self.suggestions if s.applicable)


def advise(table: SampleTable, *, threads_per_block: int, blocks: int, active_warps_per_sm: float,
           arch: GPAArch = V100) -> GPAReport:
    """Blame the samples of ``table``, run every optimizer and rank the suggestions.

    Parameters
    ----------
    table : SampleTable
        Per-instruction PC samples of one kernel launch.
    threads_per_block : int
        n, threads per block of the launch.
    blocks : int
        B, blocks in the grid.
    active_warps_per_sm : float
        W_SM, active warps per SM (e.g. theoretical occupancy x max warps per SM).
    arch : GPAArch
        Scheduler geometry and latencies; V100 by default, as in GPA.
    """
    if not isinstance(arch, GPAArch):
        raise GPAParameterError(f"arch must be a GPAArch, got {type(arch).__name__}")
    launch = LaunchConfig(threads_per_block, blocks, active_warps_per_sm)
    if launch.active_warps_per_sm > arch.max_warps_per_sm:
        raise GPAParameterError(
            f"active_warps_per_sm={active_warps_per_sm} exceeds {arch.name}'s "
            f"{arch.max_warps_per_sm} warps per SM; pass the launch's occupancy in warps"
        )
    blame = blame_samples(table, arch=arch)
    suggestions = run_optimizers(table, blame, launch, arch=arch)
    totals: dict[str, list[Fraction]] = defaultdict(lambda: [Fraction(0), Fraction(0)])
    for b in blame.blames:
        totals[b.label][0] += b.all_samples
        totals[b.label][1] += b.latency_samples
    labels = tuple((k, float(v[0]), float(v[1]))
                   for k, v in sorted(totals.items(), key=lambda kv: (-kv[1][0], kv[0])))
    kernels = [f.name for f in blame.program.functions if f.is_kernel]
    kernel = table.kernel or (", ".join(kernels) if kernels else table.functions[0])
    return GPAReport(table.source, kernel, table.total_samples, table.active_samples,
                     table.latency_samples, table.issued_samples, launch, arch, suggestions, labels,
                     blame.single_dependency_coverage, table.notes + blame.notes)


def advise_from_samples(path: str | Path, *, threads_per_block: int, blocks: int,
                        active_warps_per_sm: float, arch: GPAArch = V100,
                        kernel: str | None = None) -> GPAReport:
    """Read a sample table (plain CSV or ncu source-page export) and advise on it.

    ``kernel`` picks one kernel of a multi-kernel ncu export. See :func:`advise`.

    Raises
    ------
    GPAInputError
        The file is missing, empty or malformed (the message names file, line and column).
    GPAParameterError
        A launch parameter is out of range.
    """
    table = read_samples(path, kernel=kernel)
    return advise(table, threads_per_block=threads_per_block, blocks=blocks,
                  active_warps_per_sm=active_warps_per_sm, arch=arch)


def _pct(x: float, total: float) -> str:
    return f"{100.0 * x / total:.1f}%" if total else "-"


def _line(v: int | None) -> str:
    return "-" if v is None else str(v)


def format_report(report: GPAReport, *, top: int = 5) -> str:
    """A person-readable report: sample summary, then the ``top`` suggestions with speedup,
    share of samples, scopes and the five hottest matched instructions (pc, line, SASS)."""
    r, a = report, report.arch
    t = r.total_samples
    out = [
        f"GPA advice for kernel {r.kernel} ({r.source})",
        (f"  samples: {t} total, {r.active_samples} active ({_pct(r.active_samples, t)}), "
         f"{r.latency_samples} latency ({_pct(r.latency_samples, t)}), {r.issued_samples} issued "
         f"({_pct(r.issued_samples, t)})"),
        (f"  launch: {r.launch.threads_per_block} threads/block x {r.launch.blocks} blocks, "
         f"{r.launch.active_warps_per_sm:g} active warps/SM on {a.name} ({a.sm_count} SMs, "
         f"{a.schedulers_per_sm} schedulers/SM, {a.max_warps_per_sm} warps/SM)"),
        "  samples by blamed label: " + ", ".join(
            f"{'issued' if k == 'NONE' else k} {_pct(v, t)}" for k, v, _ in r.label_totals[:6]),
        "",
    ]
    shown = r.applicable[:top]
    if not shown:
        out.append("No optimizer matched: no estimated speedup above 1.00x.")
    for n, s in enumerate(shown, start=1):
        out.append(f"{n}. {s.optimizer} ({s.category}): estimated speedup {s.speedup:.2f}x, "
                   f"matched {s.matched_samples:.1f} samples ({_pct(s.matched_samples, t)})")
        out.append(f"   {s.advice}")
        for sc in s.scopes[:3]:
            act = "" if sc.active_samples is None else f", active {sc.active_samples:.1f}"
            out.append(f"   scope {sc.scope}: matched {sc.matched_samples:.1f}{act} -> {sc.speedup:.2f}x")
        if s.hotspots:
            out.append(f"   {'pc':>8}  {'line':>5}  {'samples':>8}  {'label':<10}  instruction")
            for h in s.hotspots[:5]:
                where = h.src_sass if h.src_pc == h.dst_pc else (
                    f"{h.src_sass}  ->  {h.dst_pc:#x} {h.dst_sass} (line {_line(h.dst_line)}, "
                    f"distance {h.distance})")
                out.append(f"   {h.src_pc:>#8x}  {_line(h.src_line):>5}  {h.samples:>8.1f}  "
                           f"{h.label or '-':<10}  {where}")
        out.append("")
    skipped = [s for s in r.suggestions if not s.applicable]
    if skipped:
        out.append("Not applicable: " + "; ".join(
            f"{s.optimizer}" + (f" ({s.note})" if s.note else "") for s in skipped))
    for note in r.notes:
        out.append(f"note: {note}")
    return "\n".join(out).rstrip() + "\n"


def report_to_dict(report: GPAReport) -> dict[str, Any]:
    """The report as plain JSON-ready data (nested dicts, lists, numbers, strings)."""
    def conv(x: Any) -> Any:
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            return {f.name: conv(getattr(x, f.name)) for f in dataclasses.fields(x)}
        if isinstance(x, (tuple, list)):
            return [conv(v) for v in x]
        if isinstance(x, float) and x == float("inf"):
            return "inf"
        return x

    d = conv(report)
    d["applicable"] = [s.optimizer for s in report.applicable]
    return d
