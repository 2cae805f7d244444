"""NAME=VALUES parsing and parameter grids."""
from __future__ import annotations

import pytest

from hybridperf.errors import HybridperfError, RecordError
from hybridperf.grid import parameter_grid, parse_assignments, parse_values


def test_parse_values_forms() -> None:
    assert parse_values("4096") == [4096.0]
    assert parse_values("1,2, 3") == [1.0, 2.0, 3.0]
    assert parse_values("1024:4096:1024") == [1024.0, 2048.0, 3072.0, 4096.0]
    assert parse_values("1024:8192:x2") == [1024.0, 2048.0, 4096.0, 8192.0]
    for bad in ("x", "1:2:0", "4:8:x1", "0:8:x2", ""):
        with pytest.raises(HybridperfError):
            parse_values(bad)


def test_parse_assignments() -> None:
    assert parse_assignments(["N=1024:4096:x2", "COALESCED=false,true"]) == {
        "N": [1024.0, 2048.0, 4096.0], "COALESCED": [0.0, 1.0]}
    with pytest.raises(HybridperfError, match="write NAME=VALUES"):
        parse_assignments(["N"])
    with pytest.raises(RecordError, match="N is given twice"):
        parse_assignments(["N=1", "N=2"], flag="--sizes", error=RecordError)
    with pytest.raises(HybridperfError, match="--set N: cannot read value"):
        parse_assignments(["N=abc"])


def test_parameter_grid_is_the_cartesian_product() -> None:
    grid = parameter_grid({"A": [1, 2], "B": [10, 20, 30]})
    assert grid.shape == (6, 2)
    assert set(map(tuple, grid.to_numpy())) == {(a, b) for a in (1, 2) for b in (10, 20, 30)}
    assert parameter_grid({}).shape == (1, 0)


def test_defaulted_parameters_are_those_no_column_gives() -> None:
    """A size given in a counter.<name> column (a counter-described kernel, AIWC's) is not the descriptor's default;
    a parameter no column gives is, with its default value."""
    import pandas as pd

    from hybridperf.grid import defaulted_parameters
    from hybridperf.kernel import load_kernel

    desc = load_kernel("aiwc-counted")
    counters = {f"counter.{n}": [111360.0] for n in desc.size_names}
    rows = pd.DataFrame({"kernel": ["aiwc-counted"], "gpu": ["tesla-k40c"], **counters})
    assert not any(c.startswith("size.") for c in defaulted_parameters(rows))
    out = defaulted_parameters(rows.drop(columns=f"counter.{desc.size_names[0]}"))
    assert out == {f"size.{desc.size_names[0]}": desc.parameters[desc.size_names[0]].default}
    assert defaulted_parameters(pd.DataFrame({"kernel": ["seed004-matvec"], "gpu": ["h200"], "size.N": [8.0]})) == {
        "config.BLOCK": 256.0}


def test_a_range_counts_from_its_distance() -> None:
    """1e16:1e16 gave no value (1e16 + 0.5 is 1e16 in a float). The stop is included within half a step
    (test_properties checks the rule against brute force)."""
    from hybridperf.grid import parse_values

    assert parse_values("1e16:1e16") == [1e16]
    assert parse_values("1024:1024") == [1024.0]
    assert parse_values("1:9.9:3") == [1.0, 4.0, 7.0, 10.0]
    assert parse_values("1024:8192:1024") == [1024.0 * i for i in range(1, 9)]
    assert len(parse_values("0:0.3:0.1")) == 4  # 0.3 / 0.1 is 2.9999999999999996 in floats
