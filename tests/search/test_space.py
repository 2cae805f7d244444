"""The constraint solver (search/space.py) against a brute-force Cartesian product filtered by the same formulas."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridperf.errors import DescriptorError
from hybridperf.formula import compile_formula
from hybridperf.kernel import load_kernel
from hybridperf.search.space import ConfigSpace, constraint_reason
from hybridperf.search.user_space import user_space

NAMES = ("a", "b", "c", "d")
# Constraints over the parameters and a size N: binary, ternary, unary, all four, one without parameters.
CONSTRAINTS = ["a * b <= N", "c % a == 0", "d > 1 or c == 0", "N % b == 0", "a + b + c + d < 20", "a <= 3",
               "N > 5", "max(a, d) - min(b, c) != 2", "where(a == 1, b, c) >= 2"]


def _brute(names, values, constraints, constants):
    """Every combination in product order (last parameter fastest), the mask of those that satisfy all,
    and, per constraint, how many combinations break it."""
    rows = np.array(list(itertools.product(*values)), dtype=np.float64).reshape(-1, len(names))
    env = {**constants, **{n: rows[:, i] for i, n in enumerate(names)}}
    ok = np.ones(len(rows), dtype=bool)
    broken = {}
    for c in constraints:
        sat = np.broadcast_to(c(env) != 0, ok.shape)
        broken[constraint_reason(c)] = int((~sat).sum())
        ok &= sat
    return rows, ok, broken


values_st = st.lists(st.sampled_from([0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0]), min_size=1, max_size=4, unique=True)


@settings(max_examples=60, deadline=None)
@given(values=st.tuples(values_st, values_st, values_st, values_st),
       picked=st.lists(st.sampled_from(CONSTRAINTS), max_size=5, unique=True),
       n=st.sampled_from([4.0, 6.0, 8.0]), chunk=st.integers(1, 40))
def test_solver_gives_the_filtered_product(values, picked, n, chunk) -> None:
    cons = tuple(compile_formula(c, allowed=set(NAMES) | {"N"}) for c in picked)
    space = ConfigSpace(names=NAMES, values=values, constraints=cons, constants={"N": n})
    pruned: dict[str, int] = {}
    chunks = list(space.chunks(chunk, pruned=pruned))
    assert all(len(c) <= chunk for c in chunks) and all(len(c) == chunk for c in chunks[:-1])
    got = space.frame()  # every chunk, sorted by index
    assert sum(len(c) for c in chunks) == len(got)
    rows, ok, broken = _brute(NAMES, values, cons, {"N": n})
    assert got["index"].tolist() == np.flatnonzero(ok).tolist()
    np.testing.assert_array_equal(got[list(NAMES)].to_numpy(dtype=np.float64).reshape(-1, 4), rows[ok])
    # Every configuration is accounted for once, under a constraint it breaks.
    assert sum(pruned.values()) + len(got) == space.size() == len(rows)
    assert all(pruned[r] <= broken[r] for r in pruned)
    if len(cons) == 1:  # one constraint: the count is exact
        assert pruned.get(constraint_reason(cons[0]), 0) == broken[constraint_reason(cons[0])]
    # Units of work cover the space exactly once, whatever their number.
    split_pruned: dict[str, int] = {}
    units = space.split(3, split_pruned)
    parts = [c for u in units for c in space.chunks(chunk, start=u, pruned=split_pruned)]
    idx = sorted(i for c in parts for i in c["index"])
    assert idx == got["index"].tolist() and split_pruned == pruned


def test_real_descriptors_match_their_product() -> None:
    for name, sizes in (("clblast-xgemm", {"M": 2048, "N": 2048, "K": 2048}), ("kt-dedispersion", {})):
        us = user_space(name, sizes)
        pruned: dict[str, int] = {}
        got = pd.concat(list(us.space.chunks(100_000, pruned=pruned)), ignore_index=True).sort_values("index")
        full = pd.concat(list(us.kernel.config_space()), ignore_index=True)
        ok, _ = us.kernel.constraint_mask({**{c: full[c].to_numpy() for c in full}, **us.sizes})
        assert got["index"].tolist() == np.flatnonzero(ok).tolist()
        assert sum(pruned.values()) == int((~ok).sum())
    assert len(got) == 701_190
    assert len(user_space("clblast-xgemm", {"M": 2048, "N": 2048, "K": 2048}).configs()) == 241_600  # UCI's count


def test_order_binds_constrained_parameters_first_and_free_ones_last() -> None:
    plan = user_space("kt-convolution", {}).space.plan()
    names = load_kernel("kt-convolution").config_names
    order = [names[i] for i in plan.order]
    assert set(order[:2]) == {"block_size_x", "block_size_y"}  # the threads constraint is checked at level 2
    assert set(order[-2:]) == {"read_only", "use_cmem"}  # in no constraint
    assert plan.checks[1] and not plan.checks[0]


def test_constant_and_single_parameter_constraints_prune_before_the_search() -> None:
    never = compile_formula("N > 5", allowed={"N"})
    space = ConfigSpace(names=("a",), values=((1.0, 2.0),), constraints=(never,), constants={"N": 4.0})
    pruned: dict[str, int] = {}
    assert list(space.chunks(10, pruned=pruned)) == [] and pruned == {constraint_reason(never): 2}
    small = compile_formula("a <= 2", allowed={"a", "b"})
    space = ConfigSpace(names=("a", "b"), values=((1.0, 2.0, 3.0), (5.0, 6.0)), constraints=(small,))
    pruned = {}
    assert len(space.frame()) == 4 and pruned == {} and space.plan().pruned == {constraint_reason(small): 2}
    # No parameters at all: one (empty) configuration.
    assert len(ConfigSpace(names=(), values=()).frame()) == 1


def test_errors_are_one_line() -> None:
    with pytest.raises(DescriptorError, match="'Q', which is neither a config parameter nor a given size"):
        ConfigSpace(names=("a",), values=((1.0,),), constraints=(compile_formula("a < Q"),))
    with pytest.raises(DescriptorError, match="has no values"):
        ConfigSpace(names=("a",), values=((),))
    with pytest.raises(DescriptorError, match="more than 3 feasible"):
        ConfigSpace(names=("a",), values=((1.0, 2.0, 3.0, 4.0),)).frame(max_rows=3)
    with pytest.raises(DescriptorError, match="chunk_rows"):
        next(ConfigSpace(names=("a",), values=((1.0,),)).chunks(0))


def test_a_large_space_streams_in_bounded_chunks() -> None:
    # 10^7 combinations (the synthetic descriptor): only chunks of 100,000 are ever built.
    us = user_space("tests/search/synthetic-10m.toml", {"N": 4096})
    assert us.space.size() == 10**7
    n = 0
    for chunk in itertools.islice(us.space.chunks(100_000), 5):
        assert len(chunk) == 100_000
        n += len(chunk)
    assert n == 500_000 and math.prod(len(v) for v in us.space.values) == 10**7
