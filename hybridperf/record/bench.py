"""Benchmark setup files: how to compile and launch a descriptor's CUDA source (kernels/cuda/*.toml)."""
from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from hybridperf.errors import FormulaError, RecordError
from hybridperf.formula import Formula, compile_formula
from hybridperf.kernel import KernelDescriptor, load_kernel
from hybridperf.profile import LAUNCH_KEYS, PROFILE_FIELDS
from hybridperf.tomlfile import read_document

__all__ = [
    "DTYPES",
    "BenchSetup",
    "Buffer",
    "LaunchPlan",
    "PTXCheck",
    "ScalarArg",
    "bench_dir",
    "list_benches",
    "load_bench",
    "scalar_env",
]

FORMAT_VERSION = 1
# dtype name -> bytes per element; the names are numpy's.
DTYPES = {"float32": 4, "float64": 8, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8}
_INT_RANGE = {"int32": (-2**31, 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-2**63, 2**63 - 1),
              "uint64": (0, 2**64 - 1)}
INITS = ("random", "zeros", "ones")
_TOP = {"format_version", "descriptor", "source", "entry", "defines", "grid", "block",
        "dynamic_smem_bytes", "buffers", "args", "ptx_check"}
# CUDA grid limits (all compute capabilities >= 3.0): x up to 2^31 - 1, y and z up to 65535.
_GRID_MAX = (2**31 - 1, 65535, 65535)
_BLOCK_MAX = (1024, 1024, 64)


@dataclass(frozen=True, slots=True)
class Buffer:
    """A device array the kernel takes: element count formula, dtype, initial contents."""

    name: str
    elements: Formula
    dtype: str = "float32"
    init: str = "random"


@dataclass(frozen=True, slots=True)
class ScalarArg:
    """A by-value kernel argument: a formula and the C type it is passed as (numpy dtype name)."""

    value: Formula
    dtype: str


@dataclass(frozen=True, slots=True)
class PTXCheck:
    """One comparison of static PTX counts with descriptor formulas (docs/record.md, "PTX check")."""

    params: Mapping[str, float]
    region: str
    expect: Mapping[str, Formula]
    tolerance: float = 0.0


@dataclass(frozen=True, slots=True)
class LaunchPlan:
    """One configuration, resolved: compile defines, grid and block shape, buffers and arguments.

    ``buffers`` holds ``(name, dtype, elements, init)``; ``args`` holds ``("buffer", name)`` or
    ``("scalar", value, dtype)``. ``problems`` lists why the launch cannot run (empty if it can).
    """

    defines: Mapping[str, float]
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_smem_bytes: int
    buffers: tuple[tuple[str, str, int, str], ...]
    args: tuple[tuple[Any, ...], ...]
    problems: tuple[str, ...] = ()

    @property
    def buffer_bytes(self) -> int:
        return sum(DTYPES[d] * n for _, d, n, _ in self.buffers)

    @property
    def blocks(self) -> int:
        return math.prod(self.grid)

    @property
    def threads_per_block(self) -> int:
        return math.prod(self.block)


@dataclass(frozen=True, slots=True)
class BenchSetup:
    """How to run one kernel descriptor: CUDA file, entry function, defines, launch shape, arguments."""

    descriptor: str
    source: Path
    entry: str
    defines: tuple[str, ...]
    grid: tuple[Formula, ...]
    block: tuple[Formula, ...]
    dynamic_smem_bytes: Formula
    buffers: tuple[Buffer, ...]
    args: tuple[str | ScalarArg, ...]
    ptx_checks: tuple[PTXCheck, ...] = ()
    path: str = ""
    sha256: str = field(default="", compare=False)

    def code(self) -> str:
        """The CUDA source text."""
        try:
            return self.source.read_text()
        except OSError as exc:
            raise RecordError(f"{self.path}: cannot read CUDA source {self.source} ({exc.strerror})") from None

    def source_sha256(self) -> str:
        return hashlib.sha256(self.code().encode()).hexdigest()

    def screen(self, env: Mapping[str, Any], rows: int) -> tuple[np.ndarray, np.ndarray]:
        """Vectorised launch checks over ``rows`` configurations.

        ``env`` maps every parameter and launch key (``threads_per_block``, ``blocks``...) to a
        scalar or an array of ``rows`` values. Returns, per row, the first problem found ("" when
        the launch is possible: whole positive grid and block sizes within CUDA's limits, whole
        buffer sizes, scalar arguments that fit their C type) and the bytes of all buffers.
        """
        reason = np.full(rows, "", dtype=object)
        nbytes = np.zeros(rows)

        def note(bad: np.ndarray, text: np.ndarray | str) -> None:
            bad = np.broadcast_to(np.asarray(bad, dtype=bool), (rows,))
            fill = bad & (reason == "")
            reason[fill] = np.broadcast_to(np.asarray(text, dtype=object), (rows,))[fill]

        def whole(f: Formula, what: str, lo: float) -> np.ndarray:
            v = np.broadcast_to(f(env), (rows,))
            with np.errstate(invalid="ignore"):
                bad = ~np.isfinite(v) | (v != np.round(v)) | (v < lo)
            if bad.any():
                texts = np.full(rows, "", dtype=object)
                texts[bad] = [f"{what} = {f.text!r} gives {x:g}, not a whole number >= {lo:g}" for x in v[bad]]
                note(bad, texts)
            return v

        for i, f in enumerate(self.grid):
            v = whole(f, f"grid[{i}]", 1)
            note(v > _GRID_MAX[i], f"grid dimension {'xyz'[i]} exceeds the CUDA limit {_GRID_MAX[i]}")
        for i, f in enumerate(self.block):
            v = whole(f, f"block[{i}]", 1)
            note(v > _BLOCK_MAX[i], f"block dimension {'xyz'[i]} exceeds the CUDA limit {_BLOCK_MAX[i]}")
        whole(self.dynamic_smem_bytes, "dynamic_smem_bytes", 0)
        for b in self.buffers:
            nbytes = nbytes + DTYPES[b.dtype] * np.nan_to_num(whole(b.elements, f"buffer {b.name} elements", 0))
        for a in self.args:
            if isinstance(a, ScalarArg) and a.dtype in _INT_RANGE:
                lo, hi = _INT_RANGE[a.dtype]
                v = np.broadcast_to(a.value(env), (rows,))
                with np.errstate(invalid="ignore"):
                    note(~np.isfinite(v) | (v != np.round(v)) | (v < lo) | (v > hi),
                         f"argument {a.value.text} does not fit the kernel's {a.dtype}")
        return reason, nbytes

    def resolve(self, kernel: KernelDescriptor, values: Mapping[str, Any]) -> LaunchPlan:
        """Evaluate the launch for one configuration (scalars) of ``kernel``."""
        env: dict[str, Any] = scalar_env(kernel, values, LAUNCH_KEYS)
        reason, _ = self.screen(env, 1)
        problems = (str(reason[0]),) if reason[0] else ()

        def num(f: Formula, lo: int) -> int:
            v = float(f(env))
            return max(lo, round(v)) if math.isfinite(v) else lo

        grid = [num(f, 1) for f in self.grid] + [1] * (3 - len(self.grid))
        block = [num(f, 1) for f in self.block] + [1] * (3 - len(self.block))
        buffers = tuple((b.name, b.dtype, num(b.elements, 0), b.init) for b in self.buffers)
        args: list[tuple[Any, ...]] = []
        for a in self.args:
            if isinstance(a, str):
                args.append(("buffer", a))
            else:
                args.append(("scalar", float(a.value(env)), a.dtype))
        return LaunchPlan(defines={name: env[name] for name in self.defines},
                          grid=(grid[0], grid[1], grid[2]), block=(block[0], block[1], block[2]),
                          dynamic_smem_bytes=num(self.dynamic_smem_bytes, 0), buffers=buffers,
                          args=tuple(args), problems=problems)


def scalar_env(kernel: KernelDescriptor, values: Mapping[str, Any], fields: Sequence[str]) -> dict[str, float]:
    """One configuration of ``kernel`` as scalars: every parameter (defaults filled in) and the
    profile ``fields`` (launch keys, counts) its formulas give there."""
    env = {k: float(np.asarray(v).reshape(-1)[0]) for k, v in kernel.resolve(values).items()}
    prof = kernel.profile(env)
    env.update({k: float(getattr(prof, k)[0]) for k in fields})
    return env


def bench_dir() -> Path:
    """The folder of the shipped CUDA sources and setup files (``hybridperf/kernels/cuda``)."""
    return Path(str(resources.files("hybridperf") / "kernels" / "cuda"))


def _formula(path: Path, where: str, text: Any, allowed: set[str]) -> Formula:
    try:
        return compile_formula(text, where=f"{path} {where}", allowed=allowed)
    except FormulaError as exc:
        raise RecordError(str(exc)) from None


def _formulas(path: Path, doc: dict[str, Any], key: str, default: tuple[str, ...],
              allowed: set[str]) -> tuple[Formula, ...]:
    raw = doc.get(key, list(default))
    if not isinstance(raw, list) or not 1 <= len(raw) <= 3:
        raise RecordError(f"{path}: {key} must be a list of 1 to 3 formulas, e.g. {key} = [\"{default[0]}\"]")
    return tuple(_formula(path, f"{key}[{i}]", t, allowed) for i, t in enumerate(raw))


def _source(path: Path, doc: dict[str, Any]) -> Path:
    """The CUDA file named by ``source`` (next to the setup file); ``entry`` must be named too."""
    for key in ("source", "entry"):
        if not isinstance(doc.get(key), str) or not doc[key]:
            raise RecordError(f"{path}: missing {key}; add {key} = \"...\"")
    source = (path.parent / doc["source"]).resolve()
    if not source.is_file():
        raise RecordError(f"{path}: CUDA source {doc['source']!r} not found next to the setup file")
    return source


def _defines(path: Path, doc: dict[str, Any], kernel: KernelDescriptor) -> tuple[str, ...]:
    """The parameters passed as ``-DNAME=VALUE`` (default: the config parameters)."""
    params = set(kernel.parameters)
    defines = doc.get("defines", list(kernel.config_names))
    if not isinstance(defines, list) or any(d not in params for d in defines):
        raise RecordError(f"{path}: defines must list parameters of {kernel.name} ({', '.join(sorted(params))})")
    return tuple(defines)


def _buffers(path: Path, doc: dict[str, Any], launch_env: set[str]) -> tuple[Buffer, ...]:
    """The ``[[buffers]]`` tables: unique names, known dtypes and inits, element-count formulas."""
    buffers = []
    for i, b in enumerate(doc.get("buffers", [])):
        if not isinstance(b, dict) or set(b) - {"name", "elements", "dtype", "init"} or "name" not in b:
            raise RecordError(f"{path}: buffers[{i}] must be {{ name, elements, dtype?, init? }}")
        dtype, init = b.get("dtype", "float32"), b.get("init", "random")
        if dtype not in DTYPES:
            raise RecordError(f"{path}: buffers[{i}].dtype {dtype!r} unknown; use one of {', '.join(DTYPES)}")
        if init not in INITS:
            raise RecordError(f"{path}: buffers[{i}].init {init!r} unknown; use one of {', '.join(INITS)}")
        buffers.append(Buffer(name=str(b["name"]), dtype=dtype, init=init,
                              elements=_formula(path, f"buffers[{i}].elements", b.get("elements"), launch_env)))
    names = [b.name for b in buffers]
    if len(set(names)) != len(names):
        raise RecordError(f"{path}: buffer names must be unique, got {names}")
    return tuple(buffers)


def _args(path: Path, doc: dict[str, Any], buffers: tuple[Buffer, ...],
          launch_env: set[str]) -> tuple[str | ScalarArg, ...]:
    """The kernel arguments in order: buffer names, or by-value formulas with their C type."""
    names = [b.name for b in buffers]
    args: list[str | ScalarArg] = []
    for i, a in enumerate(doc.get("args", [])):
        if isinstance(a, str):
            if a not in names:
                raise RecordError(f"{path}: args[{i}] names buffer {a!r}, which is not in [[buffers]] "
                                  f"({', '.join(names)})")
            args.append(a)
        elif isinstance(a, dict) and set(a) == {"value", "dtype"} and a["dtype"] in DTYPES:
            args.append(ScalarArg(value=_formula(path, f"args[{i}].value", a["value"], launch_env),
                                  dtype=a["dtype"]))
        else:
            raise RecordError(f"{path}: args[{i}] must be a buffer name or "
                              "{ value = \"formula\", dtype = \"int32\" }")
    return tuple(args)


def _ptx_checks(path: Path, doc: dict[str, Any], kernel: KernelDescriptor) -> tuple[PTXCheck, ...]:
    """The ``[[ptx_check]]`` tables: parameter values, region, expected-count formulas, tolerance."""
    params = set(kernel.parameters)
    check_env = params | set(PROFILE_FIELDS)
    checks = []
    for i, c in enumerate(doc.get("ptx_check", [])):
        if not isinstance(c, dict) or set(c) - {"params", "region", "expect", "tolerance"} or "expect" not in c:
            raise RecordError(f"{path}: ptx_check[{i}] must be {{ params, region, expect, tolerance? }}")
        cparams = c.get("params", {})
        if not isinstance(cparams, dict) or set(cparams) - params:
            raise RecordError(f"{path}: ptx_check[{i}].params must name parameters of {kernel.name}")
        expect = {k: _formula(path, f"ptx_check[{i}].expect.{k}", v, check_env) for k, v in c["expect"].items()}
        checks.append(PTXCheck(params={k: float(v) for k, v in cparams.items()}, region=str(c.get("region", "kernel")),
                               expect=expect, tolerance=float(c.get("tolerance", 0.0))))
    return tuple(checks)


def _parse(path: Path, kernel: KernelDescriptor) -> BenchSetup:
    raw, doc = read_document(path, RecordError, "benchmark setup", FORMAT_VERSION, _TOP)
    if doc.get("descriptor") != kernel.name:
        raise RecordError(f"{path}: descriptor = {doc.get('descriptor')!r} but the kernel is {kernel.name!r}")
    source = _source(path, doc)
    launch_env = set(kernel.parameters) | set(LAUNCH_KEYS)
    defines = _defines(path, doc, kernel)
    buffers = _buffers(path, doc, launch_env)
    args = _args(path, doc, buffers, launch_env)
    checks = _ptx_checks(path, doc, kernel)
    return BenchSetup(
        descriptor=kernel.name, source=source, entry=doc["entry"], defines=defines,
        grid=_formulas(path, doc, "grid", ("blocks",), launch_env),
        block=_formulas(path, doc, "block", ("threads_per_block",), launch_env),
        dynamic_smem_bytes=_formula(path, "dynamic_smem_bytes", doc.get("dynamic_smem_bytes", "0"), launch_env),
        buffers=buffers, args=args, ptx_checks=checks, path=str(path),
        sha256=hashlib.sha256(raw).hexdigest(),
    )


@functools.cache
def _shipped_paths() -> dict[str, Path]:
    return {p.stem: p for p in sorted(bench_dir().glob("*.toml"))}


def list_benches() -> list[str]:
    """Names of the descriptors that ship with a CUDA benchmark setup."""
    return list(_shipped_paths())


def load_bench(kernel: KernelDescriptor | str | Path, path: str | Path | None = None) -> BenchSetup:
    """The benchmark setup of ``kernel``: ``path`` if given, else the shipped ``kernels/cuda/<name>.toml``.

    Raises
    ------
    RecordError
        If the kernel has no setup or the setup file is malformed (one line: file, key, fix).
    """
    desc = load_kernel(kernel)
    if path is None:
        found = _shipped_paths().get(desc.name)
        if found is None:
            raise RecordError(
                f"kernel {desc.name!r} has no CUDA benchmark setup; recordable kernels: "
                f"{', '.join(list_benches())} (or pass a setup file, see docs/record.md)")
        path = found
    return _parse(Path(path), desc)
