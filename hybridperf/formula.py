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


_BANKS = 32  # shared-memory banks of 4-byte words (every NVIDIA GPU since Fermi)


@functools.lru_cache(maxsize=4096)
def _conflict_degree(lanes_per_row: int, pitch: int) -> int:
    lane = np.arange(_BANKS)
    words = np.unique((lane // lanes_per_row) * pitch + lane % lanes_per_row)  # one broadcast per word
    return int(np.bincount(words % _BANKS, minlength=_BANKS).max())


def _bank_conflicts(lanes_per_row: Any, pitch: Any) -> Any:
    """The bank-conflict degree of one warp's shared-memory access: its 32 lanes read 4-byte words of a
    row-major tile, ``lanes_per_row`` consecutive lanes on consecutive words of a row and the next lanes on the
    next row, ``pitch`` words further (lane l reads word (l // lanes_per_row) * pitch + l % lanes_per_row, up to a
    shift common to the warp, which only rotates the banks). The degree is the most distinct words one of the 32
    banks must serve (lanes reading the same word share one broadcast): the wavefronts the access takes (CUDA C++
    Programming Guide, "Shared Memory" of compute capability 5.x and later). NaN unless both are whole numbers
    >= 1; 1 with ``lanes_per_row`` >= 32 (one row)."""
    w, p = np.broadcast_arrays(np.asarray(lanes_per_row, dtype=np.float64), np.asarray(pitch, dtype=np.float64))
    ok = np.isfinite(w) & np.isfinite(p) & (w >= 1) & (p >= 1) & (w == np.floor(w)) & (p == np.floor(p))
    out = np.full(w.shape, np.nan)
    if ok.any():
        pairs, inverse = np.unique(np.stack([np.minimum(w[ok], _BANKS), p[ok]]).astype(np.int64), axis=1,
                                   return_inverse=True)
        degree = np.array([_conflict_degree(int(a), int(b)) for a, b in pairs.T], dtype=np.float64)
        out[ok] = degree[inverse.reshape(-1)]
    return out if out.ndim else float(out)


_FUNCS: dict[str, tuple[Callable[..., Any], int | None]] = {
    "min": (_nary(np.minimum), None),
    "max": (_nary(np.maximum), None),
    "ceil": (np.ceil, 1),
    "floor": (np.floor, 1),
    "log2": (np.log2, 1),
    "sqrt": (np.sqrt, 1),
    "abs": (np.abs, 1),
    "where": (np.where, 3),
    "bank_conflicts": (_bank_conflicts, 2),
}
FUNCTION_NAMES = frozenset(_FUNCS)  # a name in a formula may not be one of these


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
