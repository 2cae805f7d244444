"""Static PTX instruction counts of a shipped benchmark kernel, inside and outside its loops."""
from __future__ import annotations

import functools
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hybridperf.errors import RecordError

if TYPE_CHECKING:
    from hybridperf.kernel import KernelDescriptor
    from hybridperf.record.bench import BenchSetup

__all__ = [
    "CLASSES",
    "PTXCheckResult",
    "PTXCounts",
    "PtxasResources",
    "compile_ptx",
    "count_ptx",
    "define_flags",
    "ptxas_resources",
    "run_ptx_checks",
]

# Instruction classes compared with descriptor counts (docs/record.md, "PTX check"). Each maps to a
# predicate on the PTX opcode (the mnemonic with its type/state suffixes, e.g. "ld.global.nc.f32").
CLASSES = (
    "total", "ld_global", "st_global", "ld_shared", "st_shared", "bar_sync", "bar_warp",
    "fp32", "fma_f32", "branch", "non_global",
)
_FP32 = re.compile(r"^(add|sub|mul|fma|mad|neg|abs|min|max)(\.[a-z]+)*\.f32$")
_LABEL = re.compile(r"^(\$?[A-Za-z_][\w$]*):$")
_SHARED_DECL = re.compile(r"^\.shared\s+(?:\.align\s+\d+\s+)?\.([bfsu]\d+)\s+[\w$]+\[(\d+)\]")
_TYPE_BYTES = {f"{k}{n}": n // 8 for k in "bfsu" for n in (8, 16, 32, 64)}
_BRANCH_TARGET = re.compile(r"\bbra(?:\.uni)?\s+(\$?[A-Za-z_][\w$]*)\s*;")


def _classes(opcode: str) -> list[str]:
    parts = opcode.split(".")
    op, spaces = parts[0], set(parts[1:])
    out = ["total"]
    if op == "ld" and "global" in spaces:
        out.append("ld_global")
    elif op == "st" and "global" in spaces:
        out.append("st_global")
    else:
        out.append("non_global")
    if op == "ld" and "shared" in spaces:
        out.append("ld_shared")
    elif op == "st" and "shared" in spaces:
        out.append("st_shared")
    elif op in ("bar", "barrier") and "warp" in spaces:
        out.append("bar_warp")
    elif op in ("bar", "barrier") and spaces & {"sync", "red"}:
        out.append("bar_sync")
    elif op == "bra":
        out.append("branch")
    if _FP32.match(opcode):
        out.append("fp32")
        if op in ("fma", "mad"):
            out.append("fma_f32")
    return out


@dataclass(frozen=True, slots=True)
class PTXCounts:
    """Static instruction counts of one entry function, split into loop bodies and the rest.

    ``loop`` counts instructions between a label and the last backward branch to it (the union of
    all loop bodies); ``straight`` counts the others; ``kernel`` is their sum. ``loops`` holds,
    outermost first (by position), each loop's *own* instructions, those not inside a loop nested
    in it, so a dynamic count is ``straight + sum(trips_i * loops[i])``. Keys are :data:`CLASSES`;
    a class that does not occur counts 0.
    """

    entry: str
    kernel: Mapping[str, int]
    loop: Mapping[str, int]
    straight: Mapping[str, int]
    loops: tuple[Mapping[str, int], ...]
    smem_bytes: int = 0

    def region(self, name: str) -> Mapping[str, int]:
        """Counts of ``"kernel"``, ``"loop"``, ``"straight"`` or ``"loop0"``, ``"loop1"``... (own)."""
        if name in ("kernel", "loop", "straight"):
            return getattr(self, name)
        if name.startswith("loop") and name[4:].isdigit() and int(name[4:]) < len(self.loops):
            return self.loops[int(name[4:])]
        raise RecordError(f"unknown PTX region {name!r} for {self.entry}; use kernel, loop, straight "
                          f"or loop0..loop{len(self.loops) - 1}" if self.loops else
                          f"unknown PTX region {name!r} for {self.entry}; use kernel, loop or straight "
                          "(it has no loops)")


def _entry_body(ptx: str, entry: str) -> list[str]:
    m = re.search(r"\.entry\s+" + re.escape(entry) + r"\s*\(", ptx)
    if m is None:
        found = re.findall(r"\.entry\s+([\w$]+)", ptx)
        raise RecordError(f"PTX has no entry {entry!r} (found: {', '.join(found) or 'none'}); "
                          "check the entry name in the kernel's cuda/*.toml")
    start = ptx.index("{", m.end())
    depth, i = 0, start
    while i < len(ptx):
        if ptx[i] == "{":
            depth += 1
        elif ptx[i] == "}":
            depth -= 1
            if depth == 0:
                break
        i += 1
    return ptx[start + 1:i].splitlines()


def _full(c: Counter[str]) -> dict[str, int]:
    return {k: int(c.get(k, 0)) for k in CLASSES}


def count_ptx(ptx: str, entry: str) -> PTXCounts:
    """Count the static PTX instructions of ``entry`` by class (see :data:`CLASSES`).

    Declarations (``.reg``, ``.shared``, ``.pragma`` ...), labels, braces and comments are not
    instructions; a predicated instruction (``@%p1 bra``) counts once. A loop is a label and the
    last branch back to it.
    """
    items: list[tuple[str, str]] = []  # ("label", name) or ("inst", instruction text)
    smem = 0
    for raw in _entry_body(ptx, entry):
        line = raw.split("//", 1)[0].strip()
        decl = _SHARED_DECL.match(line)
        if decl:
            smem += _TYPE_BYTES.get(decl.group(1), 1) * int(decl.group(2))
        if not line or line in ("{", "}") or line.startswith("."):
            continue
        lab = _LABEL.match(line)
        if lab:
            items.append(("label", lab.group(1)))
            continue
        items.append(("inst", re.sub(r"^@!?%\w+\s+", "", line)))
    label_pos = {name: i for i, (kind, name) in enumerate(items) if kind == "label"}
    back: dict[int, int] = {}  # loop head position -> last backward branch position
    for j, (kind, text) in enumerate(items):
        t = _BRANCH_TARGET.search(text) if kind == "inst" else None
        if t and t.group(1) in label_pos and label_pos[t.group(1)] < j:
            back[label_pos[t.group(1)]] = j
    spans = sorted(back.items())
    owner: list[int | None] = []
    for pos in range(len(items)):
        inner = [n for n, (a, b) in enumerate(spans) if a <= pos <= b]
        owner.append(max(inner, key=lambda n: spans[n][0]) if inner else None)
    kernel: Counter[str] = Counter()
    straight: Counter[str] = Counter()
    own = [Counter[str]() for _ in spans]
    for (kind, text), who in zip(items, owner):
        if kind != "inst":
            continue
        classes = _classes(text.split()[0].rstrip(";"))
        kernel.update(classes)
        (straight if who is None else own[who]).update(classes)
    loop = kernel - straight
    return PTXCounts(entry=entry, kernel=_full(kernel), loop=_full(loop), straight=_full(straight),
                     loops=tuple(_full(c) for c in own), smem_bytes=smem)


@functools.lru_cache(maxsize=256)
def _nvcc(source: str, stamp: int, defines: tuple[tuple[str, float], ...], arch: str, nvcc: str | None,
          timeout_s: float) -> tuple[str, str]:
    """One ``nvcc --cubin -Xptxas -v --keep`` run: the kept PTX and ptxas's resource report.

    Cached per file (path and modification time), defines and arch: a test session compiles
    each configuration once for both the PTX counts and the register/shared-memory report.
    """
    exe = nvcc or shutil.which("nvcc")
    if exe is None:
        raise RecordError("nvcc not found on PATH; install the CUDA toolkit to compile kernels to PTX")
    src = Path(source)
    with tempfile.TemporaryDirectory(prefix="hybridperf-ptx-") as tmp:
        cmd = [exe, "--cubin", f"-arch={arch}", "-Xptxas", "-v", "--keep", "--keep-dir", tmp,
               *define_flags(dict(defines)), "-o", str(Path(tmp) / "kernel.cubin"), str(src)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise RecordError(f"nvcc took more than {timeout_s:g} s on {src.name}") from None
        if proc.returncode != 0:
            lines = proc.stderr.splitlines()
            first = next((ln for ln in lines if "error" in ln), lines[0] if lines else "no message")
            raise RecordError(f"nvcc failed on {src.name}: {first.strip()}")
        ptx = Path(tmp) / f"{src.stem}.ptx"
        if not ptx.is_file():
            raise RecordError(f"nvcc kept no PTX for {src.name}; check the CUDA toolkit installation")
        return ptx.read_text(), proc.stderr


def _compile(source: str | Path, defines: Mapping[str, int | float], arch: str, nvcc: str | None,
             timeout_s: float) -> tuple[str, str]:
    src = Path(source).resolve()
    try:
        stamp = src.stat().st_mtime_ns
    except OSError as exc:
        raise RecordError(f"cannot read CUDA source {source} ({exc.strerror})") from None
    return _nvcc(str(src), stamp, tuple(sorted((k, float(v)) for k, v in defines.items())), arch, nvcc, timeout_s)


def compile_ptx(source: str | Path, defines: Mapping[str, int | float], *, arch: str = "sm_80",
                nvcc: str | None = None, timeout_s: float = 120.0) -> str:
    """Compile a CUDA file with ``nvcc --cubin -arch=ARCH -DNAME=VALUE ... --keep``; returns its PTX.

    Raises
    ------
    RecordError
        If nvcc is not on PATH or the compilation fails (the message gives nvcc's first error).
    """
    return _compile(source, defines, arch, nvcc, timeout_s)[0]


@dataclass(frozen=True, slots=True)
class PtxasResources:
    """What ptxas reports for one entry: 32-bit registers per thread, static shared memory per
    block (bytes), spill stores and loads (bytes), local stack frame (bytes)."""

    entry: str
    registers: int
    smem_bytes: int
    spill_bytes: int
    stack_bytes: int


_PTXAS_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PTXAS_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")
_PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def ptxas_resources(source: str | Path, defines: Mapping[str, int | float], entry: str, *,
                    arch: str = "sm_80", nvcc: str | None = None,
                    timeout_s: float = 120.0) -> PtxasResources:
    """Registers and static shared memory of ``entry`` from ``nvcc --cubin -Xptxas -v``.

    These are the static resources a launch needs (what the occupancy calculator takes); they
    depend on ``arch`` and on the compiler version.
    """
    log = _compile(source, defines, arch, nvcc, timeout_s)[1]
    current = None
    frame = (0, 0, 0)
    for line in log.splitlines():
        m = _PTXAS_ENTRY.search(line)
        if m:
            current = m.group(1)
            continue
        f = _PTXAS_FRAME.search(line)
        if f and current == entry:
            frame = (int(f.group(1)), int(f.group(2)), int(f.group(3)))
        u = _PTXAS_USED.search(line)
        if u and current == entry:
            return PtxasResources(entry=entry, registers=int(u.group(1)),
                                  smem_bytes=int(u.group(2) or 0),
                                  spill_bytes=frame[1] + frame[2], stack_bytes=frame[0])
    raise RecordError(f"ptxas reported no resources for entry {entry!r} of {Path(source).name}")


def define_flags(defines: Mapping[str, int | float]) -> list[str]:
    """``-DNAME=VALUE`` flags; whole numbers are written without a decimal point."""
    flags = []
    for name, value in defines.items():
        v = float(value)
        flags.append(f"-D{name}={int(v)}" if v.is_integer() else f"-D{name}={v!r}")
    return flags


@dataclass(frozen=True, slots=True)
class PTXCheckResult:
    """One compared quantity: the static PTX count and the descriptor's expectation for it."""

    check: int
    params: Mapping[str, float]
    region: str
    quantity: str
    expected: float
    actual: float
    tolerance: float

    @property
    def ok(self) -> bool:
        return abs(self.actual - self.expected) <= self.tolerance * max(abs(self.expected), 1.0) + 1e-9


def run_ptx_checks(bench: BenchSetup, kernel: KernelDescriptor, *, arch: str = "sm_80",
                   nvcc: str | None = None) -> list[PTXCheckResult]:
    """Compile ``bench`` for each of its ``[[ptx_check]]`` configurations and compare the static
    counts of the named region with the descriptor formulas evaluated there (docs/record.md)."""
    from hybridperf.profile import PROFILE_FIELDS
    from hybridperf.record.bench import scalar_env

    out: list[PTXCheckResult] = []
    compiled: dict[tuple[tuple[str, float], ...], PTXCounts] = {}
    for i, check in enumerate(bench.ptx_checks):
        env = scalar_env(kernel, check.params, PROFILE_FIELDS)
        defines = {n: env[n] for n in bench.defines}
        key = tuple(sorted(defines.items()))
        if key not in compiled:
            compiled[key] = count_ptx(compile_ptx(bench.source, defines, arch=arch, nvcc=nvcc), bench.entry)
        counts = compiled[key]
        for quantity, formula in check.expect.items():
            if quantity == "smem_bytes":
                actual = float(counts.smem_bytes)
            elif quantity in CLASSES:
                actual = float(counts.region(check.region)[quantity])
            else:
                raise RecordError(f"{bench.path}: ptx_check[{i}] compares unknown quantity {quantity!r}; "
                                  f"use one of {', '.join(CLASSES)} or smem_bytes")
            out.append(PTXCheckResult(check=i, params=dict(check.params), region=check.region, quantity=quantity,
                                      expected=float(formula(env)), actual=actual, tolerance=check.tolerance))
    return out
