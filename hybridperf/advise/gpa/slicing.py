"""Backward slicing in one function's CFG: the definitions of a resource that reach a use (paper Sec. 4)."""
from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

from hybridperf.advise.gpa.cfg import FunctionCFG
from hybridperf.advise.gpa.sass import Instruction, Predicate

__all__ = ["Events", "Found", "find_definitions", "resource_events"]

_DEF, _KILL, _READ = 1, 2, 3

_State = tuple[int, bool, frozenset, bool]  # (block, is the use's own start, covered guards, shadowed)
_Hit = tuple[int, int, bool]  # (definition index, distance from the top of its state, unshadowed)
_Explored = dict[_State, tuple[list[_Hit], int, list[_State]]]  # state -> (hits, width, next states)
Events = list[list[tuple[int, int]]]  # per block: (instruction index, _DEF | _KILL | _READ), bottom up


@dataclass(frozen=True, slots=True)
class Found:
    """A definition reaching the use: shortest and longest path, in instructions, and whether some
    path avoids an unpredicated reader of the resource."""

    min_dist: int
    max_dist: int
    unshadowed: bool


@dataclass(frozen=True, slots=True)
class _Use:
    cfg: FunctionCFG
    index: int
    block: int
    guard: Predicate | None
    events: Events


def resource_events(cfg: FunctionCFG, defines: Callable[[Instruction], bool], reads: Callable[[Instruction], bool],
                    kills: Callable[[Instruction], bool]) -> Events:
    """Per block, the (index, event) pairs of one resource, last instruction first.

    An instruction that ``defines`` the resource is a definition (guarded or not); an
    unguarded one that ``kills`` it ends the search; an unguarded one that ``reads`` it shadows
    the definitions above it (dominator rule 2).
    """
    out: Events = []
    for b in range(len(cfg.block_starts)):
        ev = []
        for i in range(cfg.block_end(b) - 1, cfg.block_starts[b] - 1, -1):
            inst = cfg.records[i].instruction
            if defines(inst):
                ev.append((i, _DEF))
            elif kills(inst) and inst.guard is None:
                ev.append((i, _KILL))
            elif reads(inst) and inst.guard is None:
                ev.append((i, _READ))
        out.append(ev)
    return out


def _covers(cov: frozenset[Predicate | None], guard: Predicate | None) -> bool:
    """Does the union of def predicates contain the use predicate? (paper Sec. 4)"""
    if None in cov or (guard is not None and guard in cov):
        return True
    regs = {p.register for p in cov if p is not None}
    return any(Predicate(r, False) in cov and Predicate(r, True) in cov for r in regs)


def _scan(use: _Use, state: _State) -> tuple[list[_Hit], int, tuple | None]:
    """Walk one block of a state upwards: (hits, instructions walked, (guards, shadowed) to go on with or None)."""
    b, is_start, cov, shadowed = state
    reentry = b == use.block and not is_start
    top = use.index - 1 if is_start else use.cfg.block_end(b) - 1
    floor = use.index if reentry else use.cfg.block_starts[b]
    hits: list[_Hit] = []
    for i, event in use.events[b]:
        if i > top:
            continue
        if i < floor:
            break
        if event == _KILL:
            return hits, top - i + 1, None
        if event == _READ:
            shadowed = True
            continue
        hits.append((i, top - i, not shadowed))
        cov = cov | {use.cfg.records[i].instruction.guard}
        if _covers(cov, use.guard):
            return hits, top - i + 1, None
    return hits, top - floor + 1, None if reentry else (cov, shadowed)


def _explore(use: _Use, start: _State, max_dist: int,
             max_states: int) -> tuple[dict[_State, int], _Explored, bool]:
    """Dijkstra over the states: (shortest distance of each, what each state found, truncated)."""
    shortest = {start: 1}
    explored: _Explored = {}
    heap = [(1, 0, start)]
    order = 0
    while heap:
        d, _, state = heapq.heappop(heap)
        if d > shortest[state] or state in explored:
            continue
        if len(explored) >= max_states:
            return shortest, explored, True
        hits, width, out = _scan(use, state)
        nexts = [] if out is None else [(p, False, *out) for p in use.cfg.predecessors[state[0]]]
        explored[state] = (hits, width, nexts)
        for nxt in nexts:
            nd = d + width
            if nd <= max_dist and nd < shortest.get(nxt, max_dist + 1):
                shortest[nxt] = nd
                order += 1
                heapq.heappush(heap, (nd, order, nxt))
    return shortest, explored, False


def _acyclic_order(start: _State, explored: _Explored) -> tuple[list[_State], dict[_State, list[_State]]]:
    """(post-order, forward edges) of a depth-first walk of the explored states, retreating edges dropped."""
    post: list[_State] = []
    color: dict[_State, int] = {start: 1}
    stack = [(start, iter(explored[start][2]))]
    forward: dict[_State, list[_State]] = {s: [] for s in explored}
    while stack:
        state, it = stack[-1]
        for nxt in it:
            if nxt not in explored or color.get(nxt) == 1:
                continue  # unexplored, or a retreating edge
            forward[state].append(nxt)
            if nxt not in color:
                color[nxt] = 1
                stack.append((nxt, iter(explored[nxt][2])))
            break
        else:
            color[state] = 2
            post.append(state)
            stack.pop()
    return post, forward


def _longest(start: _State, explored: _Explored) -> dict[_State, int]:
    """Longest distance of each state in the explored graph without its retreating edges."""
    post, forward = _acyclic_order(start, explored)
    longest = {start: 1}
    for state in reversed(post):
        for nxt in forward[state]:
            longest[nxt] = max(longest.get(nxt, 0), longest[state] + explored[state][1])
    return longest


def _collect(explored: _Explored, shortest: dict[_State, int], longest: dict[_State, int],
             max_dist: int) -> dict[int, Found]:
    """Merge the hits of all states per definition, dropping those beyond ``max_dist``."""
    found: dict[int, Found] = {}
    for state, (hits, _, _) in explored.items():
        for i, k, unshadowed in hits:
            lo = shortest[state] + k
            if lo > max_dist:
                continue
            hi = longest.get(state, shortest[state]) + k
            f = found.get(i)
            found[i] = Found(lo, hi, unshadowed) if f is None else Found(
                min(f.min_dist, lo), max(f.max_dist, hi), f.unshadowed or unshadowed)
    return found


def find_definitions(cfg: FunctionCFG, use: int, events: Events, max_dist: int,
                     max_states: int) -> tuple[dict[int, Found], bool]:
    """Search the CFG backwards from ``use`` for the definitions of one resource.

    A path stops when the guards of the definitions met on it cover the use's guard (paper
    Sec. 4), at a killing instruction, at the function entry, or when it comes back to the use
    (which is examined as its own loop-carried source). States are (block, covered guards,
    shadowed), so the search is polynomial even in branchy code. ``min_dist`` is the shortest
    path (Dijkstra; walks and simple paths have the same shortest length, reachability and
    shadowing) and is bounded by ``max_dist``; ``unshadowed`` records whether some path avoids
    an unpredicated reader of the resource (dominator rule 2); ``max_dist`` is the longest path
    in the acyclic search graph (retreating edges of a depth-first order dropped), which is the
    longest simple path wherever the region between source and use has no cycle.

    Parameters
    ----------
    cfg : FunctionCFG
        The function.
    use : int
        Index of the stalled instruction in ``cfg.records``.
    events : list of list of (int, int)
        The resource's :func:`resource_events`.
    max_dist, max_states : int
        Bound on the shortest path and on the states explored.

    Returns
    -------
    tuple
        ``{definition index: Found}`` and whether the search stopped at ``max_states``.
    """
    block = cfg.block_of[use]
    start: _State = (block, True, frozenset(), False)
    shortest, explored, truncated = _explore(
        _Use(cfg, use, block, cfg.records[use].instruction.guard, events), start, max_dist, max_states)
    return _collect(explored, shortest, _longest(start, explored), max_dist), truncated
