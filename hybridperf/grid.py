"""Parameter values and grids: the ``NAME=VALUES`` syntax of the command line and its Cartesian product."""
from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from hybridperf.errors import HybridperfError, LimitError
from hybridperf.hardware import GPUSpec, load_gpu
from hybridperf.kernel import KernelDescriptor, kernel_key, load_kernel
from hybridperf.limits import MAX_GRID_ROWS
from hybridperf.sweep import launch_rows

__all__ = ["defaulted_parameters", "grid_rows", "parameter_grid", "parse_assignments", "parse_values", "single_values"]

_WORDS = {"true": "1", "false": "0"}
_SYNTAX = ("use a number, a list 1,2,3, a range 1024:8192:1024 (start:stop:step) or a geometric range "
           "1024:32768:x2 (start:stop:xFACTOR)")


def _number(text: str, part: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise HybridperfError(f"cannot read value {part!r}; {_SYNTAX}") from None
    if not math.isfinite(value):
        raise HybridperfError(f"value {part!r} is not a finite number; {_SYNTAX}")
    return value


def _range_count(part: str) -> tuple[float, float, str, int]:
    """Start, stop, step text and the number of values of ``start:stop[:step]``, counted without building it."""
    fields = part.split(":")
    if len(fields) not in (2, 3):
        raise HybridperfError(f"range {part!r} has {len(fields) - 1} colons; {_SYNTAX}")
    start, stop = _number(fields[0], part), _number(fields[1], part)
    step_s = fields[2].strip() if len(fields) == 3 else "1"
    if step_s.lower().startswith("x"):
        factor = _number(step_s[1:], part)
        if factor <= 1 or start <= 0:
            raise HybridperfError(f"geometric range {part!r} needs start > 0 and a factor > 1, e.g. 1024:32768:x2")
        ratio = stop * (1 + 1e-12) / start
        return start, stop, step_s, 0 if ratio < 1 else _count(math.log(ratio) / math.log(factor), math.floor) + 1
    step = _number(step_s, part)
    if step <= 0:
        raise HybridperfError(f"range {part!r} needs a step > 0, e.g. 1024:8192:1024")
    # The values start + i * step < stop + step / 2 (the stop included, robust to rounding), counted from the
    # distance: stop + step / 2 is stop itself in a float beyond 2^53 (1e16:1e16 gave no value).
    return start, stop, step_s, 0 if stop < start else _count((stop - start) / step + 0.5, math.ceil)


def _count(x: float, rounding: Callable[[float], int]) -> int:
    """``rounding(x)``, or sys.maxsize where ``x`` is too large to count (a step of 1e-304 gives inf), so the
    caller's limit refuses it."""
    return rounding(x) if math.isfinite(x) and x < sys.maxsize else sys.maxsize


def _expand(start: float, stop: float, step_s: str) -> list[float]:
    if step_s.lower().startswith("x"):
        factor, out, v = float(step_s[1:]), [], start
        while v <= stop * (1 + 1e-12):
            out.append(v)
            v *= factor
        return out
    step = float(step_s)
    return (start + step * np.arange(_range_count(f"{start!r}:{stop!r}:{step_s}")[3])).tolist()


def parse_values(text: str, max_values: int = MAX_GRID_ROWS) -> list[float]:
    """Parse ``"4096"``, ``"1024,2048"``, ``"1024:8192:1024"`` (start:stop:step, inclusive) or
    ``"1024:32768:x2"`` (geometric) into a list of finite numbers.

    The number of values is counted before any list is built: more than ``max_values`` is a
    LimitError; NaN, infinities, malformed ranges (``1:2:3:4``) and empty lists are HybridperfErrors.
    """
    parts = text.split(",")
    if len(parts) > max_values:
        raise LimitError(f"value list gives {len(parts):,} values; the limit is {max_values:,}")
    plan: list[tuple[float, float, str] | float] = []
    total = 0
    for part in (p.strip() for p in parts):
        if ":" in part:
            start, stop, step_s, n = _range_count(part)
            plan.append((start, stop, step_s))
        else:
            plan.append(_number(part, part))
            n = 1
        total += n
        if total > max_values:
            raise LimitError(f"value list {text[:60]!r} gives more than {max_values:,} values; narrow the range "
                             "or use a coarser step")
    if total == 0:
        raise HybridperfError(f"value list {text[:60]!r} gives no values (is stop below start?); {_SYNTAX}")
    out: list[float] = []
    for item in plan:
        out.extend(_expand(*item) if isinstance(item, tuple) else [item])
    return out


def parse_assignments(items: Sequence[str], flag: str = "--set", error: type[HybridperfError] = HybridperfError,
                      max_rows: int | None = MAX_GRID_ROWS) -> dict[str, list[float]]:
    """``["N=1024:8192:x2", "M=64"]`` -> ``{"N": [1024, 2048, 4096, 8192], "M": [64]}``.

    Values use :func:`parse_values` syntax (``1,2,3``, ``a:b:step``, ``a:b:xF``); ``true`` and
    ``false`` stand for 1 and 0. A name given twice is an error (``error`` is raised, naming ``flag``),
    and so is a product of value counts (the rows of the grid) above ``max_rows`` (None: no limit on
    the product; each list stays within :data:`~hybridperf.limits.MAX_GRID_ROWS`).
    """
    out: dict[str, list[float]] = {}
    rows = 1
    for item in items:
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name or not value:
            raise error(f"{flag} {item[:60]!r}: write NAME=VALUES, e.g. {flag} N=1024,2048 or N=1024:8192:x2")
        if not name.isidentifier():
            raise error(f"{flag} {item[:60]!r}: {name[:40]!r} is not a parameter name; write NAME=VALUES, e.g. N=1024")
        if name in out:
            raise error(f"{flag}: {name} is given twice; give all its values once, e.g. {name}=1,2,3")
        value = ",".join(_WORDS.get(v.strip().lower(), v.strip()) for v in value.split(","))
        try:
            out[name] = parse_values(value)
        except HybridperfError as exc:
            raise error(f"{flag} {name}: {exc}") from None
        rows *= len(out[name])
        if max_rows is not None and rows > max_rows:
            raise error(f"{flag}: the values give {rows:,} combinations or more, over the limit of {max_rows:,}; "
                        "give fewer values")
    return out


def parameter_grid(values: Mapping[str, Sequence[float]], max_rows: int = MAX_GRID_ROWS) -> pd.DataFrame:
    """Cartesian product of parameter value lists, one column per parameter (at most ``max_rows`` rows,
    counted before the product is built)."""
    names = list(values)
    n_rows = math.prod(len(values[n]) for n in names)
    if n_rows > max_rows:
        raise LimitError(f"the parameter values give {n_rows:,} combinations, over the limit of {max_rows:,}; "
                         "give fewer values")
    rows = list(itertools.product(*(values[n] for n in names))) if names else [()]
    return pd.DataFrame(np.asarray(rows, dtype=np.float64).reshape(len(rows), len(names)), columns=names)


def grid_rows(kernel: str | KernelDescriptor, gpu: str | GPUSpec,
              values: Mapping[str, Sequence[float]], name: str | None = None) -> pd.DataFrame:
    """Sweep rows (kernel, gpu, size.*, config.*) for the Cartesian product of parameter values, e.g.
    the rows ``hybridperf predict --set ...`` predicts; unset parameters keep the descriptor defaults.
    The rows are named ``name`` where given (a kernel a family descriptor describes, e.g. aiwc-csr-csr by
    aiwc-counted), else by :func:`~hybridperf.kernel.kernel_key`."""
    desc, spec = load_kernel(kernel), load_gpu(gpu)
    return launch_rows(name or kernel_key(desc), spec.key, parameter_grid(values), desc.size_names,
                       desc.config_names)


def single_values(values: Mapping[str, Sequence[float]], flag: str = "--set") -> dict[str, float]:
    """``{name: [v]}`` -> ``{name: v}``; a HybridperfError where a name has several values (one problem size)."""
    out: dict[str, float] = {}
    for name, vals in values.items():
        if len(vals) != 1:
            raise HybridperfError(f"{flag} {name}: give one value (one problem size at a time), got {len(vals)}")
        out[name] = float(vals[0])
    return out


def defaulted_parameters(rows: pd.DataFrame,
                         known: Mapping[str, KernelDescriptor] | None = None) -> dict[str, float]:
    """The descriptor defaults that rows of one kernel rely on: ``{"config.BLOCK": 256.0}`` for each size or
    config parameter the rows have no value for (empty where the rows name several kernels). ``known``:
    descriptors by name to use before the lookup (e.g. a model's copies)."""
    kernels = rows["kernel"].unique() if "kernel" in rows.columns else []
    if len(kernels) != 1:
        return {}
    desc = load_kernel(str(kernels[0]), known=known)
    out: dict[str, float] = {}
    for name, p in desc.parameters.items():
        col = ("size." if name in desc.size_names else "config.") + name
        # A counter-described kernel's size is read from counter.<name> where the rows give it there (AIWC's).
        given = [c for c in (col, f"counter.{name}" if name in desc.size_names else None)
                 if c in rows.columns and rows[c].notna().any()]
        if p.default is not None and not given:
            out[col] = float(p.default)
    return out
