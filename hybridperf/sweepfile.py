"""Sweep files: CSV (+ provenance sidecar) and Parquet readers and writers, validated and written atomically."""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from hybridperf.errors import SweepError
from hybridperf.files import atomic_write
from hybridperf.sweep import FORMAT_VERSION, validate_sweep

__all__ = ["read_provenance", "read_rows", "read_sweep", "sweep_file_kind", "write_sweep"]

_META_FORMAT = b"hybridperf.sweep_format"
_META_PROVENANCE = b"hybridperf.provenance"
_NA_VALUES = ["", "NaN", "nan", "NA", "<NA>", "null"]


def _atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    atomic_write(path, write, error=SweepError)


def sweep_file_kind(path: Path) -> str:
    """``parquet`` or ``csv`` from the file name, or a SweepError naming the accepted endings."""
    name = path.name.lower()
    if name.endswith((".parquet", ".pq")):
        return "parquet"
    if name.endswith((".csv", ".csv.gz")):
        return "csv"
    raise SweepError(f"{path}: unknown sweep file type; use a .parquet, .csv or .csv.gz file name")


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".meta.json")


def write_sweep(df: pd.DataFrame, path: str | Path, *, provenance: dict[str, Any] | None = None) -> Path:
    """Validate the table's structure and write it atomically as Parquet (zstd) or CSV.

    Parameters
    ----------
    df : pandas.DataFrame
        A sweep table. Kernel and GPU names are not re-checked (they were checked where the data
        entered); everything else is.
    path : str or Path
        ``*.parquet`` (zstd-compressed, provenance in the key-value metadata) or ``*.csv`` /
        ``*.csv.gz`` (provenance in ``<path>.meta.json``).
    provenance : dict, optional
        JSON-serialisable provenance (source repo, commit, path, licence, units, importer,
        command). Defaults to ``df.attrs["provenance"]``.

    Returns
    -------
    Path
        The path written.
    """
    path = Path(path)
    kind = sweep_file_kind(path)
    clean = validate_sweep(df, source=str(path), check_names=False)
    prov = dict(provenance if provenance is not None else df.attrs.get("provenance", {}))
    try:
        prov_json = json.dumps(prov, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise SweepError(f"{path}: provenance is not JSON-serialisable ({exc}); "
                         "pass plain str/number/list/dict values") from None
    clean.attrs = {}
    if kind == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(clean, preserve_index=False)
        meta = dict(table.schema.metadata or {})
        meta[_META_FORMAT] = str(FORMAT_VERSION).encode()
        meta[_META_PROVENANCE] = prov_json.encode()
        table = table.replace_schema_metadata(meta)
        _atomic_write(path, lambda tmp: pq.write_table(table, tmp, compression="zstd", compression_level=9))
    else:
        compression = "gzip" if path.name.lower().endswith(".gz") else None
        _atomic_write(path, lambda tmp: clean.to_csv(tmp, index=False, compression=compression))
        side = {"sweep_format": FORMAT_VERSION, "provenance": prov}
        text = json.dumps(side, indent=2, sort_keys=True) + "\n"
        _atomic_write(_sidecar(path), lambda tmp: tmp.write_text(text))
    return path


def read_provenance(path: str | Path) -> dict[str, Any]:
    """Provenance stored with a sweep file (Parquet metadata or CSV sidecar); ``{}`` if none."""
    path = Path(path)
    try:
        if sweep_file_kind(path) == "parquet":
            import pyarrow.parquet as pq

            meta = pq.read_schema(path).metadata or {}
            raw = meta.get(_META_PROVENANCE)
            return json.loads(raw) if raw else {}
        side = _sidecar(path)
        if not side.is_file():
            return {}
        doc = json.loads(side.read_text())
    except (OSError, ValueError) as exc:
        raise SweepError(f"{path}: cannot read provenance ({str(exc).splitlines()[0][:120]}); "
                         "rewrite the file with write_sweep") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("provenance", {}), dict):
        raise SweepError(f"{_sidecar(path)}: expected {{'sweep_format': 1, 'provenance': {{...}}}}; "
                         "rewrite it with write_sweep")
    return doc.get("provenance", {})


def _read_table(path: Path) -> pd.DataFrame:
    kind = sweep_file_kind(path)
    if not path.is_file():
        raise SweepError(f"{path}: no such file; check the path")
    try:
        if kind == "parquet":
            import pyarrow.parquet as pq

            return pq.read_table(path).to_pandas()
        return pd.read_csv(path, keep_default_na=False, na_values=_NA_VALUES, low_memory=False)
    except pd.errors.EmptyDataError:
        raise SweepError(f"{path}: the file is empty; write a header row and data rows") from None
    except (OSError, ValueError, EOFError, pd.errors.ParserError) as exc:
        msg = " ".join(str(exc).split())[:160]
        raise SweepError(f"{path}: cannot parse as {kind} ({msg}); re-export the file") from None


def read_rows(path: str | Path) -> pd.DataFrame:
    """Rows to predict: a sweep file, or a CSV/Parquet table of kernel, gpu, size.* and config.*
    columns without measured times."""
    path = Path(path)
    try:
        return read_sweep(path)
    except SweepError:
        df = _read_table(path)
        if "time_ms" in df.columns and "status" in df.columns:
            raise  # a sweep with a problem: report it as such
        missing = [c for c in ("kernel", "gpu") if c not in df.columns]
        if missing:
            raise SweepError(f"{path}: missing column {missing[0]!r}; rows to predict need kernel, gpu, size.* and "
                             "config.* columns") from None
        return df


def read_sweep(path: str | Path, *, known_kernels: Iterable[str] | None = None,
               known_gpus: Iterable[str] | None = None) -> pd.DataFrame:
    """Read a sweep file (Parquet or CSV), validate it, and attach its provenance.

    Parameters
    ----------
    path : str or Path
        ``*.parquet``, ``*.csv`` or ``*.csv.gz``.
    known_kernels, known_gpus : iterable of str, optional
        Passed to :func:`validate_sweep`.

    Returns
    -------
    pandas.DataFrame
        The validated table; ``df.attrs["provenance"]`` holds the stored provenance.
    """
    path = Path(path)
    df = _read_table(path)
    prov = read_provenance(path)
    out = validate_sweep(df, source=str(path), known_kernels=known_kernels, known_gpus=known_gpus)
    out.attrs["provenance"] = prov
    return out


