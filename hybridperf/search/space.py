"""A configuration space built by a vectorised constraint solver: only feasible configurations, streamed in chunks."""
# The space is the Cartesian product of each config parameter's values, restricted by the descriptor's
# ``[space]`` constraints (formula strings, evaluated by :mod:`hybridperf.formula`, never ``eval``) with
# the problem sizes bound as constants. Instead of building the product and filtering it, the solver
# binds one parameter at a time (an order that completes constraints early, unconstrained parameters
# last), extends whole blocks of partial configurations with numpy, and drops a partial configuration
# as soon as a constraint all of whose parameters are bound is broken, so the configurations it would
# have led to are never built (forward checking on blocks, as in backtracking solvers). Blocks are
# extended depth first and capped in rows, so memory stays bounded by the chunk size whatever the
# size of the space.
from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pandas as pd

from hybridperf.errors import DescriptorError
from hybridperf.formula import Formula

__all__ = ["ConfigSpace", "Prefix", "constraint_reason"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def constraint_reason(formula: Formula) -> str:
    """The infeasibility reason a broken constraint is counted under (as :meth:`constraint_mask` words it)."""
    return f"constraint {formula.text!r} violated"


@dataclass(frozen=True, slots=True)
class Prefix:
    """Partial configurations with the parameters of the first ``level`` solver levels bound: a unit of work
    (small and picklable, so it can be shipped to a Dask worker)."""

    level: int
    index: IntArray
    columns: Mapping[str, FloatArray]

    def __len__(self) -> int:
        return len(self.index)


@dataclass(frozen=True, slots=True)
class _Plan:
    order: tuple[int, ...]  # parameter positions, in the order the solver binds them
    values: tuple[FloatArray, ...]  # per level: the values left after the one-parameter constraints
    offsets: tuple[IntArray, ...]  # per level: each value's position x the parameter's stride in the product
    checks: tuple[tuple[Formula, ...], ...]  # per level: constraints completed there, in descriptor order
    tail: tuple[int, ...]  # per level: configurations one partial configuration stands for once that level is bound
    pruned: Mapping[str, int]  # configurations removed before the search (constant and one-parameter constraints)


@dataclass(frozen=True, slots=True)
class ConfigSpace:
    """Every combination of ``values`` (one tuple per parameter of ``names``) that satisfies ``constraints``.

    ``constants`` binds the other names the constraints use (problem sizes). A configuration's
    ``index`` is its position in the Cartesian product of ``values`` (last parameter fastest), the
    position a product-then-filter enumeration would give, computed without building the product.
    """

    names: tuple[str, ...]
    values: tuple[tuple[float, ...], ...]
    constraints: tuple[Formula, ...] = ()
    constants: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.names) != len(self.values):
            raise DescriptorError(f"{len(self.names)} parameter names but {len(self.values)} value lists")
        empty = [n for n, v in zip(self.names, self.values) if len(v) == 0]
        if empty:
            raise DescriptorError(f"config parameter {empty[0]} has no values; give at least one")
        known = set(self.names) | set(self.constants)
        for c in self.constraints:
            missing = sorted(c.names - known)
            if missing:
                raise DescriptorError(f"constraint {c.text!r} uses {missing[0]!r}, which is neither a config "
                                      "parameter nor a given size")

    def size(self) -> int:
        """Configurations in the Cartesian product (feasible or not)."""
        return math.prod(len(v) for v in self.values)

    def plan(self) -> _Plan:
        """The solver's order of parameters and the checks at each level (cheap: computed per call)."""
        return _make_plan(self)

    def root(self) -> Prefix:
        """The empty partial configuration (level 0): the whole space as one unit of work."""
        return Prefix(level=0, index=np.zeros(1, dtype=np.int64), columns={})

    def chunks(self, chunk_rows: int = 200_000, start: Prefix | None = None,
               pruned: MutableMapping[str, int] | None = None) -> Iterator[pd.DataFrame]:
        """Feasible configurations below ``start`` (default: the whole space) in chunks of about ``chunk_rows``.

        Each chunk has an ``index`` column and one column per parameter (``names`` order). Rows come
        in the solver's order, not by index. Configurations broken by a constraint are added to
        ``pruned`` (reason -> count), under the first constraint, in descriptor order, checked at
        the level where the solver dropped them; with ``start=None`` the constraints checked before
        the search (constant and one-parameter ones) are counted too.
        """
        if chunk_rows < 1:
            raise DescriptorError(f"chunk_rows must be at least 1, got {chunk_rows}")
        plan = self.plan()
        counts: MutableMapping[str, int] = {} if pruned is None else pruned
        if start is None:
            _add(counts, plan.pruned)
            if any(len(v) == 0 for v in plan.values):
                return
            start = self.root()
        buffer: list[Prefix] = []
        held = 0
        for block in _walk(self, plan, start, chunk_rows, counts):
            buffer.append(block)
            held += len(block)
            while held >= chunk_rows:  # exactly chunk_rows per chunk, the rest carried over
                frame = self._frame(buffer)
                yield frame.iloc[:chunk_rows].reset_index(drop=True)
                rest = frame.iloc[chunk_rows:]
                buffer = [Prefix(level=start.level, index=rest["index"].to_numpy(),
                                 columns={n: rest[n].to_numpy() for n in self.names})] if len(rest) else []
                held = len(rest)
        if held:
            yield self._frame(buffer)

    def split(self, n_parts: int, pruned: MutableMapping[str, int] | None = None) -> list[Prefix]:
        """Cut the space into about ``n_parts`` units of work (bind levels until there are that many
        partial configurations, then slice them); what the binding pruned goes to ``pruned``."""
        plan = self.plan()
        counts: MutableMapping[str, int] = {} if pruned is None else pruned
        _add(counts, plan.pruned)
        if any(len(v) == 0 for v in plan.values):
            return []
        block = self.root()
        while len(block) < n_parts and block.level < len(plan.order):
            block = _extend(self, plan, block, counts)
        step = max(1, math.ceil(len(block) / max(n_parts, 1)))
        return [Prefix(level=block.level, index=block.index[s:s + step],
                       columns={k: v[s:s + step] for k, v in block.columns.items()})
                for s in range(0, len(block), step)]

    def frame(self, max_rows: int | None = None) -> pd.DataFrame:
        """Every feasible configuration, sorted by index (``max_rows``: refuse more than that many)."""
        parts, n = [], 0
        for chunk in self.chunks():
            n += len(chunk)
            if max_rows is not None and n > max_rows:
                raise DescriptorError(f"the space holds more than {max_rows:,} feasible configurations")
            parts.append(chunk)
        if not parts:
            return pd.DataFrame({"index": np.zeros(0, dtype=np.int64), **{n: np.zeros(0) for n in self.names}})
        return pd.concat(parts, ignore_index=True).sort_values("index", kind="stable").reset_index(drop=True)

    def _frame(self, blocks: Sequence[Prefix]) -> pd.DataFrame:
        data: dict[str, np.ndarray] = {"index": np.concatenate([b.index for b in blocks])}
        for name in self.names:
            data[name] = np.concatenate([b.columns[name] for b in blocks])
        return pd.DataFrame(data)


def _add(counts: MutableMapping[str, int], more: Mapping[str, int]) -> None:
    for k, v in more.items():
        if v:
            counts[k] = counts.get(k, 0) + int(v)


def _order(space: ConfigSpace, params: Sequence[frozenset[int]], sizes: Sequence[int]) -> tuple[int, ...]:
    """Greedy variable order: first the parameter that completes the most constraints, then the one in the
    most unfinished constraints, then the smallest domain, then descriptor order; so constraints are checked
    as early as possible and unconstrained parameters come last."""
    bound: set[int] = set()
    order: list[int] = []
    pending = list(params)
    while len(order) < len(space.names):
        def score(i: int) -> tuple[int, int, int, int]:
            done = sum(1 for p in pending if i in p and p <= bound | {i})
            return done, sum(1 for p in pending if i in p), -sizes[i], -i
        best = max((i for i in range(len(space.names)) if i not in bound), key=score)
        order.append(best)
        bound.add(best)
        pending = [p for p in pending if not p <= bound]
    return tuple(order)


def _make_plan(space: ConfigSpace) -> _Plan:
    n = len(space.names)
    pos_of = {name: i for i, name in enumerate(space.names)}
    sizes = [len(v) for v in space.values]
    strides = [math.prod(sizes[i + 1:]) for i in range(n)]
    keep = [np.ones(s, dtype=bool) for s in sizes]
    pruned: dict[str, int] = {}
    multi: list[tuple[Formula, frozenset[int]]] = []
    alive = space.size()
    for c in space.constraints:
        params = frozenset(pos_of[x] for x in c.names if x in pos_of)
        if len(params) > 1:
            multi.append((c, params))
            continue
        if not params:  # sizes only: all or nothing
            ok = bool(np.all(c(dict(space.constants)) != 0))
            if not ok and alive:
                pruned[constraint_reason(c)] = pruned.get(constraint_reason(c), 0) + alive
                alive = 0
                keep = [np.zeros(s, dtype=bool) for s in sizes]
            continue
        (i,) = params
        vals = np.asarray(space.values[i], dtype=np.float64)
        ok = np.broadcast_to(c({**space.constants, space.names[i]: vals}) != 0, vals.shape)
        removed = int((keep[i] & ~ok).sum())
        if removed and alive:
            share = alive // int(keep[i].sum())
            pruned[constraint_reason(c)] = pruned.get(constraint_reason(c), 0) + removed * share
            alive -= removed * share
        keep[i] &= ok
    order = _order(space, [p for _, p in multi], [int(k.sum()) for k in keep])
    values, offsets, checks, bound = [], [], [], set()
    for i in order:
        idx = np.flatnonzero(keep[i])
        values.append(np.asarray(space.values[i], dtype=np.float64)[idx])
        offsets.append(idx.astype(np.int64) * strides[i])
        bound.add(i)
        checks.append(tuple(c for c, p in multi if i in p and p <= bound))
    left = [len(v) for v in values]
    tail = tuple(math.prod(left[k + 1:]) for k in range(n))
    return _Plan(order=order, values=tuple(values), offsets=tuple(offsets), checks=tuple(checks), tail=tail,
                 pruned=pruned)


def _extend(space: ConfigSpace, plan: _Plan, block: Prefix, counts: MutableMapping[str, int]) -> Prefix:
    """Bind the next level's parameter in every way, then drop what breaks a constraint completed there."""
    level = block.level
    vals, offs = plan.values[level], plan.offsets[level]
    m, r = len(vals), len(block)
    cols = {k: np.repeat(v, m) for k, v in block.columns.items()}
    cols[space.names[plan.order[level]]] = np.tile(vals, r)
    index = np.repeat(block.index, m) + np.tile(offs, r)
    if plan.checks[level]:
        env: dict[str, object] = {**space.constants, **cols}
        ok = np.ones(m * r, dtype=bool)
        for c in plan.checks[level]:
            sat = np.broadcast_to(c(env) != 0, ok.shape)
            broken = int((ok & ~sat).sum())
            if broken:
                counts[constraint_reason(c)] = counts.get(constraint_reason(c), 0) + broken * plan.tail[level]
            ok &= sat
        if not ok.all():
            cols = {k: v[ok] for k, v in cols.items()}
            index = index[ok]
    return Prefix(level=level + 1, index=index, columns=cols)


def _walk(space: ConfigSpace, plan: _Plan, block: Prefix, cap: int,
          counts: MutableMapping[str, int]) -> Iterator[Prefix]:
    """Depth first: extend ``block`` level by level, at most about ``cap`` rows at a time."""
    if block.level == len(plan.order):
        if len(block):
            yield block
        return
    step = max(1, cap // len(plan.values[block.level]))
    for s in range(0, len(block), step):
        part = block if len(block) <= step else Prefix(level=block.level, index=block.index[s:s + step],
                                                       columns={k: v[s:s + step] for k, v in block.columns.items()})
        child = _extend(space, plan, part, counts)
        if len(child):
            yield from _walk(space, plan, child, cap, counts)
