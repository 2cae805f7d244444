"""Kernel descriptors: sizes, config space and count formulas, loaded from TOML by name or path."""
from __future__ import annotations

import dataclasses
import fnmatch
import functools
import hashlib
import itertools
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from hybridperf.arrays import FloatArray
from hybridperf.errors import DescriptorError, UnknownKernelError
from hybridperf.formula import Formula, compile_formula
from hybridperf.limits import MAX_SPACE_ROWS
from hybridperf.profile import (
    LAUNCH_KEYS,
    OPTIONAL_COUNTS,
    PROFILE_FIELDS,
    REQUIRED_COUNTS,
    KernelProfile,
    default_formula,
)
from hybridperf.tomlfile import load_folder, read_document

__all__ = [
    "KernelDescriptor",
    "Param",
    "kernel_names",
    "list_kernels",
    "load_kernel",
]

FORMAT_VERSION = 1

@dataclass(frozen=True, slots=True)
class Param:
    """A size or config parameter: default, allowed values (config) and bounds."""

    name: str
    default: float | None = None
    values: tuple[float, ...] | None = None
    min: float | None = None
    max: float | None = None
    description: str = ""


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

    @property
    def key(self) -> str:
        """The name sweep rows carry for this kernel: a shipped descriptor's name, else the descriptor
        file's path (a user's own descriptor), else its name."""
        if not self.path:
            return self.name
        path = Path(self.path)
        return self.name if path.resolve().parent == _SHIPPED_DIR.resolve() else str(self.path)

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
            if not np.all(np.isfinite(arr)):
                raise DescriptorError(f"{self.name}: parameter {name} must be a finite number")
            if p.min is not None and np.any(arr < p.min):
                raise DescriptorError(f"{self.name}: {name} must be >= {p.min:g}, got {np.min(arr):g}")
            if p.max is not None and np.any(arr > p.max):
                raise DescriptorError(f"{self.name}: {name} must be <= {p.max:g}, got {np.max(arr):g}")
            if p.values is not None:
                bad = ~np.isin(arr, p.values)
                if np.any(bad):
                    raise DescriptorError(
                        f"{self.name}: {name}={np.atleast_1d(arr)[np.atleast_1d(bad)][0]:g} is not an "
                        f"allowed value; allowed: {', '.join(f'{v:g}' for v in p.values)}"
                    )
            out[name] = arr
        return out

    def environment(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The parameters (:meth:`resolve`) and the ``[derived]`` quantities, each computed from those before it."""
        env: dict[str, Any] = dict(self.resolve(values))
        for name, f in self.derived:
            env[name] = f(env)
        return env

    def constraint_mask(self, values: Mapping[str, Any]) -> tuple[npt.NDArray[np.bool_], list[str]]:
        """Which rows satisfy every ``[space] constraints`` formula, and, per row, the first one broken."""
        env = self.environment(values)
        shape = np.broadcast_shapes(*(a.shape for a in env.values())) if env else ()
        ok = np.ones(shape or (1,), dtype=bool)
        reasons = np.full(ok.shape, "", dtype=object)
        for c in self.constraints:
            sat = np.broadcast_to(c(env) != 0, ok.shape)
            reasons[ok & ~sat] = f"constraint {c.text!r} violated"
            ok &= sat
        return ok, list(reasons)

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
            raise DescriptorError(f"{self.path or self.name}: {bad[0]} is not finite for some rows (division by zero?)")
        negative = [k for k, v in profile_values.items() if np.any(np.asarray(v) < 0)]
        if negative:
            raise DescriptorError(self._negative_message(negative[0], env))
        return KernelProfile.from_values(**profile_values)

    def _negative_message(self, key: str, env: Mapping[str, Any]) -> str:
        """Name the field, its value and the parameters of the first row where a formula gives a negative value."""
        arrays = np.broadcast_arrays(*(np.atleast_1d(np.asarray(env[k], dtype=np.float64))
                                       for k in (key, *self.parameters)))
        i = int(np.flatnonzero(arrays[0] < 0)[0])
        at = ", ".join(f"{name}={a[i]:g}" for name, a in zip(self.parameters, arrays[1:]))
        section = "launch" if key in LAUNCH_KEYS else "counts"
        return (f"{self.path or self.name}: [{section}].{key} is negative ({arrays[0][i]:g}) at "
                f"{at or 'the defaults'}; counts, sizes and launch values must be >= 0: fix the formula or the "
                "parameter bounds")

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
        return _check_space(dataclasses.replace(self, config=config), "with --space")


# ---------------------------------------------------------------------------------------------
# Loading

_TOP_KEYS = {"format_version", "name", "aliases", "matches", "description", "source", "sizes", "config", "space",
             "derived", "launch", "counts", "notes"}
_PARAM_KEYS = {"default", "values", "min", "max", "description"}


def _num(path: Path, where: str, v: Any) -> float:
    if isinstance(v, bool):
        return float(v)
    try:
        ok = isinstance(v, (int, float)) and math.isfinite(float(v))
    except OverflowError:
        ok = False
    if not ok:
        raise DescriptorError(f"{path}: {where} must be a finite number, got {str(v)[:30]}")
    return float(v)


def _params(path: Path, doc: dict[str, Any], section: str) -> tuple[Param, ...]:
    table = doc.get(section, {})
    if not isinstance(table, dict):
        raise DescriptorError(f"{path}: [{section}] must be a table of parameters")
    out = []
    for name, spec in table.items():
        if not name.isidentifier():
            raise DescriptorError(f"{path}: [{section}] parameter name {name!r} must be an identifier")
        if not isinstance(spec, dict):
            raise DescriptorError(f"{path}: [{section}].{name} must be a table like {{ default = 1 }}")
        unknown = set(spec) - _PARAM_KEYS
        if unknown:
            raise DescriptorError(f"{path}: [{section}].{name} has unknown key {sorted(unknown)[0]!r}; "
                                  f"allowed: {', '.join(sorted(_PARAM_KEYS))}")
        values = spec.get("values")
        if values is not None:
            if not isinstance(values, list) or not values:
                raise DescriptorError(f"{path}: [{section}].{name}.values must be a non-empty list")
            values = tuple(_num(path, f"[{section}].{name}.values", v) for v in values)
        default = spec.get("default")
        default = None if default is None else _num(path, f"[{section}].{name}.default", default)
        if values is not None and default is not None and default not in values:
            raise DescriptorError(f"{path}: [{section}].{name}.default {default:g} is not among its values")
        out.append(Param(
            name=name, default=default, values=values,
            min=None if spec.get("min") is None else _num(path, f"[{section}].{name}.min", spec["min"]),
            max=None if spec.get("max") is None else _num(path, f"[{section}].{name}.max", spec["max"]),
            description=str(spec.get("description", "")),
        ))
    return tuple(out)


def _formulas(path: Path, doc: dict[str, Any], allowed: set[str]) -> tuple[dict[str, Formula], dict[str, Formula]]:
    """The [launch] and [counts] formulas; later formulas may use earlier results (launch first, then
    the required, then the optional counts)."""
    launch_t, counts_t = doc.get("launch", {}), doc.get("counts", {})
    for section, table, keys in (("launch", launch_t, LAUNCH_KEYS),
                                 ("counts", counts_t, REQUIRED_COUNTS + tuple(OPTIONAL_COUNTS))):
        if not isinstance(table, dict):
            raise DescriptorError(f"{path}: [{section}] must be a table of formulas")
        bad = set(table) - set(keys)
        if bad:
            raise DescriptorError(f"{path}: [{section}] has unknown formula name {sorted(bad)[0]!r}; "
                                  f"allowed: {', '.join(keys)}")
    missing = [f"launch.{k}" for k in LAUNCH_KEYS if k not in launch_t]
    missing += [f"counts.{k}" for k in REQUIRED_COUNTS if k not in counts_t]
    if missing:
        raise DescriptorError(f"{path}: missing formula {missing[0]}; see docs/kernel-descriptor-format.md")
    launch = {k: compile_formula(launch_t[k], where=f"{path} [launch].{k}", allowed=allowed) for k in LAUNCH_KEYS}
    allowed = allowed | set(LAUNCH_KEYS) | set(REQUIRED_COUNTS)
    counts: dict[str, Formula] = {}
    for k in REQUIRED_COUNTS + tuple(OPTIONAL_COUNTS):
        if k in counts_t:
            counts[k] = compile_formula(counts_t[k], where=f"{path} [counts].{k}", allowed=allowed)
        allowed.add(k)
    return launch, counts


def _derived(path: Path, doc: dict[str, Any], params: set[str]) -> tuple[tuple[str, Formula], ...]:
    """The ``[derived]`` formulas, in file order: named intermediate quantities over the parameters and the
    derived quantities above them, usable by the constraints, launch and count formulas."""
    table = doc.get("derived", {})
    if not isinstance(table, dict):
        raise DescriptorError(f"{path}: [derived] must be a table of named formulas")
    allowed = set(params)
    out = []
    for name, text in table.items():
        if not name.isidentifier() or name in params or name in PROFILE_FIELDS:
            raise DescriptorError(f"{path}: [derived] name {name!r} must be an identifier that is not a parameter, "
                                  "launch key or count")
        out.append((name, compile_formula(text, where=f"{path} [derived].{name}", allowed=allowed)))
        allowed.add(name)
    return tuple(out)


def _constraints(path: Path, doc: dict[str, Any], allowed: set[str]) -> tuple[Formula, ...]:
    space = doc.get("space", {})
    if not isinstance(space, dict) or set(space) - {"constraints"}:
        raise DescriptorError(f"{path}: [space] takes only constraints = [\"...\"]")
    cons = space.get("constraints", [])
    if not isinstance(cons, list):
        raise DescriptorError(f"{path}: [space].constraints must be a list of formula strings")
    return tuple(compile_formula(c, where=f"{path} [space].constraints[{i}]", allowed=allowed)
                 for i, c in enumerate(cons))


def _check_space(desc: KernelDescriptor, where: str) -> KernelDescriptor:
    """Refuse a configuration space larger than MAX_SPACE_ROWS (counted, not built): ranking streams it in
    chunks, but at about 300,000 configurations a second per core a larger one would not finish."""
    n = desc.space_size()
    if n > MAX_SPACE_ROWS:
        raise DescriptorError(f"{desc.path or desc.name}: the configuration space {where} has {n:.3g} configurations, "
                              f"over the limit of {MAX_SPACE_ROWS:.3g}; give fewer config values")
    return desc


def _strings(path: Path, doc: dict[str, Any], key: str, what: str) -> tuple[str, ...]:
    items = doc.get(key, [])
    if not isinstance(items, list) or not all(isinstance(a, str) and a for a in items):
        raise DescriptorError(f"{path}: {key} must be a list of {what}")
    return tuple(items)


def _parse_kernel(path: Path) -> KernelDescriptor:
    raw, doc = read_document(path, DescriptorError, "descriptor", FORMAT_VERSION, _TOP_KEYS)
    name = doc.get("name")
    if not isinstance(name, str) or not name:
        raise DescriptorError(f"{path}: missing name; add name = \"...\"")
    sizes, config = _params(path, doc, "sizes"), _params(path, doc, "config")
    dup = set(p.name for p in sizes) & set(p.name for p in config)
    if dup:
        raise DescriptorError(f"{path}: parameter {sorted(dup)[0]!r} is both a size and a config parameter")
    params = {p.name for p in sizes + config}
    derived = _derived(path, doc, params)
    names = params | {n for n, _ in derived}
    launch, counts = _formulas(path, doc, names)
    return _check_space(KernelDescriptor(
        name=name, sizes=sizes, config=config, launch=launch, counts=counts,
        constraints=_constraints(path, doc, names), derived=derived, aliases=_strings(path, doc, "aliases", "names"),
        matches=_strings(path, doc, "matches", "glob patterns such as \"aiwc-*\""),
        description=str(doc.get("description", "")),
        source=str(doc.get("source", "")), path=str(path), sha256=hashlib.sha256(raw).hexdigest(),
    ), "of [config]")


_SHIPPED_DIR = Path(str(resources.files("hybridperf") / "kernels"))


@functools.cache
def _shipped() -> tuple[KernelDescriptor, ...]:
    return load_folder(_SHIPPED_DIR, _parse_kernel, _names, DescriptorError)


def _names(kernel: KernelDescriptor) -> set[str]:
    """Every name a shipped descriptor answers to: its name, file stem and aliases."""
    return {kernel.name, Path(kernel.path).stem, *kernel.aliases}


def list_kernels() -> list[KernelDescriptor]:
    """Every shipped kernel descriptor."""
    return list(_shipped())


def kernel_names() -> list[str]:
    """Names of the shipped kernel descriptors."""
    return [k.name for k in _shipped()]


def load_kernel(name_or_path: str | Path | KernelDescriptor) -> KernelDescriptor:
    """Load a descriptor by shipped name/alias or by TOML path."""
    if isinstance(name_or_path, KernelDescriptor):
        return name_or_path
    text = str(name_or_path)
    p = Path(text)
    if p.suffix == ".toml" or p.is_file():
        if not p.is_file():
            raise UnknownKernelError(f"kernel descriptor file {text!r} does not exist; check the path")
        return _parse_kernel(p)
    for k in _shipped():
        if text in _names(k):
            return k
    for k in _shipped():  # family descriptors: one descriptor for many counter-described kernels
        if any(fnmatch.fnmatchcase(text, pattern) for pattern in k.matches):
            return k
    raise UnknownKernelError(
        f"unknown kernel {text!r}; run 'hybridperf kernels' for the shipped names or pass a descriptor path"
    )
