"""Control-flow graphs, natural loops and kernel/device-function roles of a sample table."""
from __future__ import annotations

from dataclasses import dataclass

from hybridperf.advise.gpa.errors import GPAInputError
from hybridperf.advise.gpa.samples import InstructionSamples, SampleTable, resolve_branch_target

__all__ = ["FunctionCFG", "Loop", "Program", "build_program"]


@dataclass(frozen=True, slots=True)
class Loop:
    """A natural loop: the blocks reaching a back edge's tail without passing its header."""

    loop_id: str
    function: str
    header_pc: int
    pcs: frozenset[int]
    parent: str | None
    depth: int


@dataclass(frozen=True, slots=True)
class FunctionCFG:
    """One function's instructions in pc order, its basic blocks and its loop nest."""

    name: str
    records: tuple[InstructionSamples, ...]
    block_starts: tuple[int, ...]
    successors: tuple[tuple[int, ...], ...]
    predecessors: tuple[tuple[int, ...], ...]
    block_of: tuple[int, ...]
    loops: tuple[Loop, ...]
    innermost_loop: tuple[str | None, ...]
    is_kernel: bool

    def block_end(self, block: int) -> int:
        """Index one past the last instruction of ``block``."""
        return self.block_starts[block + 1] if block + 1 < len(self.block_starts) else len(self.records)

    def index_of(self, pc: int) -> int:
        for i, r in enumerate(self.records):
            if r.pc == pc:
                return i
        raise KeyError(pc)

    def loop(self, loop_id: str) -> Loop:
        for lp in self.loops:
            if lp.loop_id == loop_id:
                return lp
        raise KeyError(loop_id)

    def loop_chain(self, index: int) -> tuple[Loop, ...]:
        """The loops containing instruction ``index``, innermost first."""
        out: list[Loop] = []
        lid = self.innermost_loop[index]
        while lid is not None:
            lp = self.loop(lid)
            out.append(lp)
            lid = lp.parent
        return tuple(out)

    @property
    def size_bytes(self) -> int:
        """Code size assuming Volta's fixed 128-bit (16-byte) instruction encoding (paper Sec. 2.2)."""
        return 16 * len(self.records)


@dataclass(frozen=True, slots=True)
class Program:
    """All functions of a sample table."""

    functions: tuple[FunctionCFG, ...]

    def function(self, name: str) -> FunctionCFG:
        for f in self.functions:
            if f.name == name:
                return f
        raise KeyError(name)


def _block_end(starts: list[int], block: int, n_records: int) -> int:
    """Index one past the last instruction of ``block``."""
    return starts[block + 1] if block + 1 < len(starts) else n_records


def _block_of(starts: list[int], n_records: int) -> list[int]:
    """The block of every instruction."""
    block_of: list[int] = []
    for b, s in enumerate(starts):
        block_of.extend([b] * (_block_end(starts, b, n_records) - s))
    return block_of


def _leaders(name: str, recs: list[InstructionSamples]) -> tuple[set[int], dict[int, int]]:
    """(indices that start a block, {branch index: target index})."""
    pcs = [r.pc for r in recs]
    leaders = {0}
    targets: dict[int, int] = {}
    for i, r in enumerate(recs):
        inst = r.instruction
        if inst.branch_target is not None:
            t = resolve_branch_target(pcs, inst.branch_target)
            if t is None:
                raise GPAInputError(
                    f"function {name!r} pc {r.pc:#x}: branch target {inst.branch_target:#x} is not "
                    "a pc of the function; include every instruction of the function"
                )
            targets[i] = t
            leaders.add(t)
        if inst.branch_label is not None:
            raise GPAInputError(
                f"function {name!r} pc {r.pc:#x}: branch target label {inst.branch_label!r} "
                "cannot be resolved; use numeric branch targets"
            )
        if inst.ends_block and i + 1 < len(recs):
            leaders.add(i + 1)
    return leaders, targets


def _blocks(name: str, recs: list[InstructionSamples]) -> tuple[list[int], list[list[int]]]:
    """(first instruction of each block, successor blocks of each block): taken branch first."""
    leaders, targets = _leaders(name, recs)
    starts = sorted(leaders)
    block_of = _block_of(starts, len(recs))
    succ: list[list[int]] = [[] for _ in starts]
    for b in range(len(starts)):
        last = _block_end(starts, b, len(recs)) - 1
        if last in targets:
            succ[b].append(block_of[targets[last]])
        if recs[last].instruction.falls_through and last + 1 < len(recs) and block_of[last + 1] not in succ[b]:
            succ[b].append(block_of[last + 1])
    return starts, succ


def _dominators(succ: list[list[int]], preds: list[list[int]]) -> list[set[int]]:
    n = len(succ)
    reach = {0}
    stack = [0]
    while stack:
        for s in succ[stack.pop()]:
            if s not in reach:
                reach.add(s)
                stack.append(s)
    dom = [set(reach) if b in reach else {b} for b in range(n)]
    dom[0] = {0}
    changed = True
    while changed:
        changed = False
        for b in sorted(reach - {0}):
            ps = [dom[p] for p in preds[b] if p in reach]
            new = set.intersection(*ps) | {b} if ps else {b}
            if new != dom[b]:
                dom[b], changed = new, True
    for b in range(n):
        if b not in reach:
            dom[b] = set()  # unreachable code takes part in no loop
    return dom


def _loop_bodies(succ: list[list[int]], preds: list[list[int]]) -> dict[int, set[int]]:
    """{header block: body blocks} of the natural loops, headers in order of their first back edge."""
    dom = _dominators(succ, preds)
    bodies: dict[int, set[int]] = {}
    for t, ss in enumerate(succ):
        for h in ss:
            if h in dom[t]:  # back edge t -> h
                body = bodies.setdefault(h, {h})
                stack = [t]
                while stack:
                    b = stack.pop()
                    if b not in body:
                        body.add(b)
                        stack.extend(preds[b])
    return bodies


def _loop_parents(bodies: dict[int, set[int]], order: list[int]) -> dict[int, int | None]:
    """Each loop's smallest enclosing loop (``order``: headers by body size, ties as in ``bodies``)."""
    parent: dict[int, int | None] = {}
    for h in order:
        outer = [g for g in order if g != h and bodies[h] < bodies[g]]
        parent[h] = min(outer, key=lambda g: len(bodies[g])) if outer else None
    return parent


def _depth(parent: dict[int, int | None], header: int) -> int:
    p = parent[header]
    return 1 if p is None else 1 + _depth(parent, p)


def _pcs_of(recs: list[InstructionSamples], starts: list[int], blocks: set[int]) -> frozenset[int]:
    out = set()
    for b in blocks:
        out.update(r.pc for r in recs[starts[b]:_block_end(starts, b, len(recs))])
    return frozenset(out)


def _loops(name: str, recs: list[InstructionSamples], starts: list[int], succ: list[list[int]],
           preds: list[list[int]]) -> tuple[tuple[Loop, ...], list[str | None]]:
    """The natural loops of a function, by header pc, and each instruction's innermost loop id."""
    bodies = _loop_bodies(succ, preds)
    order = sorted(bodies, key=lambda h: len(bodies[h]))
    ids = {h: f"{name}/loop@{recs[starts[h]].pc:#06x}" for h in bodies}
    parent = _loop_parents(bodies, order)
    loops = tuple(
        Loop(ids[h], name, recs[starts[h]].pc, _pcs_of(recs, starts, bodies[h]),
             ids[parent[h]] if parent[h] is not None else None, _depth(parent, h))  # type: ignore[index]
        for h in sorted(bodies, key=lambda h: recs[starts[h]].pc)
    )
    innermost: list[str | None] = [None] * len(recs)
    for h in reversed(order):  # outermost first, inner loops overwrite
        for b in bodies[h]:
            for i in range(starts[b], _block_end(starts, b, len(recs))):
                innermost[i] = ids[h]
    return loops, innermost


def _called(table: SampleTable, by_function: dict[str, list[InstructionSamples]]) -> set[str]:
    called: set[str] = set()
    for r in table.instructions:
        target = r.instruction.call_target
        if target is None:
            continue
        if target in by_function:
            called.add(target)
            continue
        if target.startswith("0x"):
            addr = int(target, 16)
            for f, recs in by_function.items():
                if f != r.function and recs[0].pc <= addr <= recs[-1].pc:
                    called.add(f)
    return called


def build_program(table: SampleTable) -> Program:
    """Split every function into basic blocks, link them and find the loop nests.

    Blocks end after ``BRA``/``BRX``/``JMP``/``JMX``/``RET``/``EXIT``/``KILL`` and start at
    branch targets; a guarded branch also falls through; ``CALL`` does not end a block (the
    analysis is intra-procedural, paper Sec. 4). Loops are natural loops of back edges whose
    head dominates the tail; irreducible cycles form no loop. A function is a kernel when the
    table names it (``SampleTable.kernel``) or, otherwise, when no ``CALL`` in the table
    targets it.

    Raises
    ------
    GPAInputError
        A branch target is not an instruction of its function.
    """
    by_function: dict[str, list[InstructionSamples]] = {}
    for r in table.instructions:
        by_function.setdefault(r.function, []).append(r)
    for recs in by_function.values():
        recs.sort(key=lambda r: r.pc)
    called = _called(table, by_function)
    funcs = []
    for name, recs in by_function.items():
        starts, succ = _blocks(name, recs)
        preds: list[list[int]] = [[] for _ in starts]
        for b, ss in enumerate(succ):
            for s in ss:
                preds[s].append(b)
        loops, innermost = _loops(name, recs, starts, succ, preds)
        block_of = _block_of(starts, len(recs))
        is_kernel = name == table.kernel if table.kernel in by_function else name not in called
        funcs.append(FunctionCFG(
            name, tuple(recs), tuple(starts), tuple(tuple(s) for s in succ),
            tuple(tuple(p) for p in preds), tuple(block_of), loops, tuple(innermost), is_kernel,
        ))
    return Program(tuple(funcs))
