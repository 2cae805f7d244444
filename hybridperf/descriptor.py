"""Kernel descriptors: a kernel's sizes, config space and count formulas (docs/kernel-descriptor-format.md)."""
from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from hybridperf.arrays import FloatArray
from hybridperf.errors import DescriptorError
from hybridperf.formula import Formula
from hybridperf.limits import MAX_SPACE_ROWS
from hybridperf.profile import (
    LAUNCH_KEYS,
    OPTIONAL_COUNTS,
    PROFILE_FIELDS,
    REQUIRED_COUNTS,
    KernelProfile,
    default_formula,
)

__all__ = ["FORMAT_VERSION", "KernelDescriptor", "Param", "allowed_text", "check_space"]

FORMAT_VERSION = 1
_SHOWN_VALUES = 8  # allowed values an error message lists before it counts the rest


def allowed_text(values: tuple[float, ...]) -> str:
    """A parameter's allowed values for an error message, short: ``1, 2, 4, ..., 256 (256 values)``."""
    shown = [f"{v:g}" for v in values]
    if len(shown) <= _SHOWN_VALUES:
        return ", ".join(shown)
    return f"{', '.join(shown[:_SHOWN_VALUES - 2])}, ..., {shown[-1]} ({len(shown)} values)"


@dataclass(frozen=True, slots=True)
class Param:
    """A size or config parameter: default, allowed values (config) and bounds."""

    name: str
    default: float | None = None
    values: tuple[float, ...] | None = None
    min: float | None = None
    max: float | None = None
    description: str = ""
    # Whole numbers only (sizes by default: a problem's dimensions and counts; ``integer = false`` in the file
    # lets a size be fractional, ``integer = true`` makes a config parameter whole).
    integer: bool = False

    def broken(self, v: FloatArray) -> list[tuple[npt.NDArray[np.bool_], str]]:
        """(mask, rule) for each rule the values ``v`` may break, in the order they are reported: 'finite' (NaN
        too), 'min', 'max', 'integer', 'values'. The one place a parameter's values are checked: resolving
        (a DescriptorError) and row checks (a reason per row) both read it."""
        v = np.asarray(v, dtype=np.float64)
        finite = np.isfinite(v)
        with np.errstate(invalid="ignore"):
            rules = [(~finite, "finite")]
            if self.min is not None:
                rules.append((finite & (v < self.min), "min"))
            if self.max is not None:
                rules.append((finite & (v > self.max), "max"))
            if self.integer:
                rules.append((finite & (v != np.round(v)), "integer"))
            if self.values is not None:
                rules.append((finite & ~np.isin(v, self.values), "values"))
        return rules


@dataclass(frozen=True, slots=True)
class KernelDescriptor:
    """A kernel's parameters, config space and count formulas (docs/kernel-descriptor-format.md)."""

    name: str
    sizes: tuple[Param, ...]
    config: tuple[Param, ...]
    launch: Mapping[str, Formula]
    counts: Mapping[str, Formula]
    constraints: tuple[Formula, ...] = ()
    derived: tuple[tuple[str, Formula], ...] = ()
    aliases: tuple[str, ...] = ()
    matches: tuple[str, ...] = ()
    description: str = ""
    source: str = ""
    path: str = ""
    sha256: str = field(default="", compare=False)
    text: str = field(default="", compare=False, repr=False)

    @property
    def size_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.sizes)

    @property
    def config_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.config)

    @property
    def parameters(self) -> dict[str, Param]:
        return {p.name: p for p in self.sizes + self.config}

    def resolve(self, values: Mapping[str, Any]) -> dict[str, FloatArray]:
        """Fill defaults and check names, bounds and allowed values; returns float arrays."""
        params = self.parameters
        unknown = [k for k in values if k not in params]
        if unknown:
            raise DescriptorError(
                f"{self.name}: unknown parameter {unknown[0]!r}; this kernel takes "
                f"{', '.join(params) or 'no parameters'}"
            )
        out: dict[str, FloatArray] = {}
        for name, p in params.items():
            if name in values:
                arr = np.asarray(values[name], dtype=np.float64)
            elif p.default is not None:
                arr = np.asarray(p.default, dtype=np.float64)
            else:
                raise DescriptorError(f"{self.name}: parameter {name} has no default; set it (e.g. --set {name}=...)")
            self._check(p, arr)
            out[name] = arr
        return out

    def _check(self, p: Param, arr: FloatArray) -> None:
        """A DescriptorError naming the first value of ``arr`` that parameter ``p`` does not allow."""
        name = p.name
        for mask, rule in p.broken(arr):
            if not np.any(mask):
                continue
            bad = np.atleast_1d(arr)[np.atleast_1d(mask)][0]
            if rule == "finite":
                raise DescriptorError(f"{self.name}: parameter {name} must be a finite number")
            if rule == "min":
                raise DescriptorError(f"{self.name}: {name} must be >= {p.min:.15g}, got {np.min(arr):.15g}")
            if rule == "max":
                raise DescriptorError(f"{self.name}: {name} must be <= {p.max:.15g}, got {np.max(arr):.15g}")
            if rule == "integer":
                raise DescriptorError(
                    f"{self.name}: {name} must be a whole number, got {bad:.15g} (a range with a fractional step "
                    f"or factor, e.g. x1.5, makes such values: use x2 or a list; a descriptor whose {name} may be "
                    "fractional declares it with integer = false)")
            raise DescriptorError(f"{self.name}: {name}={bad:.15g} is not an allowed value; allowed: "
                                  f"{allowed_text(p.values or ())}")

    def constraint_mask(self, values: Mapping[str, Any]) -> tuple[npt.NDArray[np.bool_], list[str]]:
        """Which rows satisfy every ``[space] constraints`` formula, and, per row, the first one broken."""
        env = self.resolve(values)
        shape = np.broadcast_shapes(*(a.shape for a in env.values())) if env else ()
        ok = np.ones(shape or (1,), dtype=bool)
        reasons = np.full(ok.shape, "", dtype=object)
        for c in self.constraints:
            sat = np.broadcast_to(c(env) != 0, ok.shape)
            reasons[ok & ~sat] = f"constraint {c.text!r} violated"
            ok &= sat
        return ok, list(reasons)

    def environment(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The parameters (:meth:`resolve`) and the ``[derived]`` quantities, each computed from those before it."""
        env: dict[str, Any] = dict(self.resolve(values))
        for name, f in self.derived:
            env[name] = f(env)
        return env

    def profile(self, values: Mapping[str, Any]) -> KernelProfile:
        """Evaluate launch and count formulas for scalar or array parameter values."""
        env = self.environment(values)
        for key in LAUNCH_KEYS + REQUIRED_COUNTS:
            env[key] = self._formula(key)(env)
        for key, default in OPTIONAL_COUNTS.items():
            f = self.counts.get(key) or default_formula(key, default)
            env[key] = f(env)
        profile_values = {k: env[k] for k in PROFILE_FIELDS}
        bad = [k for k, v in profile_values.items() if not np.all(np.isfinite(v))]
        if bad:
            key, _, at = self._first_row(bad[0], env, lambda v: ~np.isfinite(v))
            raise DescriptorError(
                f"{self.path or self.name}: [{self._section(key)}].{key} is not finite at {at}: a division by zero, "
                "or values too large for a float (beyond 1.8e308); use smaller parameter values or fix the formula")
        negative = [k for k, v in profile_values.items() if np.any(np.asarray(v) < 0)]
        if negative:
            key, value, at = self._first_row(negative[0], env, lambda v: v < 0)
            raise DescriptorError(
                f"{self.path or self.name}: [{self._section(key)}].{key} is negative ({value:g}) at {at}; counts, "
                "sizes and launch values must be >= 0: fix the formula or the parameter bounds")
        return KernelProfile.from_values(**profile_values)

    @staticmethod
    def _section(key: str) -> str:
        return "launch" if key in LAUNCH_KEYS else "counts"

    def _first_row(self, key: str, env: Mapping[str, Any], wrong: Any) -> tuple[str, float, str]:
        """The field, its value and the parameters (``N=4096, BLOCK=256``) of the first row where ``wrong`` holds."""
        with np.errstate(all="ignore"):
            arrays = np.broadcast_arrays(*(np.atleast_1d(np.asarray(env[k], dtype=np.float64))
                                           for k in (key, *self.parameters)))
            i = int(np.flatnonzero(wrong(arrays[0]))[0])
        at = ", ".join(f"{name}={a[i]:.15g}" for name, a in zip(self.parameters, arrays[1:]))
        return key, float(arrays[0][i]), at or "the defaults"

    def _formula(self, key: str) -> Formula:
        return self.launch[key] if key in self.launch else self.counts[key]

    def space_size(self) -> int:
        """Number of configurations in the Cartesian product of allowed config values."""
        return math.prod(len(p.values) for p in self.config if p.values is not None)

    def config_space(self, chunk_rows: int = 1_000_000) -> Iterator[pd.DataFrame]:
        """Yield the Cartesian product of config values in chunks (constraints not applied)."""
        free = [p.name for p in self.config if p.values is None]
        if free:
            raise DescriptorError(
                f"{self.name}: config parameter(s) {', '.join(free)} have no 'values' list, so the space "
                "cannot be enumerated; add values = [...] or pass --space NAME=v1,v2"
            )
        names = list(self.config_names)
        product = itertools.product(*(p.values for p in self.config))  # type: ignore[misc]
        while True:
            block = list(itertools.islice(product, chunk_rows))
            if not block:
                return
            yield pd.DataFrame(np.asarray(block, dtype=np.float64).reshape(len(block), len(names)), columns=names)

    def with_space(self, overrides: Mapping[str, tuple[float, ...]]) -> KernelDescriptor:
        """A copy whose config parameters take the given allowed values (``--space``)."""
        params = {p.name: p for p in self.config}
        for name in overrides:
            if name not in params:
                raise DescriptorError(f"{self.name}: --space names unknown config parameter {name!r}")
        config = tuple(dataclasses.replace(p, values=tuple(overrides[p.name])) if p.name in overrides else p
                       for p in self.config)
        return check_space(dataclasses.replace(self, config=config), "with --space")


def check_space(desc: KernelDescriptor, where: str) -> KernelDescriptor:
    """Refuse a configuration space larger than MAX_SPACE_ROWS (counted, not built): ranking streams it in
    chunks, but at about 300,000 configurations a second per core a larger one would not finish."""
    n = desc.space_size()
    if n > MAX_SPACE_ROWS:
        raise DescriptorError(f"{desc.path or desc.name}: the configuration space {where} has {n:.3g} configurations, "
                              f"over the limit of {MAX_SPACE_ROWS:.3g}; give fewer config values")
    return desc
