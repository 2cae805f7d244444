"""A small safe arithmetic evaluator for descriptor formulas, vectorised with numpy."""
from __future__ import annotations

import ast
import functools
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from hybridperf.errors import FormulaError
from hybridperf.limits import MAX_FORMULA_DEPTH, MAX_FORMULA_NODES

__all__ = ["FUNCTION_NAMES", "Formula", "compile_formula"]

_MAX_LEN = 2000  # with the depth and node limits, keeps parsing, checking and evaluation bounded

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: np.true_divide,
    ast.FloorDiv: np.floor_divide,
    ast.Mod: np.mod,
    ast.Pow: np.power,
}
_CMPOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Lt: np.less,
    ast.LtE: np.less_equal,
    ast.Gt: np.greater,
    ast.GtE: np.greater_equal,
    ast.Eq: np.equal,
    ast.NotEq: np.not_equal,
}


def _nary(fn: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        if not args:
            raise TypeError("needs at least one argument")
        return functools.reduce(fn, args)
    return call


_BANKS = 32  # shared-memory banks of 4-byte words (compute capability 5.0 and later)
_MAX_THREADS = 1024  # threads per block on every CUDA GPU: bank_conflicts counts at most this many


@functools.lru_cache(maxsize=65536)
def _block_degree(lanes_per_row: int, pitch: int, threads: int) -> float:
    """Mean over the block's warps of the most distinct words one bank serves (see _bank_conflicts)."""
    t = np.arange(-(-threads // _BANKS) * _BANKS)
    words = np.where(t < threads, (t // lanes_per_row) * pitch + t % lanes_per_row, -1).reshape(-1, _BANKS)
    words = np.sort(words, axis=1)
    distinct = (words >= 0) & np.concatenate([np.ones((len(words), 1), bool), words[:, 1:] != words[:, :-1]], axis=1)
    warp = np.broadcast_to(np.arange(len(words))[:, None], words.shape)
    counts = np.bincount((warp * _BANKS + words % _BANKS)[distinct], minlength=len(words) * _BANKS)
    return float(counts.reshape(-1, _BANKS).max(axis=1).mean())


def _bank_conflicts(lanes_per_row: Any, pitch: Any, threads: Any) -> Any:
    """The bank-conflict degree of a block's shared-memory access, averaged over its warps: its ``threads`` read
    4-byte words of a row-major tile, thread t (linearised x-fastest, 32 to a warp) reading word
    (t // lanes_per_row) * pitch + t % lanes_per_row, up to a shift common to the block (which only rotates the
    banks). A warp's degree is the most distinct words one of the 32 banks serves (lanes reading one word share a
    broadcast): the wavefronts its access takes (CUDA C++ Programming Guide, shared memory of compute capability
    5.x and later). Warps that straddle rows (``lanes_per_row`` not dividing 32, nor a multiple of it) and a last warp
    with fewer than 32 threads are counted as they fall. NaN unless all three are whole numbers >= 1; threads beyond
    1,024 (the CUDA limit per block) are not counted."""
    w, p, n = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (lanes_per_row, pitch, threads)))
    ok = np.all([np.isfinite(v) & (v >= 1) & (v == np.floor(v)) for v in (w, p, n)], axis=0)
    out = np.full(w.shape, np.nan)
    if ok.any():
        n_ok = np.minimum(n[ok], _MAX_THREADS)
        w_ok = np.minimum(w[ok], n_ok)  # a row of at least the whole block: one row
        # Rows that do not overlap (pitch >= lanes_per_row) put a word on the bank of its pitch modulo 32 only, so
        # such a pitch is replaced by the one in [lanes_per_row, lanes_per_row + 32) with the same remainder (exact
        # in floating point at any size). Each distinct case is counted once (about 50 us at 1,024 threads, cached):
        # the convolution's sweeps hold a few hundred; at worst one per row (docs/robustness.md).
        p_ok = np.where(p[ok] >= w_ok, w_ok + np.mod(np.fmod(p[ok], _BANKS) - w_ok, _BANKS), p[ok])
        key = (w_ok * (_MAX_THREADS + _BANKS) + p_ok) * (_MAX_THREADS + 1) + n_ok
        _, first, inverse = np.unique(key.astype(np.int64), return_index=True, return_inverse=True)
        degree = np.array([_block_degree(int(w_ok[i]), int(p_ok[i]), int(n_ok[i])) for i in first])
        out[ok] = degree[inverse.reshape(-1)]
    return out


_FUNCS: dict[str, tuple[Callable[..., Any], int | None]] = {
    "min": (_nary(np.minimum), None),
    "max": (_nary(np.maximum), None),
    "ceil": (np.ceil, 1),
    "floor": (np.floor, 1),
    "log2": (np.log2, 1),
    "sqrt": (np.sqrt, 1),
    "abs": (np.abs, 1),
    "where": (np.where, 3),
    "bank_conflicts": (_bank_conflicts, 3),
}
FUNCTION_NAMES = frozenset(_FUNCS)  # descriptors may not name a parameter or derived quantity so


@dataclass(frozen=True, slots=True)
class Formula:
    """A parsed formula: its text, the parameter names it uses, and a checked syntax tree."""

    text: str
    names: frozenset[str]
    tree: ast.Expression

    def __call__(self, env: Mapping[str, Any]) -> npt.NDArray[np.float64]:
        """Evaluate over scalar or array parameters (broadcast together); returns float64."""
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            out = _eval(self.tree.body, env)
        return np.asarray(out, dtype=np.float64)


def _check(node: ast.AST, where: str, text: str, allowed: frozenset[str] | None,
           names: set[str]) -> None:
    bad = None
    if isinstance(node, ast.Expression):
        _check(node.body, where, text, allowed, names)
        return
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            bad = f"constant {str(node.value)[:20]!r}"
        elif not _finite(node.value):
            bad = f"constant {str(node.value)[:20]}... (not a finite float)"
    elif isinstance(node, ast.Name):
        if node.id in _FUNCS:
            bad = f"function {node.id!r} used as a value"
        elif allowed is not None and node.id not in allowed:
            known = ", ".join(sorted(allowed)) or "none"
            raise FormulaError(
                f"{where}: unknown name {node.id!r} in {text!r}; known parameters: {known}"
            )
        names.add(node.id)
    elif isinstance(node, ast.BinOp):
        if type(node.op) not in _BINOPS:
            bad = f"operator {type(node.op).__name__}"
        else:
            _check(node.left, where, text, allowed, names)
            _check(node.right, where, text, allowed, names)
    elif isinstance(node, ast.UnaryOp):
        if not isinstance(node.op, (ast.USub, ast.UAdd, ast.Not)):
            bad = f"operator {type(node.op).__name__}"
        else:
            _check(node.operand, where, text, allowed, names)
    elif isinstance(node, ast.BoolOp):
        for v in node.values:
            _check(v, where, text, allowed, names)
    elif isinstance(node, ast.Compare):
        if not all(type(op) in _CMPOPS for op in node.ops):
            bad = "comparison 'in'/'is'"
        else:
            for v in (node.left, *node.comparators):
                _check(v, where, text, allowed, names)
    elif isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCS:
            fname = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
            raise FormulaError(
                f"{where}: unknown function {fname!r} in {text!r}; allowed: {', '.join(sorted(_FUNCS))}"
            )
        arity = _FUNCS[node.func.id][1]
        if node.keywords or (arity is not None and len(node.args) != arity) or not node.args:
            raise FormulaError(
                f"{where}: {node.func.id}() takes {arity if arity else 'one or more'} "
                f"positional argument(s) in {text!r}"
            )
        for a in node.args:
            _check(a, where, text, allowed, names)
    else:
        bad = f"syntax {type(node).__name__}"
    if bad:
        raise FormulaError(f"{where}: {bad} is not allowed in formula {text[:80]!r}; use arithmetic only")


def compile_formula(text: str | int | float, *, where: str = "formula",
                    allowed: frozenset[str] | set[str] | None = None) -> Formula:
    """Parse and check a formula string.

    Parameters
    ----------
    text : str or number
        The formula, e.g. ``"ceil(N / BLOCK)"``. Numbers are accepted as constants.
    where : str
        Where the formula comes from (file and field), used in error messages.
    allowed : set of str, optional
        Parameter names the formula may use; other names raise ``FormulaError``.
    """
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise FormulaError(f"{where}: formula must be a string or a number, got {type(text).__name__}")
    src = str(text).strip()
    if len(src) > _MAX_LEN:
        raise FormulaError(f"{where}: formula is {len(src)} characters long; the limit is {_MAX_LEN}")
    if not src:
        raise FormulaError(f"{where}: empty formula; write an expression such as \"2 * N\"")
    try:
        tree = ast.parse(src, mode="eval")
    except SyntaxError as exc:
        raise FormulaError(f"{where}: bad syntax in formula {src[:80]!r} ({exc.msg})") from None
    except (RecursionError, MemoryError):
        raise FormulaError(f"{where}: formula {src[:40]!r}... is nested too deeply; simplify it") from None
    _check_size(tree, where, src)
    names: set[str] = set()
    _check(tree, where, src, frozenset(allowed) if allowed is not None else None, names)
    return Formula(text=src, names=frozenset(names), tree=tree)


def _finite(value: int | float) -> bool:
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _check_size(tree: ast.AST, where: str, src: str) -> None:
    """Refuse formulas nested deeper than MAX_FORMULA_DEPTH or with more than MAX_FORMULA_NODES nodes,
    walking the tree without recursion (the checker and the evaluator recurse)."""
    stack, n = [(tree, 0)], 0
    while stack:
        node, depth = stack.pop()
        n += 1
        if depth > MAX_FORMULA_DEPTH:
            raise FormulaError(f"{where}: formula {src[:40]!r}... is nested more than {MAX_FORMULA_DEPTH} levels "
                               "deep; simplify it")
        if n > MAX_FORMULA_NODES:
            raise FormulaError(f"{where}: formula {src[:40]!r}... has more than {MAX_FORMULA_NODES} terms; "
                               "simplify it")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


def _eval(node: ast.AST, env: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return float(node.value)
    if isinstance(node, ast.Name):
        try:
            return np.asarray(env[node.id], dtype=np.float64)
        except KeyError:
            raise FormulaError(f"formula needs parameter {node.id!r}; pass it (e.g. --set {node.id}=...)") from None
    if isinstance(node, ast.BinOp):
        return _BINOPS[type(node.op)](_eval(node.left, env), _eval(node.right, env))
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, env)
        if isinstance(node.op, ast.Not):
            return np.logical_not(v).astype(np.float64)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BoolOp):
        vals = [np.asarray(_eval(v, env)) != 0 for v in node.values]
        fn = np.logical_and if isinstance(node.op, ast.And) else np.logical_or
        return functools.reduce(fn, vals).astype(np.float64)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env)
        result: Any = True
        for op, comp in zip(node.ops, node.comparators):
            right = _eval(comp, env)
            result = np.logical_and(result, _CMPOPS[type(op)](left, right))
            left = right
        return np.asarray(result, dtype=np.float64)
    if isinstance(node, ast.Call):
        assert isinstance(node.func, ast.Name)
        fn = _FUNCS[node.func.id][0]
        args = [_eval(a, env) for a in node.args]
        if node.func.id == "where":
            args[0] = np.asarray(args[0]) != 0
        return fn(*args)
    raise FormulaError(f"unsupported syntax {type(node).__name__}")  # unreachable after _check
