"""Rows of a recording as sweep-table records, and the resumable, atomically rewritten sweep file."""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from hybridperf.errors import RecordError, SweepError
from hybridperf.record.plan import PlannedRow
from hybridperf.record.stats import TimingStats
from hybridperf.sweepfile import read_provenance, read_sweep, write_sweep

__all__ = ["make_record", "merge_provenance", "read_existing", "write_records"]


def make_record(row: PlannedRow, *, stats: TimingStats | None = None, status: str | None = None,
                reason: str = "", counters: Mapping[str, float] | None = None,
                info: Mapping[str, str] | None = None) -> dict[str, Any]:
    """One sweep row: kernel, gpu, size.*, config.*, the timing columns, status, reason,
    counter.* and info.* (docs/record.md). ``status`` defaults to ``ok`` with ``stats``, else to
    the planned row's status; failed and invalid rows keep ``time_ms`` empty."""
    status = status or ("ok" if stats is not None else row.status)
    if status not in ("ok", "failed", "invalid"):
        raise RecordError(f"status must be ok, failed or invalid, got {status!r}")
    if status == "ok" and stats is None:
        raise RecordError("an ok row needs its timing statistics")
    if status != "ok" and not (reason or row.reason):
        raise RecordError(f"a {status} row needs a reason")
    rec: dict[str, Any] = {"kernel": row.kernel, "gpu": row.gpu}
    rec.update({f"size.{k}": v for k, v in row.sizes})
    rec.update({f"config.{k}": v for k, v in row.config})
    ok = status == "ok" and stats is not None
    rec.update({
        "time_ms": stats.median_ms if ok else math.nan,
        "repeats": stats.repeats if ok else None,
        "time_std_ms": stats.std_ms if ok else math.nan,
        "time_min_ms": stats.min_ms if ok else math.nan,
        "time_max_ms": stats.max_ms if ok else math.nan,
        "status": status,
        "reason": "" if ok else " ".join((reason or row.reason).split()),
    })
    rec.update({f"counter.{k}": float(v) for k, v in (counters or {}).items()})
    rec.update({f"info.{k}": " ".join(str(v).split()) for k, v in (info or {}).items()})
    return rec


def read_existing(path: str | Path) -> pd.DataFrame | None:
    """The sweep already at ``path`` (for resuming), or None if there is no file yet.

    Raises
    ------
    RecordError
        If the file exists but is not a readable sweep; the message says to pick another output.
    """
    path = Path(path)
    if not path.exists():
        return None
    try:
        # Names were checked when the rows were written; do not reject user descriptors/specs here.
        return read_sweep(path, known_kernels=(), known_gpus=())
    except SweepError as exc:
        raise RecordError(f"cannot resume: {exc} (or choose another output file)") from None


def merge_provenance(path: str | Path, session: Mapping[str, Any]) -> dict[str, Any]:
    """The provenance stored with ``path`` (if any) plus this recording session appended to
    ``recordings``; each session says which GPU, driver, clocks, host and date produced rows."""
    path = Path(path)
    prov: dict[str, Any] = {}
    if path.exists():
        try:
            prov = dict(read_provenance(path))
        except SweepError:
            prov = {}
    recordings = list(prov.get("recordings", []))
    recordings.append(dict(session))
    prov["recordings"] = recordings
    prov.setdefault("recorder", "hybridperf.record.record_sweep (docs/record.md)")
    return prov


def write_records(path: str | Path, existing: pd.DataFrame | None, records: Sequence[Mapping[str, Any]],
                  provenance: Mapping[str, Any]) -> Path:
    """Write ``existing`` rows plus ``records`` atomically (temp file + os.replace, via
    :func:`hybridperf.sweepfile.write_sweep`); columns follow the sweep format's canonical order."""
    frames = [] if existing is None else [existing]
    if records:
        frames.append(pd.DataFrame.from_records(list(records)))
    if not frames:
        raise RecordError("nothing to write yet")
    df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    if "repeats" in df.columns:
        df["repeats"] = pd.to_numeric(df["repeats"], errors="coerce").astype("Int64")
    try:
        return write_sweep(df, path, provenance=dict(provenance))
    except SweepError as exc:
        raise RecordError(f"cannot write the sweep: {exc}") from None
