"""Reader for Nsight Compute's source-page CSV export (SASS view with warp-stall sampling)."""
from __future__ import annotations

import csv
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from hybridperf.advise.gpa.errors import GPAInputError, GPAInputWarning
from hybridperf.advise.gpa.reasons import REASONS, nsight_reason_class
from hybridperf.advise.gpa.samples import InstructionSamples, SampleTable
from hybridperf.advise.gpa.tableinput import (
    check_branch_targets,
    parse_count,
    parse_sass_at,
    read_text,
)

__all__ = ["read_ncu_source_csv"]

_NOT_ISSUED_SUFFIXES = (" (not issued)", "_not_issued")
_TOTAL_ALL = "warp stall sampling (all samples)"
_TOTAL_LAT = "warp stall sampling (not-issued samples)"
_EXPORT = "ncu --import REPORT --page source --csv --print-source sass"


@dataclass
class _Table:
    kernel: str | None
    header: list[str]
    header_line: int
    rows: list[tuple[int, list[str]]] = field(default_factory=list)


def _split_tables(path: Path, text: str) -> list[_Table]:
    tables: list[_Table] = []
    kernel: str | None = None
    current: _Table | None = None
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("=="):  # ncu's ==PROF== / ==WARNING== lines
            continue
        row = next(csv.reader([line]))
        head = row[0].strip() if row else ""
        if head in ("Kernel Name", "Function Name") and len(row) > 1:
            kernel = row[1].strip()
            current = None
        elif head in ("Address", "# Address") or (head == "Line No" and "Address" in [c.strip() for c in row]):
            current = _Table(kernel, [c.strip() for c in row], lineno)
            tables.append(current)
        elif current is not None:
            current.rows.append((lineno, row))
    if not tables:
        raise GPAInputError(f"{path}: no header row starting with \"Address\"; export with `{_EXPORT}`")
    return tables


def _select(path: Path, tables: list[_Table], kernel: str | None) -> _Table:
    names = [t.kernel or "?" for t in tables]
    if kernel is None:
        if len(tables) > 1:
            raise GPAInputError(
                f"{path}: {len(tables)} kernel tables ({', '.join(names)}); pass kernel=NAME to pick one"
            )
        return tables[0]
    exact = [t for t in tables if t.kernel == kernel]
    found = exact or [t for t in tables if t.kernel and kernel in t.kernel]
    if len(found) != 1:
        what = "no" if not found else f"{len(found)}"
        raise GPAInputError(
            f"{path}: {what} kernel table(s) match {kernel!r} (tables: {', '.join(names)}); "
            "give the exact kernel name or export one launch"
        )
    return found[0]


def _columns(path: Path, t: _Table) -> tuple[int, int, int | None, dict[int, tuple[str, bool]], list[str]]:
    """(address col, SASS source col, line col, {col: (reason class, is_latency)}, unknown names)."""
    lower = [h.lower() for h in t.header]
    addr = lower.index("address") if "address" in lower else lower.index("# address")
    sources = [i for i, h in enumerate(lower) if h == "source"]
    after = [i for i in sources if i > addr]
    if not after and not sources:
        raise GPAInputError(f"{path} line {t.header_line}: no \"Source\" column; export with `{_EXPORT}`")
    sass_col = after[0] if after else sources[0]
    line_col = lower.index("line no") if "line no" in lower else None
    reasons: dict[int, tuple[str, bool]] = {}
    unknown: list[str] = []
    for i, h in enumerate(lower):
        latency = False
        name = h
        for suffix in _NOT_ISSUED_SUFFIXES:
            if name.endswith(suffix):
                name, latency = name[: -len(suffix)].strip(), True
        if not name.startswith(("stall_", "smsp__pcsamp_warps_issue_stalled_")):
            continue
        cls = nsight_reason_class(name)
        if cls is None:
            unknown.append(t.header[i])
            cls = "OTHR"
        reasons[i] = (cls, latency)
    if not any(not lat for _, lat in reasons.values()):
        raise GPAInputError(
            f"{path} line {t.header_line}: no per-reason stall columns (stall_*); export the "
            f"source page of a report collected with --section SourceCounters, `{_EXPORT}`"
        )
    if not any(lat for _, lat in reasons.values()):
        raise GPAInputError(
            f"{path} line {t.header_line}: no '(Not Issued)' stall columns, so latency samples "
            "are unknown; profile on compute capability >= 7.0 and export all source metrics"
        )
    if not any(cls == "NONE" and not lat for cls, lat in reasons.values()):
        raise GPAInputError(
            f"{path} line {t.header_line}: no 'stall_selected' column (issued samples); export "
            "all warp-stall sampling columns"
        )
    return addr, sass_col, line_col, reasons, unknown


@dataclass(frozen=True)
class _Layout:
    """Where a table keeps each field: columns of the address, SASS, source line and total."""

    addr: int
    sass: int
    line: int | None
    total: int | None
    reasons: dict[int, tuple[str, bool]]


@dataclass
class _Rows:
    """The instruction rows read so far and the counts the warnings report."""

    records: list[InstructionSamples] = field(default_factory=list)
    where: list[str] = field(default_factory=list)
    clipped: int = 0
    mismatched: int = 0


def _reason_counts(t: _Table, layout: _Layout, row: list[str], loc: str) -> tuple[list[int], list[int], int]:
    """(all samples, latency samples, number clipped) per reason; latency is clipped to all."""
    all_c = [0] * len(REASONS)
    lat_c = [0] * len(REASONS)
    for col, (cls, latency) in layout.reasons.items():
        target = lat_c if latency else all_c
        target[REASONS.index(cls)] += parse_count(row[col], loc, t.header[col])
    clipped = 0
    for k in range(len(REASONS)):
        if lat_c[k] > all_c[k]:
            clipped += 1
            lat_c[k] = all_c[k]
    return all_c, lat_c, clipped


def _total_differs(t: _Table, layout: _Layout, row: list[str], loc: str, all_c: list[int]) -> bool:
    """Does a non-blank all-samples total disagree with the sum of the per-reason columns?"""
    col = layout.total
    if col is None or not row[col].strip():
        return False
    return parse_count(row[col], loc, t.header[col]) != sum(all_c)


def _add_instruction(t: _Table, layout: _Layout, row: list[str], loc: str, line: int | None,
                     out: _Rows) -> None:
    address = row[layout.addr].strip()
    if len(row) != len(t.header):
        raise GPAInputError(f"{loc}: {len(row)} fields but the header has {len(t.header)}")
    try:
        pc = int(address, 16)
    except ValueError:
        raise GPAInputError(f"{loc} column 'Address': {address!r} is not a hex address") from None
    all_c, lat_c, clipped = _reason_counts(t, layout, row, loc)
    out.clipped += clipped
    out.mismatched += _total_differs(t, layout, row, loc, all_c)
    out.records.append(InstructionSamples(
        t.kernel or "kernel", pc, parse_sass_at(row[layout.sass], loc), tuple(all_c), tuple(lat_c), line,
    ))
    out.where.append(loc)


def _read_rows(path: Path, t: _Table, layout: _Layout) -> _Rows:
    """Instruction rows of a table; a CUDA source row (cuda,sass view) sets the line of those after it."""
    out = _Rows()
    current_line: int | None = None
    for lineno, row in t.rows:
        loc = f"{path} line {lineno}"
        if len(row) <= layout.addr:
            continue
        address = row[layout.addr].strip()
        if layout.line is not None and row[layout.line].strip() and address in ("", "-"):
            current_line = parse_count(row[layout.line], loc, t.header[layout.line])
        elif address.lower().startswith("0x"):
            _add_instruction(t, layout, row, loc, current_line, out)
    return out


def _notes(unknown: list[str], rows: _Rows) -> list[str]:
    notes = []
    if unknown:
        notes.append(f"{len(unknown)} unknown Nsight stall column(s) counted as OTHR: {', '.join(unknown)}")
    if rows.clipped:
        notes.append(f"{rows.clipped} not-issued count(s) above the all-samples count were clipped to it")
    if rows.mismatched:
        notes.append(f"{rows.mismatched} row(s) whose stall_* columns do not sum to the all-samples total")
    return notes


def read_ncu_source_csv(path: str | Path, *, kernel: str | None = None) -> SampleTable:
    """Read ``ncu --import R --page source --csv --print-source sass`` (or ``cuda,sass``) output.

    Each ``stall_<name>`` column (all samples) and ``stall_<name> (Not Issued)`` column
    (latency samples) is mapped to a GPA reason class with
    :data:`hybridperf.advise.gpa.reasons.NSIGHT_REASON_MAP`; ``stall_selected`` gives the issued
    samples. Unknown ``stall_*`` names count as OTHR (with a warning). Nsight takes
    not-issued samples in a different pass from all samples, so a not-issued count above the
    all-samples count is clipped to it (with a warning giving the count).

    Raises
    ------
    GPAInputError
        No header, no per-reason columns, several kernels and no ``kernel``, bad counts or
        unparseable SASS; the message names the file, line and column.
    """
    p = Path(path)
    t = _select(p, _split_tables(p, read_text(p)), kernel)
    addr, sass_col, line_col, reasons, unknown = _columns(p, t)
    lower = [h.lower() for h in t.header]
    total_col = lower.index(_TOTAL_ALL) if _TOTAL_ALL in lower else None
    rows = _read_rows(p, t, _Layout(addr, sass_col, line_col, total_col, reasons))
    if not rows.records:
        raise GPAInputError(f"{p}: the table of {t.kernel or 'kernel'!r} has no instruction rows; export it again")
    check_branch_targets(rows.records, rows.where)
    notes = _notes(unknown, rows)
    for note in notes:
        warnings.warn(f"{p}: {note}", GPAInputWarning, stacklevel=2)
    return SampleTable(tuple(rows.records), source=str(p), kernel=t.kernel, notes=tuple(notes))
