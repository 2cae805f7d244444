"""Reader for the plain per-instruction sample CSV (docs/gpa.md)."""
from __future__ import annotations

import csv
import io
from pathlib import Path

from hybridperf.advise.gpa.errors import GPAInputError
from hybridperf.advise.gpa.reasons import REASONS, STALL_REASONS
from hybridperf.advise.gpa.samples import InstructionSamples, SampleTable
from hybridperf.advise.gpa.tableinput import (
    check_branch_targets,
    parse_count,
    parse_sass_at,
    read_text,
)

__all__ = ["read_plain_csv"]

_REQUIRED = ("function", "pc", "sass", "issued")


def _plain_columns(path: Path, header: list[str]) -> dict[str, int]:
    cols = {h.strip().lower(): i for i, h in enumerate(header)}
    missing = [c for c in _REQUIRED if c not in cols]
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


def _counts(cell: dict[str, str], loc: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(all samples, latency samples) per reason of one row; absent reason columns count 0."""
    all_c = [0] * len(REASONS)
    lat_c = [0] * len(REASONS)
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
    return tuple(all_c), tuple(lat_c)


def _record(path: Path, cell: dict[str, str], loc: str) -> InstructionSamples:
    """The instruction of one data row, its cells keyed by lower-case column name."""
    function = cell["function"].strip()
    if not function:
        raise GPAInputError(f"{loc} column 'function': empty; name the function of every instruction")
    try:
        pc = int(cell["pc"].strip(), 0)
    except ValueError:
        raise GPAInputError(f"{loc} column 'pc': {cell['pc']!r} is not 0x-hex or decimal") from None
    line_text = cell.get("line", "").strip()
    line = parse_count(line_text, loc, "line") if line_text else None
    all_c, lat_c = _counts(cell, loc)
    try:
        return InstructionSamples(
            function, pc, parse_sass_at(cell["sass"], loc), all_c, lat_c, line,
            cell.get("file", "").strip() or None, cell.get("inlined_from", "").strip() or None,
        )
    except GPAInputError as exc:
        if str(exc).startswith(str(path)):
            raise
        raise GPAInputError(f"{loc}: {exc}") from None


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
    header = rows[0]
    cols = _plain_columns(p, header)
    records: list[InstructionSamples] = []
    where: list[str] = []
    for lineno, row in enumerate(rows[1:], start=2):
        if not any(c.strip() for c in row):
            continue
        loc = f"{p} line {lineno}"
        if len(row) != len(header):
            raise GPAInputError(
                f"{loc}: {len(row)} fields but the header has {len(header)}; quote SASS containing commas"
            )
        records.append(_record(p, {name: row[i] for name, i in cols.items()}, loc))
        where.append(loc)
    if not records:
        raise GPAInputError(f"{p}: header but no instruction rows; export the samples again")
    check_branch_targets(records, where)
    return SampleTable(tuple(records), source=str(p))
