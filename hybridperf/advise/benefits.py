"""advise: GPUPerf's bottleneck terms and benefit metrics turned into ranked optimization families."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hybridperf.analytical.hierarchy import LEVEL_COLUMNS, LEVELS, limiter_names
from hybridperf.analytical.mwp_cwp import REGIMES
from hybridperf.analytical.run import analyze
from hybridperf.errors import HybridperfError
from hybridperf.hardware import GPUSpec
from hybridperf.kernel import KernelDescriptor

__all__ = ["BENEFIT_FAMILIES", "Advice", "advise", "advise_samples", "benefit_chart", "format_advice"]

# What each GPUPerf benefit points to (seed 000 Sec. 3, Sec. 6 case studies and Table 5).
BENEFIT_FAMILIES: dict[str, tuple[str, str]] = {
    "b_itilp": ("inter-thread ILP", "loop unrolling / unroll-and-jam, more independent instructions per thread, "
                "more resident warps (raise occupancy)"),
    "b_memlp": ("memory-level parallelism", "prefetching, tiling / data reuse in shared memory, coalescing, more "
                "loads in flight per warp, privatization"),
    "b_fp": ("computing efficiency", "remove non-FP overhead: thread coarsening, regularization, binning, "
             "fewer address/integer instructions, fast-math intrinsics"),
    "b_serial": ("serialization", "fewer __syncthreads, balance SFU and FP work, avoid divergence and shared-"
                 "memory bank conflicts, privatization"),
}


@dataclass(frozen=True, slots=True)
class Advice:
    """Per-row GPUPerf terms (ms) with benefit shares, the MWP-CWP regime and the ranked suggestions."""

    kernel: KernelDescriptor
    gpu: GPUSpec
    table: pd.DataFrame
    feasible: np.ndarray
    reason: np.ndarray


def advise(kernel: KernelDescriptor | str, gpu: GPUSpec | str, params: Mapping[str, Any] | pd.DataFrame) -> Advice:
    """GPUPerf (seed 000 Eqs. 1-23) and MWP-CWP regime for each parameter row, in milliseconds.

    ``share_*`` columns are each benefit divided by T_exec (the fraction of the predicted time the
    optimization family could remove at best); ``zone`` is compute- or memory-bound by the
    y = x line of the benefit chart (T_comp vs T'_mem); ``top`` lists the benefits above 5% of
    T_exec, largest first. Beside them, the hierarchical roofline's time (``hierarchical_ms``), its
    limiting level (``hierarchical_limiter``), each level's time (``h_<level>_ms``) and the bytes it
    sends to L2 and DRAM (``l2_gb``, ``dram_gb``; local memory and spills included).
    """
    res = analyze(kernel, gpu, params, models=["gpuperf", "mwp-cwp", "hierarchical"])
    gp, mc, hi = res.terms["gpuperf"], res.terms["mwp-cwp"], res.terms["hierarchical"]
    to_ms = 1.0 / (res.gpu.core_clock_mhz * 1e3)
    t = res.params.copy()
    for col in ("t_exec", "t_comp", "t_mem", "t_overlap", "t_mem_prime", "t_fp", "t_mem_min",
                "b_itilp", "b_memlp", "b_fp", "b_serial"):
        t[f"{col}_ms"] = gp[col].to_numpy() * to_ms
    for b in BENEFIT_FAMILIES:
        t[f"share_{b}"] = gp[b].to_numpy() / gp["t_exec"].to_numpy()
    t["mwp"] = mc["mwp"].to_numpy()
    t["cwp"] = mc["cwp"].to_numpy()
    t["regime"] = [REGIMES.get(int(r), "") if ok else "" for r, ok in zip(mc["regime"].fillna(-1), res.feasible)]
    t["zone"] = np.where(gp["t_comp"] >= gp["t_mem_prime"], "compute-bound", "memory-bound")
    tops = []
    for i in range(len(t)):
        pairs = sorted(((t[f"share_{b}"].iloc[i], b) for b in BENEFIT_FAMILIES), reverse=True)
        tops.append(",".join(b for s, b in pairs if np.isfinite(s) and s > 0.05))
    t["top"] = tops
    t["hierarchical_ms"] = hi["time_ms"].to_numpy()
    t["hierarchical_limiter"] = limiter_names(hi["limiter"], res.feasible)
    for level in LEVEL_COLUMNS:
        t[f"h_{level}"] = hi[level].to_numpy()
    t["l2_gb"] = hi["l2_traffic_bytes"].to_numpy() / 1e9
    t["dram_gb"] = hi["dram_traffic_bytes"].to_numpy() / 1e9
    t.loc[~res.feasible, "zone"] = "infeasible"
    return Advice(kernel=res.kernel, gpu=res.gpu, table=t, feasible=res.feasible, reason=res.reason)


def _hierarchy_line(r: pd.Series) -> str:
    """The hierarchical roofline's time, what limits it and the next two levels, and its L2 and DRAM bytes."""
    levels = sorted(((r[f"h_{c}"], name) for c, name in zip(LEVEL_COLUMNS, LEVELS) if np.isfinite(r[f"h_{c}"])),
                    reverse=True)
    nxt = ", ".join(f"{name} {ms:.4g} ms" for ms, name in levels[1:3] if ms > 0)
    return (f"  hierarchical roofline {r.hierarchical_ms:.4g} ms, limited by {r.hierarchical_limiter}"
            f"{f' (next: {nxt})' if nxt else ''}; L2 {r.l2_gb:.3g} GB, DRAM {r.dram_gb:.3g} GB")


def format_advice(advice: Advice, max_launches: int = 100) -> str:
    """A report for a person: per launch the bottleneck and what to try (the first ``max_launches``; a line
    counts the rest), then how it moves with size over every launch."""
    t = advice.table
    params = list(advice.kernel.parameters)
    lines = [f"{advice.kernel.name} on {advice.gpu.name}"]
    for i in range(min(len(t), max_launches)):
        head = ", ".join(f"{p}={t[p].iloc[i]:g}" for p in params)
        if not advice.feasible[i]:
            lines.append(f"\n[{head}] infeasible: {advice.reason[i]}")
            continue
        r = t.iloc[i]
        lines.append(f"\n[{head}] predicted {r.t_exec_ms:.4g} ms, {r.zone}; MWP-CWP regime: {r.regime} "
                     f"(MWP {r.mwp:.3g}, CWP {r.cwp:.3g})")
        lines.append(f"  T_comp {r.t_comp_ms:.4g} ms, T_mem {r.t_mem_ms:.4g} ms, T_overlap {r.t_overlap_ms:.4g} ms, "
                     f"T'_mem {r.t_mem_prime_ms:.4g} ms; ideal T_fp {r.t_fp_ms:.4g} ms, "
                     f"T_mem_min {r.t_mem_min_ms:.4g} ms")
        lines.append(_hierarchy_line(r))
        for b, (what, how) in sorted(BENEFIT_FAMILIES.items(), key=lambda kv: -np.nan_to_num(r[f"share_{kv[0]}"])):
            share = r[f"share_{b}"]
            flag = "  <-" if b in r.top.split(",") else ""
            lines.append(f"  {b:<9} {r[f'{b}_ms']:>10.4g} ms {share:>7.1%} of T_exec  {what}: {how}{flag}")
        if r.share_b_fp < 0:
            lines.append("  (B_fp < 0: ITILP is below its peak while FP work dominates; GPUPerf Eq. 22 reported as is)")
    if len(t) > max_launches:
        lines.append(f"\n({len(t) - max_launches:,} more launches: --json or the library's Advice.table gives each)")
    ok = t[advice.feasible]
    if len(ok) > 1:
        def at(i: int) -> str:
            return ", ".join(f"{p}={ok[p].iloc[i]:g}" for p in params)

        zone, regime = ok.zone.to_numpy(), ok.regime.to_numpy()
        moves = [f"{at(0)}: {zone[0]}, {regime[0]}"]
        for i in np.flatnonzero((zone[1:] != zone[:-1]) | (regime[1:] != regime[:-1])) + 1:
            moves.append(f"from {at(i)}: {zone[i]}, {regime[i]}")
        lines.append("\nbottleneck across the rows: " + ("; ".join(moves) if len(moves) > 1 else
                                                           f"unchanged ({ok.zone.iloc[0]}, {ok.regime.iloc[0]})"))
    return "\n".join(lines)


def _benefit_panel(ax: Any, advice: Advice, r: pd.Series) -> None:
    """One row's benefit X-Y chart on ``ax``, scaled to that row so every row is legible."""
    ax.scatter([r.t_mem_ms], [r.t_comp_ms], color="0.4", zorder=3)
    ax.annotate("A", (r.t_mem_ms, r.t_comp_ms), textcoords="offset points", xytext=(-16, 10))
    ax.scatter([r.t_mem_prime_ms], [r.t_comp_ms], color="k", zorder=3)
    ax.annotate("A'", (r.t_mem_prime_ms, r.t_comp_ms), textcoords="offset points", xytext=(8, 10))
    x0, y0 = r.t_mem_prime_ms, r.t_comp_ms
    arrows = [("b_memlp", -r.b_memlp_ms, 0.0, "tab:blue"), ("b_itilp", 0.0, -r.b_itilp_ms, "tab:orange"),
              ("b_serial", 0.0, -r.b_serial_ms, "tab:green"), ("b_fp", 0.0, -r.b_fp_ms, "tab:red")]
    # Downward benefits are stacked one after the other from A' (each removes its own cost).
    span = max(r.t_mem_ms, r.t_comp_ms, 1e-12)
    y_cur = y0
    for k, (name, dx, dy, color) in enumerate(arrows):
        if abs(dx) + abs(dy) <= 1e-12 * span:
            continue
        start = (x0 + 0.015 * span * k, y0 if dx else y_cur)
        ax.annotate("", xy=(start[0] + dx, start[1] + dy), xytext=start,
                    arrowprops=dict(arrowstyle="->", color=color, lw=1.8))
        ax.plot([], [], color=color, label=f"{name} = {abs(dx + dy):.3g} ms")
        y_cur += dy
    lim = 1.15 * max(r.t_mem_ms, r.t_comp_ms, r.t_mem_min_ms, r.t_fp_ms)
    ax.plot([0, lim], [0, lim], "--", color="0.5", lw=1)
    ax.text(0.97 * lim, 0.55 * lim, "memory bound", color="0.4", ha="right", va="center", fontsize=8)
    ax.text(0.03 * lim, 0.97 * lim, "compute bound", color="0.4", ha="left", va="top", fontsize=8)
    ax.axhline(r.t_fp_ms, color="tab:red", lw=0.8, ls=":", label=f"T_fp = {r.t_fp_ms:.3g} ms")
    ax.axvline(r.t_mem_min_ms, color="tab:blue", lw=0.8, ls=":", label=f"T_mem_min = {r.t_mem_min_ms:.3g} ms")
    ax.set_xlim(0, lim)
    ax.set_ylim(min(0.0, y_cur) - 0.02 * lim, lim)
    ax.set_xlabel("memory cost T'_mem (ms)")
    ax.set_ylabel("computation cost T_comp (ms)")
    ax.set_title(", ".join(f"{p}={r[p]:g}" for p in advice.kernel.parameters), fontsize=9)
    ax.legend(fontsize=7, loc="center right")


MAX_CHART_ROWS = 12


def benefit_chart(advice: Advice, path: str | Path, row: int | None = None) -> Path:
    """Draw the benefit X-Y chart (Sim et al., PPoPP 2012, Figs. 4 and 14) of every feasible row, one panel
    each with its own scale (``row``: only that row), as PNG, SVG or PDF by the file name.

    x = memory cost, y = computation cost (ms). A = (T_mem, T_comp); A' = (T'_mem, T_comp) after the
    overlap; arrows show where each benefit moves A' (B_memlp left, B_itilp / B_serial / B_fp down);
    the dashed y = x line splits compute- from memory-bound; T_fp and T_mem_min are the ideal costs.
    """
    import math

    from hybridperf.plots import save_figure

    t = advice.table
    if row is not None and not 0 <= row < len(t):
        raise HybridperfError(f"row {row} does not exist: the advice has {len(t)} row(s); pick --row 0 to {len(t) - 1}")
    path = Path(path)
    if path.suffix.lower().lstrip(".") not in ("png", "svg", "pdf"):
        raise HybridperfError(f"{path}: unknown chart format {path.suffix!r}; name the file .png, .svg or .pdf")
    rows = [row] if row is not None else [i for i in range(len(t)) if advice.feasible[i]]
    if not rows or not advice.feasible[rows[0]]:
        raise HybridperfError("no feasible row to chart; see the advice's infeasible reasons")
    if len(rows) > MAX_CHART_ROWS:
        raise HybridperfError(f"the chart shows at most {MAX_CHART_ROWS} rows, the advice has {len(rows)}; "
                              "pick one with --row or give fewer --set values")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ncols = min(3, len(rows))
    nrows = math.ceil(len(rows) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.4 * ncols, 4.8 * nrows), squeeze=False)
    for ax, i in zip(axes.flat, rows):
        _benefit_panel(ax, advice, t.iloc[i])
    for ax in list(axes.flat)[len(rows):]:
        ax.set_visible(False)
    fig.suptitle(f"{advice.kernel.name} on {advice.gpu.name}: GPUPerf benefit chart", fontsize=11)
    return save_figure(fig, path)


def advise_samples(advice: Advice, samples: str | Path, *, row: int = 0, threads_per_block: int | None = None,
                   blocks: int | None = None, active_warps_per_sm: float | None = None,
                   kernel: str | None = None) -> Any:
    """GPA (Zhou et al., CGO 2021) on per-instruction stall samples of one analysed launch.

    The launch geometry (threads per block, blocks, active warps per SM from the occupancy model)
    comes from row ``row`` of ``advice`` unless given; the scheduler geometry from the GPU spec
    (:meth:`hybridperf.advise.gpa.GPAArch.from_spec`). ``kernel`` picks one kernel of a
    multi-kernel Nsight Compute export.
    """
    from hybridperf.advise.gpa import GPAArch, advise_from_samples
    from hybridperf.analytical.launch import launch_state

    r = advice.table.iloc[row]
    prof = advice.kernel.profile({p: r[p] for p in advice.kernel.parameters})
    state = launch_state(prof, advice.gpu)
    return advise_from_samples(
        samples, threads_per_block=int(threads_per_block or prof.threads_per_block[0]),
        blocks=int(blocks or prof.blocks[0]), active_warps_per_sm=float(active_warps_per_sm or state.n_warps[0]),
        arch=GPAArch.from_spec(advice.gpu), kernel=kernel)
