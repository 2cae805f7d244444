"""Plain-text table formatting for people (CSV/JSON are for machines)."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

__all__ = ["format_number", "format_table"]


def format_number(v: Any) -> str:
    """Short human form: 4 significant digits, thousands kept readable, NaN as '-'."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and abs(v) < 1e9):
        return f"{int(v)}"
    if isinstance(v, float):
        if v != 0 and (abs(v) >= 1e6 or abs(v) < 1e-3):
            return f"{v:.4g}"
        return f"{v:.4g}" if abs(v) < 1000 else f"{v:.1f}"
    return str(v)


def format_table(df: pd.DataFrame, columns: Sequence[str] | None = None) -> str:
    """Align a DataFrame as a text table with a header rule."""
    cols = list(columns) if columns is not None else list(df.columns)
    cells = [[format_number(x.item() if hasattr(x, "item") else x) for x in df[c]] for c in cols]
    widths = [max([len(c)] + [len(s) for s in col]) for c, col in zip(cols, cells)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(cols, widths)),
             "  ".join("-" * w for w in widths)]
    for i in range(len(df)):
        lines.append("  ".join(col[i].rjust(w) for col, w in zip(cells, widths)))
    return "\n".join(lines)
