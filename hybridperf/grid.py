"""Parameter values and grids: the ``NAME=VALUES`` syntax of the command line and its Cartesian product."""
from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from hybridperf.errors import HybridperfError
from hybridperf.hardware import GPUSpec, load_gpu
from hybridperf.kernel import KernelDescriptor, load_kernel
from hybridperf.sweep import launch_rows

__all__ = ["grid_rows", "parameter_grid", "parse_assignments", "parse_values", "single_values"]

MAX_VALUES = 10_000_000
_WORDS = {"true": "1", "false": "0"}


def parse_values(text: str) -> list[float]:
    """Parse ``"4096"``, ``"1024,2048"``, ``"1024:8192:1024"`` (start:stop:step, inclusive) or
    ``"1024:32768:x2"`` (geometric) into a list of numbers."""
    out: list[float] = []
    for part in text.split(","):
        part = part.strip()
        try:
            if ":" in part:
                start_s, stop_s, step_s = (part.split(":") + ["1"])[:3]
                start, stop = float(start_s), float(stop_s)
                if step_s.startswith("x"):
                    factor = float(step_s[1:])
                    if factor <= 1 or start <= 0:
                        raise ValueError
                    v = start
                    while v <= stop * (1 + 1e-12):
                        out.append(v)
                        v *= factor
                else:
                    step = float(step_s)
                    if step <= 0:
                        raise ValueError
                    out.extend(np.arange(start, stop + step / 2, step).tolist())
            else:
                out.append(float(part))
        except ValueError:
            raise HybridperfError(
                f"cannot read value {part!r}; use a number, a list 1,2,3, a range 1024:8192:1024 "
                "or a geometric range 1024:32768:x2"
            ) from None
    if not out or len(out) > MAX_VALUES:
        raise HybridperfError(f"value list {text!r} gives {len(out)} values; give between 1 and 10,000,000")
    return out


def parse_assignments(items: Sequence[str], flag: str = "--set",
                      error: type[HybridperfError] = HybridperfError) -> dict[str, list[float]]:
    """``["N=1024:8192:x2", "M=64"]`` -> ``{"N": [1024, 2048, 4096, 8192], "M": [64]}``.

    Values use :func:`parse_values` syntax (``1,2,3``, ``a:b:step``, ``a:b:xF``); ``true`` and
    ``false`` stand for 1 and 0. A name given twice is an error (``error`` is raised, naming ``flag``).
    """
    out: dict[str, list[float]] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name or not value:
            raise error(f"{flag} {item!r}: write NAME=VALUES, e.g. {flag} N=1024,2048 or N=1024:8192:x2")
        if name in out:
            raise error(f"{flag}: {name} is given twice; give all its values once, e.g. {name}=1,2,3")
        value = ",".join(_WORDS.get(v.strip().lower(), v.strip()) for v in value.split(","))
        try:
            out[name] = parse_values(value)
        except HybridperfError as exc:
            raise error(f"{flag} {name}: {exc}") from None
    return out


def parameter_grid(values: Mapping[str, Sequence[float]]) -> pd.DataFrame:
    """Cartesian product of parameter value lists, one column per parameter."""
    names = list(values)
    rows = list(itertools.product(*(values[n] for n in names))) if names else [()]
    return pd.DataFrame(np.asarray(rows, dtype=np.float64).reshape(len(rows), len(names)), columns=names)


def grid_rows(kernel: str | KernelDescriptor, gpu: str | GPUSpec,
              values: Mapping[str, Sequence[float]]) -> pd.DataFrame:
    """Sweep rows (kernel, gpu, size.*, config.*) for the Cartesian product of parameter values, e.g.
    the rows ``hybridperf predict --set ...`` predicts; unset parameters keep the descriptor defaults."""
    desc, spec = load_kernel(kernel), load_gpu(gpu)
    return launch_rows(desc.key, spec.key, parameter_grid(values), desc.size_names, desc.config_names)


def single_values(values: Mapping[str, Sequence[float]], flag: str = "--set") -> dict[str, float]:
    """``{name: [v]}`` -> ``{name: v}``; a HybridperfError where a name has several values (one problem size)."""
    out: dict[str, float] = {}
    for name, vals in values.items():
        if len(vals) != 1:
            raise HybridperfError(f"{flag} {name}: give one value (one problem size at a time), got {len(vals)}")
        out[name] = float(vals[0])
    return out
