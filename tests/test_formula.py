"""The safe formula evaluator: arithmetic agrees with Python, unsafe syntax is rejected."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hybridperf.errors import FormulaError, HybridperfError
from hybridperf.formula import compile_formula


@given(a=st.integers(1, 10_000), b=st.integers(1, 10_000))
def test_arithmetic_matches_python(a: int, b: int) -> None:
    f = compile_formula("ceil(a / b) * 2 + a // b - a % b + max(a, b) - min(a, b, 7) + b ** 2", allowed={"a", "b"})
    expected = math.ceil(a / b) * 2 + a // b - a % b + max(a, b) - min(a, b, 7) + b**2
    assert f({"a": a, "b": b}) == pytest.approx(expected)


def test_functions_and_logic() -> None:
    f = compile_formula("where(N > 10 and not (N == 12), log2(N), sqrt(N)) + abs(-floor(2.5))")
    assert f({"N": 16}) == pytest.approx(4 + 2)
    assert f({"N": 12}) == pytest.approx(math.sqrt(12) + 2)
    assert compile_formula("1 < N <= 3")({"N": 3}) == 1.0
    assert compile_formula("1 < N <= 3")({"N": 4}) == 0.0


@given(st.lists(st.integers(1, 5000), min_size=1, max_size=30))
def test_vectorised_equals_scalar(values: list[int]) -> None:
    f = compile_formula("N * log2(BLOCK) + ceil(N / BLOCK)")
    vec = f({"N": np.array(values, dtype=float), "BLOCK": 64})
    for v, out in zip(values, vec):
        assert out == f({"N": v, "BLOCK": 64})


@pytest.mark.parametrize("text", [
    "__import__('os').system('true')", "N.real", "a[0]", "N if N else 1", "lambda: 1", "open('x')",
    "'s'", "[1, 2]", "N @ N", "N << 1", "N in (1, 2)", "(x := 3)", "f'{N}'", "True",
])
def test_unsafe_or_unsupported_syntax_is_rejected(text: str) -> None:
    with pytest.raises(FormulaError) as e:
        compile_formula(text, where="k.toml [counts].x", allowed={"N", "a"})
    assert "k.toml [counts].x" in str(e.value)
    assert "\n" not in str(e.value)


def test_unknown_names_and_arity() -> None:
    with pytest.raises(FormulaError, match="unknown name 'M'.*known parameters: N"):
        compile_formula("M + 1", allowed={"N"})
    with pytest.raises(FormulaError, match="unknown function 'exp'"):
        compile_formula("exp(N)")
    with pytest.raises(FormulaError, match="ceil\\(\\) takes 1"):
        compile_formula("ceil(N, 2)")
    with pytest.raises(FormulaError, match="bad syntax"):
        compile_formula("N +")
    with pytest.raises(FormulaError, match="empty formula"):
        compile_formula("  ")
    with pytest.raises(FormulaError, match="limit"):
        compile_formula("+".join(["1"] * 2000))
    assert issubclass(FormulaError, ValueError) and issubclass(FormulaError, HybridperfError)


def test_numbers_are_formulas() -> None:
    assert compile_formula(32)({}) == 32.0
    assert compile_formula(2.5)({}) == 2.5


def _bank_degree_by_hand(lanes_per_row: int, pitch: int, threads: int) -> float:
    """Reference: walk each warp's threads, collect the distinct words of each bank, take the largest set; the
    mean over the warps."""
    degrees = []
    for first in range(0, min(threads, 1024), 32):
        words_of_bank: dict[int, set[int]] = {}
        for t in range(first, min(first + 32, threads, 1024)):
            word = (t // lanes_per_row) * pitch + t % lanes_per_row
            words_of_bank.setdefault(word % 32, set()).add(word)
        degrees.append(max(len(w) for w in words_of_bank.values()))
    return sum(degrees) / len(degrees)


@pytest.mark.parametrize(("lanes", "pitch", "threads", "degree"), [
    (32, 32, 32, 1),    # a warp on one row: consecutive words, one per bank
    (1, 32, 32, 32),    # a column of a 32 x 32 float tile: every lane on bank 0 (CUDA guide's transpose example)
    (1, 33, 32, 1),     # ... padded to 33 words a row: conflict-free
    (16, 32, 64, 2),    # two rows of 16 on the same 16 banks
    (16, 48, 64, 1),    # the second row shifted by 16 banks
    (16, 32, 16, 1),    # a block of one half-warp: one row
    (8, 30, 256, 4),    # rows at banks 0, 30, 28, 26: bank 0 is in all four 8-word windows
    (8, 29, 32, 3),
    (4, 2, 32, 1),      # overlapping rows: lanes share words, 18 distinct words on 18 banks
    (48, 62, 96, 4 / 3),  # the second warp straddles two rows at banks 0-15 and 30-45: 2-way; the others 1
    (1, 2**62, 32, 32),  # a pitch far beyond any integer type: its remainder modulo 32 decides
])
def test_bank_conflicts_textbook_cases(lanes: int, pitch: int, threads: int, degree: float) -> None:
    f = compile_formula("bank_conflicts(w, p, n)", allowed={"w", "p", "n"})
    assert f({"w": lanes, "p": pitch, "n": threads}) == pytest.approx(degree)
    assert _bank_degree_by_hand(lanes, pitch, threads) == pytest.approx(degree)


@given(st.lists(st.tuples(st.integers(1, 200), st.integers(1, 2000), st.integers(1, 1100)), min_size=1, max_size=20))
def test_bank_conflicts_vectorised_matches_reference(triples: list[tuple[int, int, int]]) -> None:
    w, p, n = (np.array(v, dtype=float) for v in zip(*triples))
    out = compile_formula("bank_conflicts(w, p, n)", allowed={"w", "p", "n"})({"w": w, "p": p, "n": n})
    np.testing.assert_allclose(out, [_bank_degree_by_hand(*t) for t in triples], rtol=1e-12)
    assert np.all((out >= 1) & (out <= 32))


def test_bank_conflicts_is_nan_off_whole_positive_numbers() -> None:
    f = compile_formula("bank_conflicts(w, p, n)", allowed={"w", "p", "n"})
    out = f({"w": np.array([8.0, 0.0, 8.0, np.nan, 2.5, 8.0]), "p": np.array([32.0, 32.0, -1.0, 32.0, 32.0, 32.0]),
             "n": np.array([256.0, 256.0, 256.0, 256.0, 256.0, np.inf])})
    assert out[0] == 4 and np.isnan(out[1:]).all()
