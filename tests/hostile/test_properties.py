"""Property tests: the --set grammar against a brute-force reference, the formula evaluator against an independent
interpreter, and the importers on arbitrary input (a HybridperfError or a valid sweep, nothing else)."""
from __future__ import annotations

import json
import math
import operator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hybridperf.errors import FormulaError, HybridperfError
from hybridperf.formula import compile_formula
from hybridperf.grid import parse_assignments, parse_values
from hybridperf.importers import import_sweep
from hybridperf.sweep import validate_sweep

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
IMPORT_SETTINGS = settings(SETTINGS, max_examples=40)
finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


# -- the NAME=VALUES grammar -----------------------------------------------------------------------------------


@SETTINGS
@given(start=finite, step=st.floats(min_value=1e-3, max_value=1e5), n=st.integers(0, 60))
def test_arithmetic_range_matches_brute_force(start: float, step: float, n: int) -> None:
    stop = start + n * step
    got = parse_values(f"{start!r}:{stop!r}:{step!r}")
    want, i = [], 0
    while start + i * step < stop + step / 2:  # inclusive of stop, robust to rounding: the documented rule
        want.append(start + i * step)
        i += 1
    assert len(got) == len(want)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9 * step)


@SETTINGS
@given(start=st.floats(min_value=1e-3, max_value=1e6), factor=st.floats(min_value=1.01, max_value=10),
       n=st.integers(0, 30))
def test_geometric_range_matches_brute_force(start: float, factor: float, n: int) -> None:
    stop = start * factor**n * (1 + 1e-13)
    got = parse_values(f"{start!r}:{stop!r}:x{factor!r}")
    want, v = [], start
    while v <= stop * (1 + 1e-12):
        want.append(v)
        v *= factor
    assert got == want


_ATOMS = st.one_of(finite.map(repr), st.sampled_from(["nan", "inf", "-inf", "1e999", "x2", "x0", "abc", "", " ",
                                                      "0x10", "1_0", "true"]))
_PARTS = st.lists(st.one_of(_ATOMS, st.lists(_ATOMS, min_size=1, max_size=4).map(":".join)), min_size=1, max_size=5)


@SETTINGS
@given(parts=_PARTS)
@example(parts=["0.0:22431.0:1.2477375524145284e-304"])  # found by hypothesis: a count of inf overflowed int()
@example(parts=["1e-308:1e308:x2"])
def test_any_value_text_gives_finite_values_or_one_error(parts: list[str]) -> None:
    text = ",".join(parts)
    try:
        values = parse_values(text, max_values=1000)
    except HybridperfError as exc:
        assert "\n" not in str(exc)
        return
    assert 1 <= len(values) <= 1000 and all(math.isfinite(v) for v in values)


@SETTINGS
@given(items=st.lists(st.text(max_size=30), max_size=4))
def test_any_assignment_text_parses_or_raises_one_error(items: list[str]) -> None:
    try:
        out = parse_assignments(items, max_rows=10_000)
    except HybridperfError as exc:
        assert "\n" not in str(exc)
        return
    assert math.prod(len(v) for v in out.values()) <= 10_000 and len(out) == len(items)


# -- the formula evaluator -------------------------------------------------------------------------------------

_BIN = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": np.true_divide, "//": np.floor_divide,
        "%": np.mod, "**": np.power}
_CMP = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal,
        "!=": np.not_equal}
_UNARY = {"ceil": np.ceil, "floor": np.floor, "log2": np.log2, "sqrt": np.sqrt, "abs": np.abs}
ENV = {"N": np.array([1.0, 3.0, 1024.0, 0.0]), "M": np.array([2.0, -5.0, 7.5, 64.0])}


def _exprs() -> st.SearchStrategy[tuple[Any, ...]]:
    leaf = st.one_of(st.sampled_from([("name", "N"), ("name", "M")]),
                     st.floats(min_value=0, max_value=1e3, allow_nan=False).map(lambda v: ("num", v)))
    return st.recursive(leaf, lambda sub: st.one_of(
        st.tuples(st.just("bin"), st.sampled_from(sorted(_BIN)), sub, sub),
        st.tuples(st.just("cmp"), st.sampled_from(sorted(_CMP)), sub, sub),
        st.tuples(st.just("call"), st.sampled_from(sorted(_UNARY)), sub),
        st.tuples(st.just("minmax"), st.sampled_from(["min", "max"]), st.lists(sub, min_size=1, max_size=3)),
        st.tuples(st.just("where"), sub, sub, sub),
        st.tuples(st.just("neg"), sub)), max_leaves=12)


def _text(e: tuple[Any, ...]) -> str:
    kind = e[0]
    if kind == "name":
        return e[1]
    if kind == "num":
        return repr(e[1])
    if kind in ("bin", "cmp"):
        return f"({_text(e[2])} {e[1]} {_text(e[3])})"
    if kind == "call":
        return f"{e[1]}({_text(e[2])})"
    if kind == "minmax":
        return f"{e[1]}({', '.join(_text(a) for a in e[2])})"
    if kind == "where":
        return f"where({_text(e[1])}, {_text(e[2])}, {_text(e[3])})"
    return f"(-{_text(e[1])})"


def _value(e: tuple[Any, ...]) -> Any:
    """The reference interpreter: the generated tree evaluated directly, without the formula parser."""
    kind = e[0]
    if kind == "name":
        return ENV[e[1]]
    if kind == "num":
        return np.float64(e[1])
    if kind == "bin":
        return _BIN[e[1]](_value(e[2]), _value(e[3]))
    if kind == "cmp":
        return _CMP[e[1]](_value(e[2]), _value(e[3])).astype(np.float64)
    if kind == "call":
        return _UNARY[e[1]](_value(e[2]))
    if kind == "minmax":
        fn = np.minimum if e[1] == "min" else np.maximum
        out = _value(e[2][0])
        for a in e[2][1:]:
            out = fn(out, _value(a))
        return out
    if kind == "where":
        return np.where(_value(e[1]) != 0, _value(e[2]), _value(e[3]))
    return -_value(e[1])


@SETTINGS
@given(expr=_exprs())
def test_formula_matches_reference_interpreter(expr: tuple[Any, ...]) -> None:
    text = _text(expr)
    with np.errstate(all="ignore"):
        want = np.broadcast_to(np.asarray(_value(expr), dtype=np.float64), (4,))
    try:
        got = np.broadcast_to(compile_formula(text, allowed={"N", "M"})(ENV), (4,))
    except FormulaError as exc:  # only the documented limits may refuse a generated formula
        assert "nested" in str(exc) or "terms" in str(exc) or "characters" in str(exc), str(exc)
        return
    np.testing.assert_array_equal(got, want)


@SETTINGS
@given(text=st.text(max_size=80))
def test_any_formula_text_compiles_or_raises_formula_error(text: str) -> None:
    try:
        f = compile_formula(text, allowed={"N"})
    except FormulaError as exc:
        assert "\n" not in str(exc)
        return
    with np.errstate(all="ignore"):
        out = f({"N": np.array([1.0, 2.0])})
    assert out.dtype == np.float64


# -- the importers ---------------------------------------------------------------------------------------------

_CELL = st.one_of(finite.map(repr), st.sampled_from(["", "nan", "inf", "-1", "0", "abc", "1e999", '"x,y"']))
_HEAD = st.lists(st.sampled_from(["n", "bs", "time", "n ", "x", ""]), min_size=1, max_size=4)


@IMPORT_SETTINGS
@pytest.mark.filterwarnings("ignore::UserWarning")
@given(header=_HEAD, rows=st.lists(st.lists(_CELL, min_size=1, max_size=4), max_size=6))
def test_csv_importer_gives_a_valid_sweep_or_one_error(tmp_path: Path, header: list[str],
                                                       rows: list[list[str]]) -> None:
    path = tmp_path / "in.csv"
    path.write_text("\n".join([",".join(header), *(",".join(r) for r in rows)]) + "\n")
    mapping = {"n": "size.N", "bs": "config.BLOCK", "time": "time_ms"}
    try:
        df = import_sweep(path, "csv", mapping={k: v for k, v in mapping.items() if k in header},
                          kernel="seed004-matvec", gpu="titan-v")
    except HybridperfError as exc:
        assert "\n" not in str(exc)
        return
    validate_sweep(df)  # what an importer returns is a valid sweep
    assert len(df) <= len(rows)


_JSON = st.recursive(st.one_of(st.none(), st.booleans(), finite, st.text(max_size=8)),
                     lambda sub: st.one_of(st.lists(sub, max_size=3), st.dictionaries(st.text(max_size=6), sub,
                                                                                        max_size=3)), max_leaves=15)


@IMPORT_SETTINGS
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("fmt", ["kernel-tuner", "ktt"])
@given(doc=_JSON, extra=st.dictionaries(st.sampled_from(["cache", "Results", "Metadata", "tune_params", "device_name",
                                                          "kernel_name", "problem_size", "tune_params_keys"]), _JSON))
def test_json_importers_give_a_valid_sweep_or_one_error(tmp_path: Path, fmt: str, doc: Any, extra: dict) -> None:
    path = tmp_path / "in.json"
    path.write_text(json.dumps(extra if extra else doc))
    try:
        df = import_sweep(path, fmt)
    except HybridperfError as exc:
        assert "\n" not in str(exc)
        return
    validate_sweep(df, known_kernels=set(df["kernel"]), known_gpus=set(df["gpu"]))
