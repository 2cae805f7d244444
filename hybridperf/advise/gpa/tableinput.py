"""What both sample-table readers share: the file's text, count and SASS cells, branch-target checks."""
from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from hybridperf.advise.gpa.errors import GPAInputError, SASSSyntaxError
from hybridperf.advise.gpa.samples import InstructionSamples, resolve_branch_target
from hybridperf.advise.gpa.sass import Instruction, parse_sass

__all__ = ["check_branch_targets", "parse_count", "parse_sass_at", "read_text"]


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
    """Parse the SASS cell at ``loc``; a syntax error becomes a GPAInputError naming the row."""
    try:
        return parse_sass(text)
    except SASSSyntaxError as exc:
        raise GPAInputError(f"{loc} column 'sass': {exc}; fix or remove the instruction") from None


def read_text(path: str | Path) -> str:
    """The file's UTF-8 text (a BOM is dropped); GPAInputError when unreadable or empty."""
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
