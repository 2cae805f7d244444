"""Output for machines: JSON and CSV on stdout, and tables written to files (-o, CSV or Parquet)."""
from __future__ import annotations

# Tables for people are drawn by hybridperf.cli.render.
import json
import math
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from hybridperf.errors import UsageError

__all__ = ["PREDICTED_NAMES", "clean", "dump_json", "dump_json_rows", "predicted_names", "records", "short_regimes",
           "write_table"]

# A prediction's columns as the command line shows and writes them, apart from measured ones (time_ms).
PREDICTED_NAMES = {"time_ms": "pred_ms", "lo_ms": "pred_lo_ms", "hi_ms": "pred_hi_ms"}


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


def dump_json_rows(head: Mapping[str, Any], rows: Iterable[Any], key: str = "rows") -> None:
    """Print ``{**head, key: [rows...]}`` as :func:`dump_json` would, one row at a time: the rows may be a
    generator, so a 100,000-row grid is never held as one string (``analyze --json`` took 4 GB)."""
    out = sys.stdout
    out.write("{\n")
    for k, v in head.items():
        out.write(f"  {json.dumps(str(k))}: " + json.dumps(v, indent=2, default=_default, allow_nan=False)
                  .replace("\n", "\n  ") + ",\n")
    out.write(f"  {json.dumps(key)}: [")
    n = 0
    for n, row in enumerate(rows, 1):
        text = json.dumps(row, indent=2, default=_default, allow_nan=False).replace("\n", "\n    ")
        out.write(("," if n > 1 else "") + "\n    " + text)
    out.write("\n  ]\n}\n" if n else "]\n}\n")


def predicted_names(table: pd.DataFrame, measured: pd.DataFrame | None = None) -> pd.DataFrame:
    """The table with its predicted columns renamed (:data:`PREDICTED_NAMES`), and the measured columns of
    ``measured`` (rows in the same order) kept under their own names (``time_ms``, ``status``, ...)."""
    stale = [new for old, new in PREDICTED_NAMES.items() if old in table.columns and new in table.columns]
    out = table.drop(columns=stale).rename(columns=PREDICTED_NAMES)  # rows read back from an -o file carry old ones
    if measured is not None:
        keep = [c for c in ("time_ms", "status", "repeats", "time_std_ms") if c in measured.columns]
        for c in keep:
            out[c] = measured[c].to_numpy()
    return out


def short_regimes(table: pd.DataFrame) -> pd.DataFrame:
    """The table with its ``regime`` cells cut to the label ("memory-bound (Eq. 23: CWP >= MWP)" ->
    "memory-bound"), for a table on a terminal; JSON, CSV and files keep the whole text."""
    if "regime" not in table.columns:
        return table
    out = table.copy()
    out["regime"] = out["regime"].astype(str).str.split(" (", n=1, regex=False).str[0]
    return out


def write_table(table: pd.DataFrame, path: str, attrs: Mapping[str, Any] | None = None) -> Path:
    """Write a table as Parquet (``.parquet``, with ``attrs`` as metadata) or CSV (anything else; ``.gz``
    compressed), atomically; ``-o`` options check the name first (:func:`hybridperf.cli.argtypes.table_output`)."""
    from hybridperf.files import atomic_write

    frame = table.reset_index(drop=True)

    def write(tmp: Path) -> None:
        if str(path).lower().endswith(".parquet"):
            import pyarrow as pa
            import pyarrow.parquet as pq

            arrow = pa.Table.from_pandas(frame, preserve_index=False)
            if attrs:
                meta = dict(arrow.schema.metadata or {})
                meta[b"hybridperf"] = json.dumps(dict(attrs), default=_default).encode()
                arrow = arrow.replace_schema_metadata(meta)
            pq.write_table(arrow, tmp, compression="zstd")
        else:
            frame.to_csv(tmp, index=False, compression="gzip" if str(path).lower().endswith(".gz") else None)

    return atomic_write(path, write, error=UsageError)
