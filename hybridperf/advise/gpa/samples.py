"""Per-instruction PC-sample tables: the data model and the plain CSV reader."""
from __future__ import annotations

import csv
import io
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hybridperf.advise.gpa.errors import GPAInputError, GPAInputWarning, SASSSyntaxError
from hybridperf.advise.gpa.reasons import REASONS, STALL_REASONS
from hybridperf.advise.gpa.sass import Instruction, parse_sass

__all__ = [
    "InstructionSamples",
    "SampleTable",
    "read_plain_csv",
    "read_samples",
    "resolve_branch_target",
]

_N = len(REASONS)
_ZEROS = (0,) * _N


@dataclass(frozen=True, slots=True)
class InstructionSamples:
    """The PC samples of one instruction.

    ``all_samples[k]`` is CUPTI's ``samples`` for reason ``REASONS[k]`` (every sample taken at
    this pc with that reason) and ``latency_samples[k]`` its ``latencySamples`` (the subset taken
    while the warp's scheduler issued nothing): GPA.md Sec. 0. ``REASONS[0]`` is ``NONE``, so
    ``all_samples[0]`` are the issued samples.
    """

    function: str
    pc: int
    instruction: Instruction
    all_samples: tuple[int, ...] = _ZEROS
    latency_samples: tuple[int, ...] = _ZEROS
    line: int | None = None
    file: str | None = None
    inlined_from: str | None = None

    def __post_init__(self) -> None:
        where = f"function {self.function!r} pc {self.pc:#x}"
        if not isinstance(self.function, str) or not self.function:
            raise GPAInputError(f"pc {self.pc!r}: function name must be a non-empty string")
        if not isinstance(self.pc, int) or isinstance(self.pc, bool) or self.pc < 0:
            raise GPAInputError(f"function {self.function!r}: pc must be an integer >= 0, got {self.pc!r}")
        for name in ("all_samples", "latency_samples"):
            counts = getattr(self, name)
            if len(counts) != _N:
                raise GPAInputError(f"{where}: {name} needs {_N} counts (one per reason), got {len(counts)}")
            for reason, c in zip(REASONS, counts):
                if not isinstance(c, int) or isinstance(c, bool) or c < 0:
                    raise GPAInputError(f"{where}: {name}[{reason}] must be an integer >= 0, got {c!r}")
        for reason, s, lat in zip(REASONS, self.all_samples, self.latency_samples):
            if lat > s:
                raise GPAInputError(
                    f"{where}: {reason} latency samples ({lat}) exceed all samples ({s}); "
                    "latency samples are a subset of all samples"
                )
        if self.line is not None and (not isinstance(self.line, int) or self.line < 0):
            raise GPAInputError(f"{where}: line must be an integer >= 0 or None, got {self.line!r}")

    @classmethod
    def from_counts(cls, function: str, pc: int, sass: str | Instruction, *, issued: int = 0,
                    stalls: Mapping[str, int] | None = None,
                    latency: Mapping[str, int] | None = None, line: int | None = None,
                    file: str | None = None, inlined_from: str | None = None) -> InstructionSamples:
        """Build from reason-keyed counts, e.g. ``stalls={"GMEM": 40}, latency={"GMEM": 30}``."""
        inst = parse_sass(sass) if isinstance(sass, str) else sass
        all_c = [0] * _N
        lat_c = [0] * _N
        all_c[0] = issued
        for target, values in ((all_c, stalls or {}), (lat_c, latency or {})):
            for reason, value in values.items():
                if reason not in STALL_REASONS:
                    raise GPAInputError(
                        f"function {function!r} pc {pc:#x}: unknown stall reason {reason!r}; "
                        f"use one of {', '.join(STALL_REASONS)}"
                    )
                target[REASONS.index(reason)] = value
        return cls(function, pc, inst, tuple(all_c), tuple(lat_c), line, file, inlined_from)

    @property
    def sass(self) -> str:
        return self.instruction.text

    @property
    def issued(self) -> int:
        """Samples with reason NONE: the sampled warp issued this instruction."""
        return self.all_samples[0]

    @property
    def total(self) -> int:
        return sum(self.all_samples)

    @property
    def latency_total(self) -> int:
        return sum(self.latency_samples)

    def samples(self, reason: str) -> int:
        return self.all_samples[REASONS.index(reason)]

    def latency(self, reason: str) -> int:
        return self.latency_samples[REASONS.index(reason)]


@dataclass(frozen=True, slots=True)
class SampleTable:
    """The sampled instructions of one kernel (and the device functions it calls).

    Kernel-level quantities follow GPA.md Sec. 0: ``total_samples`` T, ``latency_samples``
    L (no issue by the sampled warp's scheduler), ``active_samples`` A = T - L and
    ``issued_samples`` (reason NONE).
    """

    instructions: tuple[InstructionSamples, ...]
    source: str = "<memory>"
    kernel: str | None = None
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.instructions:
            raise GPAInputError(f"{self.source}: no instructions; the table must list at least one")
        seen: set[tuple[str, int]] = set()
        for rec in self.instructions:
            key = (rec.function, rec.pc)
            if key in seen:
                raise GPAInputError(
                    f"{self.source}: function {rec.function!r} lists pc {rec.pc:#x} twice; "
                    "each instruction must appear once"
                )
            seen.add(key)
        if self.total_samples == 0:
            raise GPAInputError(
                f"{self.source}: every sample count is 0; re-profile with PC sampling enabled"
            )

    @property
    def functions(self) -> tuple[str, ...]:
        """Function names in order of first appearance."""
        return tuple(dict.fromkeys(r.function for r in self.instructions))

    @property
    def total_samples(self) -> int:
        return sum(r.total for r in self.instructions)

    @property
    def latency_samples(self) -> int:
        return sum(r.latency_total for r in self.instructions)

    @property
    def active_samples(self) -> int:
        return self.total_samples - self.latency_samples

    @property
    def issued_samples(self) -> int:
        return sum(r.issued for r in self.instructions)

    def reason_totals(self) -> dict[str, tuple[int, int]]:
        """``{reason: (all samples, latency samples)}`` summed over the kernel."""
        out = {}
        for k, reason in enumerate(REASONS):
            out[reason] = (sum(r.all_samples[k] for r in self.instructions),
                           sum(r.latency_samples[k] for r in self.instructions))
        return out

    def to_frame(self) -> Any:
        """One row per instruction as a pandas DataFrame (columns as in the plain CSV format)."""
        import pandas as pd

        rows = []
        for r in self.instructions:
            row: dict[str, Any] = {"function": r.function, "pc": r.pc, "sass": r.sass,
                                   "line": r.line, "issued": r.issued}
            for k, reason in enumerate(REASONS[1:], start=1):
                row[f"stall_{reason}"] = r.all_samples[k]
                row[f"latency_{reason}"] = r.latency_samples[k]
            rows.append(row)
        return pd.DataFrame(rows)


def resolve_branch_target(pcs: Sequence[int], target: int) -> int | None:
    """Index of a branch target among a function's sorted pcs, or None.

    The target is tried as an address first, then as an offset from the function's first pc
    (cuobjdump prints offsets, Nsight Compute absolute addresses).
    """
    for candidate in (target, pcs[0] + target if pcs else target):
        lo, hi = 0, len(pcs)
        while lo < hi:
            mid = (lo + hi) // 2
            if pcs[mid] < candidate:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(pcs) and pcs[lo] == candidate:
            return lo
    return None


def check_branch_targets(records: Sequence[InstructionSamples], where: Sequence[str]) -> None:
    """Raise GPAInputError naming ``where[i]`` when a branch of record i cannot be resolved."""
    pcs: dict[str, list[int]] = {}
    for r in records:
        pcs.setdefault(r.function, []).append(r.pc)
    for v in pcs.values():
        v.sort()
    for r, loc in zip(records, where):
        inst = r.instruction
        if inst.branch_label is not None:
            raise GPAInputError(
                f"{loc}: branch target label {inst.branch_label!r} cannot be resolved (the table "
                "has no label rows); use numeric targets as cuobjdump -sass or ncu print them"
            )
        if inst.branch_target is not None and resolve_branch_target(pcs[r.function], inst.branch_target) is None:
            raise GPAInputError(
                f"{loc}: branch target {inst.branch_target:#x} is not a pc of function "
                f"{r.function!r}; include every instruction of the function"
            )


def parse_count(text: str, loc: str, column: str) -> int:
    """A non-negative integer sample count; blank means 0, thousands separators are allowed."""
    t = text.strip().replace(",", "")
    if t in ("", "-"):
        return 0
    try:
        value = float(t)
    except ValueError:
        raise GPAInputError(f"{loc} column {column!r}: {text!r} is not a number; write a sample count") from None
    if not math.isfinite(value) or value < 0 or value != int(value):
        raise GPAInputError(
            f"{loc} column {column!r}: {text!r} is not a count >= 0; sample counts are whole "
            "numbers (export absolute values, not percentages)"
        )
    return int(value)


def parse_sass_at(text: str, loc: str) -> Instruction:
    try:
        return parse_sass(text)
    except SASSSyntaxError as exc:
        raise GPAInputError(f"{loc} column 'sass': {exc}; fix or remove the instruction") from None


def read_text(path: str | Path) -> str:
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise GPAInputError(f"{p}: cannot read file ({exc.strerror}); check the path") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise GPAInputError(f"{p}: not UTF-8 text; save the CSV as UTF-8") from None
    if not text.strip():
        raise GPAInputError(f"{p}: file is empty; export the sample table again")
    return text


def _plain_columns(path: Path, header: list[str]) -> dict[str, int]:
    cols = {h.strip().lower(): i for i, h in enumerate(header)}
    missing = [c for c in ("function", "pc", "sass", "issued") if c not in cols]
    if missing:
        raise GPAInputError(
            f"{path}: missing column(s) {', '.join(missing)}; the header needs at least "
            "function,pc,sass,issued (see docs/gpa.md)"
        )
    lower = {r.lower() for r in STALL_REASONS}
    for name in cols:
        for prefix in ("stall_", "latency_"):
            if name.startswith(prefix) and name[len(prefix):] not in lower:
                raise GPAInputError(
                    f"{path}: unknown column {name!r}; reason must be one of "
                    f"{', '.join(STALL_REASONS)} (issued samples go in 'issued')"
                )
        if name.startswith("latency_") and "stall_" + name[8:] not in cols:
            raise GPAInputError(f"{path}: column {name!r} needs a matching 'stall_{name[8:]}' column")
    return cols


def read_plain_csv(path: str | Path) -> SampleTable:
    """Read the plain per-instruction sample CSV documented in docs/gpa.md.

    Columns: ``function``, ``pc`` (``0x``-hex or decimal), ``sass``, ``issued`` (samples with
    reason NONE) are required; ``line``, ``file``, ``inlined_from`` and, for each reason R of
    ``STALL_REASONS``, ``stall_R`` (all samples) and ``latency_R`` (latency samples, a subset)
    are optional and default to empty/0. Other columns are ignored.

    Raises
    ------
    GPAInputError
        Missing or unknown columns, bad counts, unparseable SASS or unresolved branch targets;
        the message names the file, line and column.
    """
    p = Path(path)
    rows = list(csv.reader(io.StringIO(read_text(p))))
    while rows and not any(c.strip() for c in rows[0]):
        rows.pop(0)
    cols = _plain_columns(p, rows[0])
    records: list[InstructionSamples] = []
    where: list[str] = []
    for lineno, row in enumerate(rows[1:], start=2):
        if not any(c.strip() for c in row):
            continue
        loc = f"{p} line {lineno}"
        if len(row) != len(rows[0]):
            raise GPAInputError(f"{loc}: {len(row)} fields but the header has {len(rows[0])}; quote SASS containing commas")
        cell = {name: row[i] for name, i in cols.items()}
        function = cell["function"].strip()
        if not function:
            raise GPAInputError(f"{loc} column 'function': empty; name the function of every instruction")
        try:
            pc = int(cell["pc"].strip(), 0)
        except ValueError:
            raise GPAInputError(f"{loc} column 'pc': {cell['pc']!r} is not 0x-hex or decimal") from None
        line_text = cell.get("line", "").strip()
        line = parse_count(line_text, loc, "line") if line_text else None
        all_c = [0] * _N
        lat_c = [0] * _N
        all_c[0] = parse_count(cell["issued"], loc, "issued")
        for k, reason in enumerate(REASONS[1:], start=1):
            for target, prefix in ((all_c, "stall_"), (lat_c, "latency_")):
                name = prefix + reason.lower()
                if name in cell:
                    target[k] = parse_count(cell[name], loc, name)
            if lat_c[k] > all_c[k]:
                raise GPAInputError(
                    f"{loc} column 'latency_{reason}': {lat_c[k]} exceeds stall_{reason} "
                    f"({all_c[k]}); latency samples are a subset of all samples"
                )
        try:
            records.append(InstructionSamples(
                function, pc, parse_sass_at(cell["sass"], loc), tuple(all_c), tuple(lat_c), line,
                cell.get("file", "").strip() or None, cell.get("inlined_from", "").strip() or None,
            ))
        except GPAInputError as exc:
            if str(exc).startswith(str(p)):
                raise
            raise GPAInputError(f"{loc}: {exc}") from None
        where.append(loc)
    if not records:
        raise GPAInputError(f"{p}: header but no instruction rows; export the samples again")
    check_branch_targets(records, where)
    return SampleTable(tuple(records), source=str(p))


def read_samples(path: str | Path, *, kernel: str | None = None) -> SampleTable:
    """Read a sample table, detecting the format from its header.

    A first line naming ``function``, ``pc`` or ``sass`` selects the plain CSV format
    (:func:`read_plain_csv`); an Nsight Compute source-page export (``ncu --page source --csv
    --print-source sass``) is recognised by its ``"Address"``/``"Kernel Name"`` rows
    (:func:`hybridperf.advise.gpa.ncu.read_ncu_source_csv`, which ``kernel`` selects a table for).
    """
    from hybridperf.advise.gpa.ncu import read_ncu_source_csv

    p = Path(path)
    text = read_text(p)
    first = next(line for line in text.splitlines() if line.strip())
    header = {c.strip().lower() for c in next(csv.reader([first]))}
    if header & {"function", "pc", "sass"} and "address" not in header:
        if kernel is not None:
            warnings.warn(f"{p}: kernel={kernel!r} ignored for the plain CSV format",
                          GPAInputWarning, stacklevel=2)
        return read_plain_csv(p)
    if '"Address"' in text or "Kernel Name" in text or "Address," in text:
        return read_ncu_source_csv(p, kernel=kernel)
    raise GPAInputError(
        f"{p}: unrecognised sample table; expected a header function,pc,sass,issued,... or an "
        "export of `ncu --page source --csv --print-source sass`"
    )
