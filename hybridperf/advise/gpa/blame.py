"""GPA's instruction blamer (paper Sec. 4): backward slicing, pruning, apportioning, labels."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from hybridperf.advise.gpa.arch import V100, GPAArch
from hybridperf.advise.gpa.cfg import FunctionCFG, Program, build_program
from hybridperf.advise.gpa.errors import GPAParameterError
from hybridperf.advise.gpa.reasons import DEPENDENCY_REASONS, REASONS
from hybridperf.advise.gpa.samples import InstructionSamples, SampleTable
from hybridperf.advise.gpa.sass import Instruction, latency_class
from hybridperf.advise.gpa.slicing import Events, Found, find_definitions, resource_events

__all__ = ["Blame", "BlameResult", "apportion", "blame_samples"]

#: Memory spaces whose results the hardware tracks on the long scoreboard: waiting on them is a
#: memory-dependency (GMEM) stall, never an execution-dependency (IDEP) one.
_LONG_SPACES = frozenset({"GLOBAL", "LOCAL", "GENERIC", "TEXTURE", "CONSTANT"})
_RAW_KINDS = frozenset({"reg", "pred", "wbar"})
_WAR_KINDS = frozenset({"rbar", "war"})
_SELF_LABEL = {"IDEP": "IDEP_SCHE", "GMEM": "GMEM", "SYNC": "SYNC"}


@dataclass(frozen=True, slots=True)
class Blame:
    """Samples of instruction ``dst_pc`` blamed on instruction ``src_pc`` (equal when self-blamed).

    ``all_samples``/``latency_samples`` are exact fractions of the sampled counts (Eq. 1 splits
    a count among several sources); ``distance`` is the longest CFG path, in instructions, from
    the source to the stalled instruction (0 when self-blamed); ``edges`` lists how they are
    linked: ``reg``/``pred`` (register/predicate read after write), ``wbar``/``rbar``
    (a write/read scoreboard barrier), ``war`` (register write after a variable-latency read),
    ``sync`` (the preceding barrier).
    """

    function: str
    src_pc: int
    dst_pc: int
    reason: str
    label: str
    all_samples: Fraction
    latency_samples: Fraction
    distance: int = 0
    edges: frozenset[str] = frozenset()

    @property
    def active_samples(self) -> Fraction:
        """Samples taken while the scheduler issued (all minus latency samples)."""
        return self.all_samples - self.latency_samples

    @property
    def is_self(self) -> bool:
        return self.src_pc == self.dst_pc and not self.edges


@dataclass(frozen=True, slots=True)
class BlameResult:
    """The blamer's output: every sample of the table, attributed; plus the program structure.

    ``single_dependency_coverage`` is the share of dependency-stalled (instruction, reason)
    nodes left with at most one source after pruning (cf. paper Sec. 6.3, Fig. 7).
    """

    blames: tuple[Blame, ...]
    program: Program
    single_dependency_coverage: float
    notes: tuple[str, ...] = ()


def apportion(count: int | Fraction, issued: Sequence[int], path_lengths: Sequence[int], *,
              zero_issue_weight: int | Fraction = 1) -> tuple[Fraction, ...]:
    """Split one stalled count among its dependency sources (paper Eq. 1, GPA.md 0.2).

    blame_j = X * (iota_j * rho_j) / sum_k (iota_k * rho_k), with iota_j = issue_j / sum issue
    and rho_j = (1/d_j) / sum (1/d) -- the normalisers cancel, so blame_j is proportional to
    issue_j / d_j. issue_j is source j's issued (reason NONE) samples, or ``zero_issue_weight``
    when it has none (GPA's code uses 32 cycle-weighted units, one sample at the minimum CUPTI
    period of 32 cycles); d_j is the longest path from j to the stalled instruction, in
    instructions, at least 1. The result is exact: it sums to ``count``.

    Parameters
    ----------
    count : int or Fraction
        X, the stalled samples (all or latency) of the use instruction.
    issued : sequence of int
        Issued samples of each source.
    path_lengths : sequence of int
        d_j of each source.
    """
    if len(issued) != len(path_lengths) or not issued:
        raise GPAParameterError(
            f"apportion needs one issued count per path length and at least one source, got "
            f"{len(issued)} and {len(path_lengths)}"
        )
    if count < 0 or any(i < 0 for i in issued) or zero_issue_weight <= 0:
        raise GPAParameterError("apportion: counts must be >= 0 and zero_issue_weight > 0")
    weights = [Fraction(i if i > 0 else zero_issue_weight) / max(int(d), 1)
               for i, d in zip(issued, path_lengths)]
    total = sum(weights)
    return tuple(Fraction(count) * w / total for w in weights)


_Pred = Callable[[Instruction], bool]
_Sources = dict[int, tuple[int, int, set[str]]]  # source index -> (min distance, max distance, edge kinds)


def _never(inst: Instruction) -> bool:
    return False


def _resources(inst: Instruction, reason: str) -> list[tuple[str, object]]:
    if reason == "SYNC":
        return [("sync", None)]
    res: list[tuple[str, object]] = []
    for r in sorted(inst.sources):
        res.append(("pred" if "P" in r[:2] else "reg", r))
    res.extend(("bar", k) for k in sorted(inst.wait_barriers))
    if reason == "IDEP":
        res.extend(("war", r) for r in sorted(inst.destinations) if "P" not in r[:2])
    return res


def _predicates(kind: str, key: object) -> tuple[_Pred, _Pred, _Pred]:
    if kind in ("reg", "pred"):
        return (lambda i: key in i.destinations), (lambda i: key in i.sources), _never
    if kind == "bar":
        return ((lambda i: key in (i.write_barrier, i.read_barrier)),
                (lambda i: key in i.wait_barriers), _never)
    if kind == "war":
        return ((lambda i: key in i.sources and i.is_variable_latency), _never,
                (lambda i: key in i.destinations))
    return (lambda i: i.is_sync), _never, _never


def _limit(reason: str, kind: str, n_instructions: int, arch: GPAArch) -> int:
    """How far back a search must look: the largest latency of a source rule 1 would keep."""
    if kind == "sync":
        return n_instructions  # a barrier is a source at any distance
    if reason == "IDEP" and kind in ("reg", "pred"):
        # long-scoreboard (memory) producers are pruned for IDEP, so only the others count
        return max(arch.latency_cycles(c) for c in (
            "arith", "fp64", "bitcount", "convert", "mufu", "tensor", "short_variable", "shared"))
    return arch.max_latency_cycles


def _keep(reason: str, kind: str, src: Instruction, found: Found, arch: GPAArch) -> bool:
    """Pruning rules 1-3 of paper Sec. 4 for one candidate edge."""
    if reason == "GMEM" and (kind not in _RAW_KINDS or src.memory_space not in _LONG_SPACES):
        return False  # rule 1: memory stalls wait for the result of a memory instruction
    if reason == "IDEP" and kind in _RAW_KINDS and src.memory_space in _LONG_SPACES:
        return False  # rule 1, extended: waiting on a long-scoreboard result is a GMEM stall
    if reason == "SYNC":
        return src.is_sync  # rule 1: sync stalls come from synchronisation instructions
    if not found.unshadowed:
        return False  # rule 2: another reader on every path would have stalled first
    return found.min_dist <= arch.latency_cycles(latency_class(src))  # rule 3


def _label(reason: str, src: Instruction, kinds: frozenset[str]) -> str:
    if reason == "IDEP":
        if kinds <= _WAR_KINDS:
            return "IDEP_WAR"
        return "IDEP_SMEM" if src.memory_space == "SHARED" else "IDEP_DEP"
    if reason == "GMEM":
        return {"LOCAL": "GMEM_LMEM", "CONSTANT": "GMEM_CMEM"}.get(src.memory_space or "", "GMEM_GMEM")
    return reason


@dataclass
class _Memo:
    """One function's resource events and searches, shared by its instructions and reasons."""

    events: dict[tuple[str, object], Events] = field(default_factory=dict)
    searches: dict[tuple[int, str, object, int], dict[int, Found]] = field(default_factory=dict)
    truncated: int = 0  # searches stopped at max_states


def _definitions(cfg: FunctionCFG, use: int, kind: str, key: object, limit: int, memo: _Memo,
                 max_states: int) -> dict[int, Found]:
    """The definitions of resource (kind, key) reaching ``use`` within ``limit``, searched once."""
    ck = (use, kind, key, limit)
    if ck not in memo.searches:
        if (kind, key) not in memo.events:
            memo.events[(kind, key)] = resource_events(cfg, *_predicates(kind, key))
        memo.searches[ck], truncated = find_definitions(cfg, use, memo.events[(kind, key)], limit, max_states)
        memo.truncated += truncated
    return memo.searches[ck]


def _sources(cfg: FunctionCFG, use: int, reason: str, arch: GPAArch, memo: _Memo, max_states: int) -> _Sources:
    """The instructions a dependency stall of ``use`` is blamed on, after pruning."""
    recs = cfg.records
    sources: _Sources = {}
    for kind, key in _resources(recs[use].instruction, reason):
        limit = _limit(reason, kind, len(recs), arch)
        for j, f in _definitions(cfg, use, kind, key, limit, memo, max_states).items():
            src = recs[j].instruction
            edge = kind if kind != "bar" else ("wbar" if src.write_barrier == key else "rbar")
            if not _keep(reason, edge, src, f, arch):
                continue
            lo, hi, kinds = sources.get(j, (f.min_dist, f.max_dist, set()))
            sources[j] = (min(lo, f.min_dist), max(hi, f.max_dist), kinds | {edge})
    return sources


def _attribute(cfg: FunctionCFG, rec: InstructionSamples, reason: str, counts: tuple[int, int],
               sources: _Sources, zero_issue_weight: int) -> list[Blame]:
    """The blames of one (instruction, reason) count pair: on itself, or shared among its sources."""
    s, lat = counts
    if not sources:
        label = _SELF_LABEL.get(reason, reason)
        return [Blame(cfg.name, rec.pc, rec.pc, reason, label, Fraction(s), Fraction(lat))]
    recs = cfg.records
    order = sorted(sources)
    issued = [recs[j].issued for j in order]
    dists = [sources[j][1] for j in order]
    shares_all = apportion(s, issued, dists, zero_issue_weight=zero_issue_weight)
    shares_lat = apportion(lat, issued, dists, zero_issue_weight=zero_issue_weight)
    out = []
    for j, a, l_ in zip(order, shares_all, shares_lat):
        kinds = frozenset(sources[j][2])
        out.append(Blame(cfg.name, recs[j].pc, rec.pc, reason, _label(reason, recs[j].instruction, kinds), a, l_,
                         sources[j][1], kinds))
    return out


def blame_samples(table: SampleTable, *, arch: GPAArch = V100, zero_issue_weight: int = 1,
                  max_search_states: int = 20_000) -> BlameResult:
    """Attribute every sample of ``table`` to the instruction that caused it (paper Sec. 4).

    IDEP, GMEM and SYNC samples of an instruction u are sliced back, within u's function,
    along def-use chains of its registers, predicates (including its guard) and waited
    scoreboard barriers B0-B5; IDEP also follows write-after-read links (a variable-latency
    reader of a register u overwrites) and SYNC the preceding barrier. The search on a path
    continues until the guards of the definitions found cover u's guard. Candidate sources are
    pruned by opcode (GMEM from long-scoreboard memory instructions, IDEP read-after-write not
    from them, SYNC from barriers), by the dominator rule and by latency (a source farther than
    its latency bound in ``arch``), and the survivors share u's counts by :func:`apportion`.
    With no survivor, and for every other reason, the samples stay on u (self-blame). All
    counts are exact fractions, so the blamed total equals the sampled total.
    """
    if zero_issue_weight < 1 or max_search_states < 1:
        raise GPAParameterError("blame_samples: zero_issue_weight and max_search_states must be >= 1")
    program = build_program(table)
    blames: list[Blame] = []
    truncated = nodes = single = 0
    for cfg in program.functions:
        memo = _Memo()
        for u, rec in enumerate(cfg.records):
            for k, reason in enumerate(REASONS):
                counts = rec.all_samples[k], rec.latency_samples[k]
                if counts == (0, 0):
                    continue
                sources: _Sources = {}
                if reason in DEPENDENCY_REASONS and not (reason == "SYNC" and rec.instruction.is_sync):
                    sources = _sources(cfg, u, reason, arch, memo, max_search_states)
                    nodes += 1
                    single += len(sources) <= 1
                blames.extend(_attribute(cfg, rec, reason, counts, sources, zero_issue_weight))
        truncated += memo.truncated
    notes: tuple[str, ...] = ()
    if truncated:
        notes = ((f"{truncated} backward search(es) stopped after {max_search_states} states; "
                  "their sources may be incomplete"),)
    coverage = single / nodes if nodes else 1.0
    return BlameResult(tuple(blames), program, coverage, notes)
