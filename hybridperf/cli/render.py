"""Output for people: tables and name-value lists drawn with rich, fitted to the terminal's width."""
from __future__ import annotations

# One place for how the command line shows things: every command (and every command added later) prints
# its tables through print_table and its name-value lists through print_fields. Every number has the
# same significant figures (a column never mixes fixed and scientific notation); a table wider than the
# terminal loses its last columns, named in a note, unless --wide asks for all of them; long text wraps.
# Machine outputs (JSON, CSV, Parquet) are in hybridperf.cli.output.
import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pandas loads on first use: the command line's start stays light
    import pandas as pd

__all__ = ["DISPLAY", "Display", "console", "format_column", "format_value", "print_fields", "print_note",
           "print_table"]

SIGNIFICANT = 4  # significant figures of every number shown


@dataclass(slots=True)
class Display:
    """How this run prints: ``wide`` keeps every column; ``verbose`` adds detail; ``quiet`` drops progress."""
    wide: bool = False
    verbose: int = 0
    quiet: bool = False


DISPLAY = Display()


def console(stderr: bool = False, width: int | None = None) -> Any:
    """A rich Console on the current stdout (or stderr): colours only on a terminal, no markup guessing."""
    from rich.console import Console

    return Console(file=sys.stderr if stderr else sys.stdout, highlight=False, soft_wrap=False, width=width,
                   emoji=False, markup=False)


def _missing(v: Any) -> bool:
    import pandas as pd

    return v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA or v is pd.NaT


def _scalar(v: Any) -> Any:
    return v.item() if hasattr(v, "item") and not isinstance(v, (str, bytes)) else v


def format_value(v: Any) -> str:
    """One value on its own: ``SIGNIFICANT`` significant figures, whole numbers whole, missing as ``-``."""
    return format_column([v])[0]


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _fixed(v: float) -> str:
    """``SIGNIFICANT`` significant figures in fixed notation (whole digits are never rounded away)."""
    if v == 0:
        return "0"
    rounded = float(f"{v:.{SIGNIFICANT - 1}e}")  # 99.999 -> 100.0: the decimals of the rounded value
    return f"{rounded:.{max(0, SIGNIFICANT - 1 - math.floor(math.log10(abs(rounded))))}f}"


def format_column(values: Sequence[Any]) -> list[str]:
    """Format a column's values with one shared style and ``SIGNIFICANT`` significant figures each.

    Whole numbers print whole; other numbers in fixed notation, or all in scientific notation when any
    of them is below 1e-3 or from 1e6 up (so a column never mixes the two). Booleans print yes/no,
    missing values ``-``.
    """
    vals = [_scalar(v) for v in values]
    nums = [float(v) for v in vals if _is_number(v) and math.isfinite(float(v))]
    whole = all(v.is_integer() and abs(v) < 1e15 for v in nums)
    sci = not whole and any(v != 0 and not 1e-3 <= abs(v) < 1e6 for v in nums)
    out = []
    for v in vals:
        if _missing(v):
            out.append("-")
        elif isinstance(v, bool):
            out.append("yes" if v else "no")
        elif not _is_number(v):
            out.append(str(v))
        elif not math.isfinite(float(v)):
            out.append(str(v))
        elif whole:
            out.append(f"{float(v):.0f}")
        else:
            out.append(f"{float(v):.{SIGNIFICANT - 1}e}" if sci else _fixed(float(v)))
    return out


def _width() -> int:
    """The width tables fit: the terminal's, else ``COLUMNS``, else 100 (rich's default is 80)."""
    cols = os.environ.get("COLUMNS", "")
    if cols.isdigit() and int(cols) > 0:
        return int(cols)
    if sys.stdout.isatty():
        return os.get_terminal_size(sys.stdout.fileno()).columns
    return 100


_GAP = 2  # characters between columns: one of padding, one of the box's (blank) column separator
_MAX_WORD = 24  # a text column is never narrower than its longest word, up to this many characters
_SHORT_TEXT = 16  # text columns no wider than this are never wrapped


def _longest_word(texts: Sequence[str]) -> int:
    return max((len(w) for t in texts for w in t.split()), default=1)


def _min_widths(columns: Sequence[str], cells: dict[str, list[str]], numeric: set[str]) -> dict[str, int]:
    """The narrowest each column may get: numbers and the first column whole, text down to its longest word."""
    out = {}
    for i, c in enumerate(columns):
        if c in numeric or i == 0:
            out[c] = min(max(len(x) for x in [c, *cells[c]]), 2 * _MAX_WORD)
        else:
            natural = max(len(x) for x in [c, *cells[c]])
            out[c] = natural if natural <= _SHORT_TEXT else min(_longest_word([c, *cells[c]]), _MAX_WORD)
    return out


def _layout(columns: Sequence[str], cells: dict[str, list[str]], numeric: set[str],
            width: int | None) -> dict[str, int]:
    """Column widths within ``width`` (None: each column's natural width): text columns other than the first
    give up width, the widest first, down to their minimum."""
    natural = {c: max(len(x) for x in [c, *cells[c]]) for c in columns}
    if width is None:
        return natural
    widths, floor = dict(natural), _min_widths(columns, cells, numeric)
    excess = sum(widths.values()) + _GAP * (len(columns) - 1) - width
    flexible = [c for i, c in enumerate(columns) if i and c not in numeric]
    while excess > 0:
        c = max(flexible, key=lambda k: widths[k] - floor[k], default=None)
        if c is None or widths[c] <= floor[c]:
            break
        widths[c] -= 1
        excess -= 1
    return widths


def _table(frame: pd.DataFrame, columns: Sequence[str], cells: dict[str, list[str]], numeric: set[str],
           title: str | None, width: int | None) -> Any:
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, title=title, title_justify="left", pad_edge=False, show_edge=False,
                  header_style="bold", padding=(0, 1, 0, 0))
    widths = _layout(columns, cells, numeric, width)
    for i, c in enumerate(columns):
        if c in numeric:
            table.add_column(c, justify="right", no_wrap=True, width=widths[c])
        else:
            table.add_column(c, overflow="fold", no_wrap=i == 0, width=widths[c])
    for i in range(len(frame)):
        table.add_row(*(cells[c][i] for c in columns))
    return table


def _fitted(frame: pd.DataFrame, columns: list[str], title: str | None, width: int) -> tuple[Any, list[str], int]:
    """The table with as many leading columns as fit ``width`` (at least one), the names of the dropped ones,
    and the table's width."""
    import pandas as pd

    cells = {c: format_column(frame[c].tolist()) for c in columns}
    numeric = {c for c in columns
               if pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c])}
    floor = _min_widths(columns, cells, numeric)
    keep = list(columns)
    while not DISPLAY.wide and len(keep) > 1 and sum(floor[c] for c in keep) + _GAP * (len(keep) - 1) > width:
        keep.pop()
    widths = _layout(keep, cells, numeric, None if DISPLAY.wide else width)
    total = sum(widths.values()) + _GAP * (len(keep) - 1)
    return _table(frame, keep, cells, numeric, title, None if DISPLAY.wide else width), \
        [c for c in columns if c not in keep], total


# Rows a table for people shows (rich draws about 600 a second: a 100,000-row grid took minutes to scroll past).
MAX_SHOWN_ROWS = 1000


def print_table(table: pd.DataFrame | Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None, *,
                title: str | None = None) -> None:
    """Print rows as a table fitted to the terminal (``--wide``: every column, however wide).

    ``columns`` are in order of importance: those that do not fit are left out and named in a note.
    """
    import pandas as pd

    frame = table if isinstance(table, pd.DataFrame) else pd.DataFrame(list(table))
    cols = [str(c) for c in (columns if columns is not None else frame.columns)]
    frame = frame.loc[:, ~frame.columns.duplicated(keep="last")].reset_index(drop=True)
    hidden = max(len(frame) - MAX_SHOWN_ROWS, 0)
    frame = frame.head(MAX_SHOWN_ROWS)
    width = _width()
    shown, dropped, table_width = _fitted(frame, cols, title, width)
    con = console(width=max(width, table_width) if DISPLAY.wide else width)
    _print(con, shown)
    if hidden:
        print_note(f"{hidden:,} more row(s) not shown: --csv, --json or -o FILE gives every row")
    if dropped:
        print_note(f"{len(dropped)} more column(s) with --wide: {', '.join(dropped)}")


def _print(con: Any, renderable: Any) -> None:
    """Print through rich without the trailing spaces it pads lines with (they get in the way of pipes)."""
    with con.capture() as cap:
        con.print(renderable)
    text = "\n".join(line.rstrip() for line in cap.get().split("\n"))
    con.file.write(text)
    con.file.flush()


def print_fields(rows: Sequence[Sequence[Any]], header: Sequence[str], *, title: str | None = None) -> None:
    """Print name-value rows (``gpus show``, ``predict``'s configuration): the values formatted one by one."""
    import pandas as pd

    frame = pd.DataFrame([[format_value(v) if j else str(v) for j, v in enumerate(r)] for r in rows],
                         columns=list(header))
    print_table(frame, title=title)


def print_note(text: str) -> None:
    """Text wrapped to the terminal's width; a wrapped line continues indented under its first word."""
    import textwrap

    width = _width()
    out = []
    for line in text.split("\n"):
        lead = " " * (len(line) - len(line.lstrip()))
        out.append(textwrap.fill(line, width=width, subsequent_indent=lead + "    ", break_on_hyphens=False,
                                 break_long_words=False) if len(line) > width else line)
    print("\n".join(out))
