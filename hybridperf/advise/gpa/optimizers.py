"""GPA's performance optimizers (paper Table 2, GPA.md Sec. 5): match blamed samples to advice."""
from __future__ import annotations

import math
import numbers
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fractions import Fraction

from hybridperf.advise.gpa.arch import V100, GPAArch
from hybridperf.advise.gpa.blame import Blame, BlameResult
from hybridperf.advise.gpa.cfg import FunctionCFG, Loop
from hybridperf.advise.gpa.errors import GPAParameterError
from hybridperf.advise.gpa.estimators import (
    block_increase_speedup,
    scope_latency_hiding_speedup,
    stall_elimination_speedup,
    thread_increase_speedup,
)
from hybridperf.advise.gpa.samples import InstructionSamples, SampleTable
from hybridperf.advise.gpa.sass import latency_class

__all__ = ["Hotspot", "LaunchConfig", "ScopeEstimate", "Suggestion", "run_optimizers"]

_IFET_LIMIT = 0.3       # GPA.md Sec. 5: inlining / fast math only if IFET latency share <= 0.3
_INLINE_MAX_BYTES = 3000  # GPA.md Sec. 5: device functions smaller than 3000 B are inlinable
_STRENGTH_CLASSES = ("bitcount", "convert", "mufu")


@dataclass(frozen=True, slots=True)
class LaunchConfig:
    """The launch the samples were taken from: threads per block n, blocks B, warps per SM W_SM."""

    threads_per_block: int
    blocks: int
    active_warps_per_sm: float

    def __post_init__(self) -> None:
        for name in ("threads_per_block", "blocks"):
            v = getattr(self, name)
            if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < 1:
                raise GPAParameterError(f"{name} must be a positive integer, got {v!r}")
            object.__setattr__(self, name, int(v))
        w = self.active_warps_per_sm
        if isinstance(w, bool) or not isinstance(w, numbers.Real) or not math.isfinite(w) or w <= 0:
            raise GPAParameterError(f"active_warps_per_sm must be a positive number, got {w!r}")
        object.__setattr__(self, "active_warps_per_sm", float(w))


@dataclass(frozen=True, slots=True)
class Hotspot:
    """A matched source -> stalled instruction pair (equal pcs when self-blamed)."""

    function: str
    src_pc: int
    src_sass: str
    src_line: int | None
    dst_pc: int
    dst_sass: str
    dst_line: int | None
    label: str
    samples: float
    distance: int


@dataclass(frozen=True, slots=True)
class ScopeEstimate:
    """Matched samples of one region (pair, loop, function) and its speedup on its own."""

    scope: str
    matched_samples: float
    active_samples: float | None
    speedup: float


@dataclass(frozen=True, slots=True)
class Suggestion:
    """One optimizer's advice with its estimated kernel speedup (1.0 = nothing to gain)."""

    optimizer: str
    category: str
    estimator: str
    speedup: float
    matched_samples: float
    sample_share: float
    advice: str
    hotspots: tuple[Hotspot, ...] = ()
    scopes: tuple[ScopeEstimate, ...] = ()
    note: str = ""

    @property
    def applicable(self) -> bool:
        return self.speedup > 1.0


class _Ctx:
    """Lookups shared by the optimizers (internal)."""

    def __init__(self, table: SampleTable, blame: BlameResult, launch: LaunchConfig, arch: GPAArch):
        self.table, self.blame, self.launch, self.arch = table, blame, launch, arch
        self.T = table.total_samples
        self.L = table.latency_samples
        self.A = table.active_samples
        self.cfgs = {f.name: f for f in blame.program.functions}
        self.index = {(f.name, r.pc): i for f in blame.program.functions for i, r in enumerate(f.records)}
        ifet = table.reason_totals()["IFET"][1]
        self.ifet_ratio = ifet / self.L if self.L else 0.0

    def record(self, function: str, pc: int) -> InstructionSamples:
        return self.cfgs[function].records[self.index[(function, pc)]]

    def chain(self, b: Blame) -> tuple[Loop, ...]:
        return self.cfgs[b.function].loop_chain(self.index[(b.function, b.src_pc)])

    def loop_label(self, cfg: FunctionCFG, lp: Loop) -> str:
        lines = sorted({r.line for r in cfg.records if r.pc in lp.pcs and r.line is not None})
        span = f", lines {lines[0]}-{lines[-1]}" if lines else ""
        return f"loop at {lp.header_pc:#x} in {cfg.name}{span}"


def _hotspots(ctx: _Ctx, matched: Iterable[Blame], value: Callable[[Blame], Fraction],
              n: int = 5) -> tuple[Hotspot, ...]:
    acc: dict[tuple[str, int, int], list] = {}
    for b in matched:
        key = (b.function, b.src_pc, b.dst_pc)
        entry = acc.setdefault(key, [Fraction(0), set(), 0])
        entry[0] += value(b)
        entry[1].add(b.label)
        entry[2] = max(entry[2], b.distance)
    top = sorted((k for k in acc if acc[k][0] > 0), key=lambda k: (-acc[k][0], k))[:n]
    out = []
    for f, s, d in top:
        src, dst = ctx.record(f, s), ctx.record(f, d)
        out.append(Hotspot(f, s, src.sass, src.line, d, dst.sass, dst.line,
                           "+".join(sorted(acc[(f, s, d)][1])), float(acc[(f, s, d)][0]),
                           acc[(f, s, d)][2]))
    return tuple(out)


def _eliminate(ctx: _Ctx, name: str, advice: str, matched: list[Blame],
               group: Callable[[Blame], str], note: str = "") -> Suggestion:
    """A stall-elimination optimizer: S = T / (T - sum_k M_k), M = all samples (Eq. 2)."""
    groups: dict[str, Fraction] = defaultdict(Fraction)
    for b in matched:
        groups[group(b)] += b.all_samples
    m = sum(groups.values(), Fraction(0))
    scopes = tuple(ScopeEstimate(g, float(v), None, stall_elimination_speedup(ctx.T, float(v)))
                   for g, v in sorted(groups.items(), key=lambda kv: (-kv[1], kv[0])) if v > 0)
    return Suggestion(name, "stall elimination", "Eq. 2: T/(T-M)",
                      stall_elimination_speedup(ctx.T, float(m)), float(m), float(m) / ctx.T, advice,
                      _hotspots(ctx, matched, lambda b: b.all_samples), scopes,
                      note if m == 0 else "")


def _hide(ctx: _Ctx, name: str, advice: str, matched: list[Blame], m_s: dict[str, Fraction],
          a_s: dict[str, Fraction], cap: Fraction, note: str = "") -> Suggestion:
    """A latency-hiding optimizer: S = T / (T - min(A_cap, sum_s min(M_L^s, A^s))) (Eqs. 4-5)."""
    pairs = [(float(m_s[s]), float(a_s.get(s, Fraction(0)))) for s in m_s]
    speedup = scope_latency_hiding_speedup(ctx.T, pairs, float(cap)) if pairs else 1.0
    scopes = tuple(
        ScopeEstimate(s, float(m), float(a_s.get(s, 0)),
                      scope_latency_hiding_speedup(ctx.T, [(float(m), float(a_s.get(s, 0)))],
                                                   float(a_s.get(s, 0))))
        for s, m in sorted(m_s.items(), key=lambda kv: (-kv[1], kv[0])) if m > 0
    )
    m = sum(m_s.values(), Fraction(0))
    return Suggestion(name, "latency hiding", "Eqs. 4-5: T/(T-min(M_L,A))", speedup, float(m),
                      float(m) / ctx.T, advice, _hotspots(ctx, matched, lambda b: b.latency_samples),
                      scopes, note if m == 0 else "")


def _pair(b: Blame) -> str:
    return f"{b.src_pc:#x} -> {b.dst_pc:#x} in {b.function}"


def register_reuse(ctx: _Ctx) -> Suggestion:
    m = [b for b in ctx.blame.blames if b.label == "GMEM_LMEM"]
    return _eliminate(ctx, "Register Reuse", "Uses of local-memory (spill) loads stall: cut register "
                      "pressure (split the loop, fewer live values, __launch_bounds__) so values stay "
                      "in registers.", m, _pair, "no local-memory (spill) dependencies")


def strength_reduction(ctx: _Ctx) -> Suggestion:
    slow = {c for c in _STRENGTH_CLASSES
            if ctx.arch.latency_cycles(c) >= ctx.arch.strength_reduction_min_cycles}
    m = [b for b in ctx.blame.blames
         if latency_class(ctx.record(b.function, b.src_pc).instruction) in slow]
    return _eliminate(ctx, "Strength Reduction", "Long-latency arithmetic (conversions, MUFU, POPC): "
                      "use float literals (2.0f), avoid int division/modulo, use cheaper "
                      "operations or intrinsics.", m, _pair, "no long-latency arithmetic sampled")


def function_splitting(ctx: _Ctx) -> Suggestion:
    m = [b for b in ctx.blame.blames
         if "IFET" in b.label and ctx.record(b.function, b.src_pc).inlined_from]
    return _eliminate(ctx, "Function Splitting", "Instruction-fetch stalls in large inlined code: split "
                      "the function or mark it __noinline__ to shrink the hot code.", m,
                      lambda b: f"inlined {ctx.record(b.function, b.src_pc).inlined_from}",
                      "no IFET stalls in inlined code (needs the inlined_from column)")


def fast_math(ctx: _Ctx) -> Suggestion:
    if ctx.ifet_ratio > _IFET_LIMIT:
        m: list[Blame] = []
        note = f"IFET latency share {ctx.ifet_ratio:.0%} > 30%"
    else:
        m = [b for b in ctx.blame.blames
             if not ctx.cfgs[b.function].is_kernel and "cuda_sm" in b.function]
        note = "no samples in CUDA math-library functions (*cuda_sm*)"
    return _eliminate(ctx, "Fast Math", "Time in CUDA math-library routines: compile with "
                      "--use_fast_math or use intrinsics (__expf, __fdividef).", m,
                      lambda b: f"function {b.function}", note)


def warp_balance(ctx: _Ctx) -> Suggestion:
    m = [b for b in ctx.blame.blames if "SYNC" in b.label]
    return _eliminate(ctx, "Warp Balance", "Warps wait at barriers: balance the work of the warps "
                      "of a block or move work out of the synchronised region.", m, _pair,
                      "no synchronisation stalls")


def memory_transaction_reduction(ctx: _Ctx) -> Suggestion:
    m = [b for b in ctx.blame.blames if "MTHR" in b.label]
    return _eliminate(ctx, "Memory Transaction Reduction", "Memory throttling: coalesce accesses, "
                      "use wider loads, read data shared by threads once (shared or constant "
                      "memory).", m, lambda b: f"{b.src_pc:#x} in {b.function}",
                      "no memory-throttle stalls")


def loop_unrolling(ctx: _Ctx) -> Suggestion:
    m_s: dict[str, Fraction] = defaultdict(Fraction)
    a_s: dict[str, Fraction] = defaultdict(Fraction)
    cap = Fraction(0)
    matched = []
    for b in ctx.blame.blames:
        cfg = ctx.cfgs[b.function]
        inner = cfg.innermost_loop[ctx.index[(b.function, b.src_pc)]]
        if inner is None or inner != cfg.innermost_loop[ctx.index[(b.function, b.dst_pc)]]:
            continue
        chain = ctx.chain(b)
        for lp in chain:
            a_s[ctx.loop_label(cfg, lp)] += b.active_samples
        cap += b.active_samples
        if "IDEP" in b.label or "GMEM" in b.label:
            m_s[ctx.loop_label(cfg, chain[0])] += b.latency_samples
            matched.append(b)
    return _hide(ctx, "Loop Unrolling", "Dependent instructions of the same loop iteration stall: "
                 "unroll the loop (#pragma unroll or by hand) so iterations overlap.", matched, m_s,
                 a_s, cap, "no dependency stalls inside a loop")


def code_reordering(ctx: _Ctx) -> Suggestion:
    m_s: dict[str, Fraction] = defaultdict(Fraction)
    a_s: dict[str, Fraction] = defaultdict(Fraction)
    matched = []
    for b in ctx.blame.blames:
        cfg = ctx.cfgs[b.function]
        chain = ctx.chain(b)
        for lp in chain:
            a_s[ctx.loop_label(cfg, lp)] += b.active_samples
        a_s[f"function {b.function}"] += b.active_samples
        if "IDEP" in b.label or "GMEM" in b.label:
            scope = ctx.loop_label(cfg, chain[0]) if chain else f"function {b.function}"
            m_s[scope] += b.latency_samples
            matched.append(b)
    return _hide(ctx, "Code Reordering", "Uses follow their loads too closely: issue loads earlier "
                 "(prefetch into registers) and move independent work between def and use.",
                 matched, m_s, a_s, Fraction(ctx.A), "no memory or execution dependency stalls")


def function_inlining(ctx: _Ctx) -> Suggestion:
    m_s: dict[str, Fraction] = defaultdict(Fraction)
    a_s: dict[str, Fraction] = defaultdict(Fraction)
    matched = []
    note = "no samples in small device functions"
    if ctx.ifet_ratio > _IFET_LIMIT:
        note = f"IFET latency share {ctx.ifet_ratio:.0%} > 30%"
    else:
        for b in ctx.blame.blames:
            cfg = ctx.cfgs[b.function]
            if cfg.is_kernel or cfg.size_bytes >= _INLINE_MAX_BYTES:
                continue
            m_s[f"function {b.function}"] += b.latency_samples
            a_s[f"function {b.function}"] += b.active_samples
            matched.append(b)
    return _hide(ctx, "Function Inlining", "Stalls in small device functions: inline them "
                 "(__forceinline__) so the compiler can schedule across the call.", matched, m_s,
                 a_s, Fraction(ctx.A), note)


def _self_hotspots(ctx: _Ctx, value: Callable[[InstructionSamples], int]) -> tuple[Hotspot, ...]:
    recs = sorted((r for r in ctx.table.instructions if value(r) > 0),
                  key=lambda r: (-value(r), r.function, r.pc))[:5]
    return tuple(Hotspot(r.function, r.pc, r.sass, r.line, r.pc, r.sass, r.line, "", float(value(r)), 0)
                 for r in recs)


def block_increase(ctx: _Ctx) -> Suggestion:
    throttle = ("MTHR", "NSEL", "PIPE")
    m = sum(ctx.table.reason_totals()[k][0] for k in throttle)
    lc = ctx.launch
    s = block_increase_speedup(ctx.table.issued_samples / ctx.T, lc.active_warps_per_sm,
                               lc.threads_per_block, lc.blocks, m / ctx.T, arch=ctx.arch)
    a = ctx.arch
    note = "" if s > 1.0 else (f"applies when blocks < {a.sm_count} SMs and threads per block > "
                               f"{a.schedulers_per_sm * a.warp_size}, with issued samples")
    return Suggestion("Block Increase", "parallel", "Eq. 10: (di/dw)*F, one warp per scheduler", s,
                      float(m), m / ctx.T, "Too few blocks for the SMs: launch more, smaller blocks "
                      "(e.g. half the threads per block, twice the blocks).",
                      _self_hotspots(ctx, lambda r: sum(r.samples(k) for k in throttle)), (), note)


def thread_increase(ctx: _Ctx) -> Suggestion:
    lc = ctx.launch
    issued = ctx.table.issued_samples
    if ctx.L == 0:
        s, note = 1.0, "no latency samples to hide"
    else:
        s = thread_increase_speedup(issued / ctx.T, lc.active_warps_per_sm, lc.threads_per_block,
                                    arch=ctx.arch)
        note = "" if s > 1.0 else "no issued samples or already at full occupancy"
    return Suggestion("Thread Increase", "parallel", "Eq. 10: di*beta, full occupancy", s,
                      float(issued), issued / ctx.T, "Few active warps per scheduler: use more "
                      "threads per block (a multiple of 32) or fewer registers/shared memory per "
                      "thread to raise occupancy.", _self_hotspots(ctx, lambda r: r.issued), (), note)


_OPTIMIZERS = (loop_unrolling, code_reordering, function_inlining, strength_reduction, warp_balance,
               fast_math, function_splitting, register_reuse, memory_transaction_reduction,
               block_increase, thread_increase)


def run_optimizers(table: SampleTable, blame: BlameResult, launch: LaunchConfig, *,
                   arch: GPAArch = V100) -> tuple[Suggestion, ...]:
    """Run GPA's eleven optimizers (paper Table 2) and rank them by estimated speedup.

    Stall elimination (Eq. 2): Register Reuse (GMEM_LMEM), Strength Reduction (sources of
    latency >= 10 cycles: conversions, MUFU, POPC), Function Splitting (IFET in inlined code),
    Fast Math (functions named ``*cuda_sm*``), Warp Balance (SYNC), Memory Transaction Reduction
    (MTHR). Latency hiding (Eqs. 4-5): Loop Unrolling (IDEP/GMEM pairs within one loop), Code
    Reordering (all IDEP/GMEM pairs), Function Inlining (small device functions). Parallel
    (Eq. 10): Block Increase, Thread Increase. Matching rules follow GPA.md Sec. 5.
    """
    ctx = _Ctx(table, blame, launch, arch)
    out = [opt(ctx) for opt in _OPTIMIZERS]
    return tuple(sorted(out, key=lambda s: (-s.speedup, s.optimizer)))
