"""Picks to measure, written for a harness or for Kernel Tuner: sweep rows, or Kernel Tuner configurations."""
# ``rank -o`` and ``suggest -o`` both write through :func:`write_picks_table`:
#
# - ``.csv`` / ``.parquet``: the sweep layout (kernel, gpu, size.*, config.*) with the predictions in
#   ``info.*`` columns and no ``time_ms``/``status``: rows to measure. ``predict --rows``,
#   ``rank --candidates`` and ``suggest --candidates`` read them as they are; once measured (a
#   ``time_ms`` and a ``status`` per row added), they are a sweep that ``train``, ``evaluate`` and
#   ``export`` (to a Kernel Tuner cache) accept.
# - ``.json``: Kernel Tuner configurations (``tune_params_keys`` and one ``{parameter: value}`` per
#   pick, with the problem size and the predicted times), which
#   :class:`hybridperf.search.kernel_tuner_strategy.PicksStrategy` measures through Kernel Tuner, so
#   that the measured picks land in the user's Kernel Tuner cache.
from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hybridperf.errors import HybridperfError

__all__ = ["PREDICTION_COLUMNS", "check_picks_path", "picks_document", "picks_rows", "rank_picks", "write_picks_table"]

# Prediction columns of a rank or suggest table -> the info.* column a picks sweep holds them in.
PREDICTION_COLUMNS = {"rank": "info.rank", "time_ms": "info.pred_ms", "lo_ms": "info.pred_lo_ms",
                      "hi_ms": "info.pred_hi_ms", "tie_with_best": "info.tie_with_best", "p_fail": "info.p_fail",
                      "out_of_domain": "info.out_of_domain", "ood_reason": "info.ood_reason", "why": "info.why"}


def _value(v: Any) -> Any:
    v = float(v)
    return int(v) if v.is_integer() else v


def check_picks_path(path: str | Path) -> Path:
    """``path`` if picks can be written there (a known suffix, a writable place), checked before the work."""
    from hybridperf.files import check_output

    path = Path(path)
    if path.suffix not in (".json", ".csv", ".parquet"):
        raise HybridperfError(f"{path}: write the picks as .json (Kernel Tuner configurations), .csv or .parquet "
                              "(rows to measure)")
    return check_output(path)


def rank_picks(result: Any) -> pd.DataFrame:
    """The top of a :class:`hybridperf.search.rank.RankResult` (its ``table``) as sweep rows with the predictions."""
    table = result.rows().head(len(result.table))
    for c in ("rank", "time_ms", "lo_ms", "hi_ms", "tie_with_best", "out_of_domain", "ood_reason"):
        table[c] = result.table[c].to_numpy()
    return table


def picks_rows(table: pd.DataFrame) -> pd.DataFrame:
    """Rows to measure: kernel, gpu, size.*, config.* and the predictions as ``info.*`` columns."""
    missing = [c for c in ("kernel", "gpu") if c not in table.columns]
    if missing:
        raise HybridperfError(f"picks need a {missing[0]!r} column (sweep rows: kernel, gpu, size.*, config.*)")
    keys = ["kernel", "gpu"] + [c for c in table.columns if str(c).startswith(("size.", "config."))]
    info = {c: PREDICTION_COLUMNS[c] for c in table.columns if c in PREDICTION_COLUMNS}
    out = table[keys].copy()
    for src, dst in info.items():
        out[dst] = table[src].to_numpy()
    return out.reset_index(drop=True)


def picks_document(table: pd.DataFrame, meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The Kernel Tuner picks document (what ``PicksStrategy.from_file`` reads) for sweep rows."""
    config = [c for c in table.columns if str(c).startswith("config.")]
    first = table.iloc[0] if len(table) else None
    times = table["time_ms"] if "time_ms" in table.columns else pd.Series(np.nan, index=table.index)
    doc: dict[str, Any] = {
        "kernel": None if first is None else str(first["kernel"]),
        "gpu": None if first is None else str(first["gpu"]),
        "problem_size": {} if first is None else {c[5:]: _value(first[c]) for c in table.columns
                                                  if str(c).startswith("size.")},
        "tune_params_keys": [c[7:] for c in config],
        "configurations": [{c[7:]: _value(r[c]) for c in config} for _, r in table.iterrows()],
        "predicted_time_ms": [None if not np.isfinite(v) else float(v) for v in times.astype(float)],
    }
    if "out_of_domain" in table.columns:
        doc["out_of_domain"] = [bool(v) for v in table["out_of_domain"]]
    doc.update(meta or {})
    return doc


def write_picks_table(table: pd.DataFrame, path: str | Path, meta: Mapping[str, Any] | None = None) -> Path:
    """Write picks (sweep rows with prediction columns) by suffix: ``.json`` (Kernel Tuner configurations,
    with ``meta`` added), ``.csv`` or ``.parquet`` (rows to measure, :func:`picks_rows`). Written atomically."""
    from hybridperf.files import atomic_write, atomic_write_text

    path = check_picks_path(path)
    if path.suffix == ".json":
        return atomic_write_text(path, json.dumps(picks_document(table, meta), indent=1) + "\n")
    rows = picks_rows(table)
    if path.suffix == ".parquet":
        return atomic_write(path, lambda tmp: rows.to_parquet(tmp, index=False))
    return atomic_write(path, lambda tmp: rows.to_csv(tmp, index=False))
