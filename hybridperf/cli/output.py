"""Output for the command line: JSON for machines, aligned tables for people."""
from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from hybridperf.cli.tables import format_table

__all__ = ["clean", "dump_json", "print_table", "progress_enabled", "records"]


def clean(v: Any) -> Any:
    """A JSON-safe scalar: numpy scalars as Python values, NaN and inf as None."""
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        v = v.item()
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    return v


def records(table: pd.DataFrame) -> list[dict[str, Any]]:
    """A table's rows as JSON-safe dicts."""
    return [{str(k): clean(v) for k, v in row.items()} for row in table.to_dict("records")]


def _default(o: Any) -> Any:
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    return str(o)


def dump_json(obj: Any) -> None:
    """Print ``obj`` as indented JSON (NaN refused: pass values through :func:`clean`)."""
    print(json.dumps(obj, indent=2, default=_default, allow_nan=False))


def print_table(table: pd.DataFrame | Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> None:
    """Print rows as an aligned text table."""
    df = table if isinstance(table, pd.DataFrame) else pd.DataFrame(list(table))
    print(format_table(df, columns))


def progress_enabled(args: Any) -> bool:
    """Progress bars go to stderr, only on a terminal and without --quiet."""
    return not getattr(args, "quiet", False) and sys.stderr.isatty()
