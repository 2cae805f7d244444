"""Sweep files: CSV (+ provenance sidecar) and Parquet readers and writers, validated and written atomically."""
from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hybridperf.errors import HybridperfError, LimitError, SweepError
from hybridperf.files import atomic_write, file_sha256
from hybridperf.inputs import check_csv_table, check_input_file, check_json_size, decode_text, read_input
from hybridperf.limits import MAX_TABLE_CELLS, max_input_bytes, mib
from hybridperf.sweep import FORMAT_VERSION, validate_sweep

__all__ = ["read_provenance", "read_rows", "read_sweep", "sweep_file_kind", "write_sweep"]

_META_FORMAT = b"hybridperf.sweep_format"
_META_PROVENANCE = b"hybridperf.provenance"
_NA_VALUES = ["", "NaN", "nan", "NA", "<NA>", "null"]
_SIDECAR_BYTES = 16 << 20


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
        ``*.csv.gz`` (provenance in ``<path>.meta.json``, written after the CSV with the CSV's sha256,
    so a sidecar left from another write is detected on reading).
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
        side = {"sweep_format": FORMAT_VERSION, "csv_sha256": file_sha256(path), "provenance": prov}
        text = json.dumps(side, indent=2, sort_keys=True) + "\n"
        _atomic_write(_sidecar(path), lambda tmp: tmp.write_text(text))
    return path


def read_provenance(path: str | Path) -> dict[str, Any]:
    """Provenance stored with a sweep file (Parquet metadata or CSV sidecar); ``{}`` if none.

    A CSV sidecar that records the CSV's sha256 must match the CSV: a mismatch (the CSV was edited,
    or a write was interrupted between the CSV and its sidecar) is a SweepError naming both files.
    """
    path = Path(path)
    try:
        if sweep_file_kind(path) == "parquet":
            import pyarrow.parquet as pq

            check_input_file(path, error=SweepError, what="sweep file")
            meta = pq.read_schema(path).metadata or {}
            version = meta.get(_META_FORMAT, str(FORMAT_VERSION).encode())
            if version != str(FORMAT_VERSION).encode():
                raise SweepError(f"{path}: sweep_format {version[:20].decode(errors='replace')}, this hybridperf "
                                 f"reads {FORMAT_VERSION}; upgrade hybridperf, or rewrite the sweep with this one")
            raw = meta.get(_META_PROVENANCE)
            if raw:
                check_json_size(raw, str(path))
            return json.loads(raw) if raw else {}
        side = _sidecar(path)
        if not side.exists():
            return {}
        text = decode_text(read_input(side, error=SweepError, what="sidecar", max_bytes=_SIDECAR_BYTES,
                                      decompress=False), str(side), SweepError)
        check_json_size(text, str(side))
        doc = json.loads(text)
    except HybridperfError:
        raise
    except (OSError, ValueError, RecursionError) as exc:
        raise SweepError(f"{path}: cannot read provenance ({' '.join(str(exc).split())[:120]}); "
                         "rewrite the file with write_sweep") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("provenance", {}), dict):
        raise SweepError(f"{_sidecar(path)}: expected {{'sweep_format': 1, 'provenance': {{...}}}}; "
                         "rewrite it with write_sweep")
    if doc.get("sweep_format", FORMAT_VERSION) != FORMAT_VERSION:
        raise SweepError(f"{_sidecar(path)}: sweep_format {str(doc.get('sweep_format'))[:20]}, this hybridperf reads "
                         f"{FORMAT_VERSION}; upgrade hybridperf, or rewrite the sweep with this one")
    _check_sidecar_hash(path, doc)
    return doc.get("provenance", {})


def _check_sidecar_hash(path: Path, doc: dict[str, Any]) -> None:
    want = doc.get("csv_sha256")
    if want is None:
        return  # sidecars written before the hash was recorded
    if not isinstance(want, str) or (path.is_file() and file_sha256(path) != want):
        raise SweepError(f"{path}: its sidecar {_sidecar(path).name} describes other contents (sha256 mismatch: the "
                         "CSV was edited, or a write was interrupted); re-import or rewrite the sweep, or delete the "
                         "sidecar to use the CSV without provenance")


def _read_parquet(path: Path) -> pd.DataFrame:
    """A Parquet file's table, its size checked from the footer before any column is read."""
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path).metadata
    cells = int(meta.num_rows) * max(int(meta.num_columns), 1)
    if cells > MAX_TABLE_CELLS:
        raise LimitError(f"{path}: {meta.num_rows:,} rows x {meta.num_columns} columns, over the limit of "
                         f"{MAX_TABLE_CELLS:,} cells; split the sweep")
    unpacked = sum(int(meta.row_group(i).total_byte_size) for i in range(meta.num_row_groups))
    if unpacked > 4 * max_input_bytes():
        raise LimitError(f"{path}: {mib(unpacked)} once decompressed, over the {mib(4 * max_input_bytes())} limit; "
                         "split the sweep or set HYBRIDPERF_MAX_INPUT_MB to raise the limit")
    return pq.read_table(path).to_pandas()


def _read_table(path: Path) -> pd.DataFrame:
    kind = sweep_file_kind(path)
    check_input_file(path, error=SweepError, what="sweep file")
    try:
        if kind == "parquet":
            return _read_parquet(path)
        raw = read_input(path, error=SweepError, what="sweep file")
        check_csv_table(raw, str(path), SweepError)
        return pd.read_csv(io.BytesIO(raw), keep_default_na=False, na_values=_NA_VALUES, low_memory=False)
    except pd.errors.EmptyDataError:
        raise SweepError(f"{path}: the file is empty; write a header row and data rows") from None
    except HybridperfError:
        raise
    except (OSError, ValueError, EOFError, RecursionError, pd.errors.ParserError) as exc:
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
        return _check_rows(df, path)


def _check_rows(df: pd.DataFrame, path: Path) -> pd.DataFrame:
    """Rows to predict: at most MAX_GRID_ROWS, names given, every size and numeric config value given finite,
    sizes >= 0. An empty cell is left to the rows' check against their kernel's descriptor (rowcheck), as in a
    sweep: a column another kernel's rows fill is absent for this one, an empty size cell in a column its own rows
    fill is an invalid row, an empty config cell takes the default and says so (``defaulted``)."""
    from hybridperf.limits import MAX_GRID_ROWS
    from hybridperf.sweep import param_columns

    if len(df) == 0:
        raise SweepError(f"{path}: no rows to predict; add rows under the header")
    if len(df) > MAX_GRID_ROWS:
        raise LimitError(f"{path}: {len(df):,} rows to predict, over the limit of {MAX_GRID_ROWS:,}; split the file")
    for col in ("kernel", "gpu"):
        bad = df[col].isna() | df[col].astype("str").str.strip().eq("")
        if bad.any():
            raise SweepError(f"{path}: missing {col} name in data row {int(bad.to_numpy().argmax()) + 1}; "
                             "give every row a kernel and a gpu")
    for col in param_columns(df):
        values = df[col]
        if not pd.api.types.is_numeric_dtype(values) and col.startswith("config."):
            continue  # a categorical (string) configuration parameter
        num = pd.to_numeric(values, errors="coerce").to_numpy(dtype="float64", na_value=float("nan"))
        bad = (~np.isfinite(num) & values.notna().to_numpy()) | ((num < 0) & col.startswith("size."))
        if bad.any():
            i = int(bad.argmax())
            raise SweepError(f"{path}: column {col!r} has {str(values.iloc[i])[:30]!r} in data row {i + 1}; give every "
                             f"row a finite number{' >= 0' if col.startswith('size.') else ''}")
    return df


def read_sweep(path: str | Path, *, known_kernels: Iterable[str] | None = None,
               known_gpus: Iterable[str] | None = None, check_names: bool = True) -> pd.DataFrame:
    """Read a sweep file (Parquet or CSV), validate it, and attach its provenance.

    Parameters
    ----------
    path : str or Path
        ``*.parquet``, ``*.csv`` or ``*.csv.gz``.
    known_kernels, known_gpus : iterable of str, optional
        Passed to :func:`validate_sweep`; ``check_names=False`` skips the name checks (rows of a kernel
        that has no descriptor yet). GPUs the file's provenance lists in ``gpus_without_spec`` (the
        importer records the ones it was told to accept) are accepted besides the shipped specs.

    Returns
    -------
    pandas.DataFrame
        The validated table; ``df.attrs["provenance"]`` holds the stored provenance.
    """
    path = Path(path)
    df = _read_table(path)
    prov = read_provenance(path)
    extra = prov.get("gpus_without_spec")
    if known_gpus is None and isinstance(extra, list) and extra:
        from hybridperf.sweep import known_names

        known_gpus = (known_names("gpu") or set()) | {str(g) for g in extra}
    out = validate_sweep(df, source=str(path), known_kernels=known_kernels, known_gpus=known_gpus,
                         check_names=check_names)
    out.attrs["provenance"] = prov
    return out


