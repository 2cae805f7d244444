"""The UCI 'SGEMM GPU kernel performance' archive (CLTune gemm_fast on a GTX 680) to a sweep."""
from __future__ import annotations

import io
import re
import warnings
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hybridperf.errors import HybridperfError, LimitError, SweepError
from hybridperf.importers._common import (
    first_non_numeric,
    identity_columns,
    make_provenance,
    read_bytes,
    read_csv,
    require_columns,
    resolve_gpu,
    size_columns,
    time_factor,
)
from hybridperf.inputs import read_limited
from hybridperf.limits import max_input_bytes, mib

__all__ = ["PARAMETERS", "read_uci_sgemm"]

PARAMETERS = ("MWG", "NWG", "KWG", "MDIMC", "NDIMC", "MDIMA", "NDIMB", "KWI", "VWM", "VWN",
              "STRM", "STRN", "SA", "SB")
_RUN = re.compile(r"^Run\s*(\d+)\s*\(([^)]*)\)$")


def _member(zf: zipfile.ZipFile, name: str, source: str) -> bytes:
    """One member of the archive, decompressed in blocks within the input size limit (a zip bomb stops there)."""
    limit = max_input_bytes()
    if zf.getinfo(name).file_size > limit:
        raise LimitError(f"{source}: {name} unpacks to {mib(zf.getinfo(name).file_size)}, over the {mib(limit)} "
                         "limit; unpack a smaller file or set HYBRIDPERF_MAX_INPUT_MB to raise the limit")
    with zf.open(name) as fh:  # the declared size can lie: the read is capped as well
        return read_limited(fh, limit, f"{source}: {name}")


def _table(source: str) -> pd.DataFrame:
    raw = read_bytes(source)
    if raw[:4] == b"PK\x03\x04":
        try:
            with zipfile.ZipFile(io.BytesIO(raw)) as zf:
                members = [m for m in zf.namelist() if m.lower().endswith(".csv") and not m.startswith("__MACOSX")]
                if not members:
                    raise SweepError(f"{source}: the zip archive holds no .csv file; expected sgemm_product.csv")
                raw = _member(zf, min(members, key=lambda m: "sgemm_product" not in m), source)
        except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
            if isinstance(exc, HybridperfError):
                raise
            raise SweepError(f"{source}: corrupt zip archive ({exc}); re-download it") from None
    return read_csv(source, expected="a header and 241,600 rows", raw=raw)


def read_uci_sgemm(source: str | Path, *, gpu: str = "gtx680", kernel: str = "clblast-xgemm",
                   sizes: dict[str, float] | None = None) -> pd.DataFrame:
    """Read ``sgemm_product_dataset.zip`` (or the CSV inside it) into sweep rows.

    Parameters
    ----------
    source : str or Path
        The UCI zip archive or ``sgemm_product.csv``.
    gpu : str
        GPU the archive was recorded on (the archive's Readme: GeForce GTX 680).
    kernel : str
        Kernel name (the CLTune gemm_fast kernel has CLBlast Xgemm's 14 parameters).
    sizes : dict, optional
        Problem size; default ``{"M": 2048, "N": 2048, "K": 2048}`` (the Readme).

    Returns
    -------
    pandas.DataFrame
        One row per configuration: ``time_ms`` is the median of the runs (``Run1 (ms)``..), with
        their count, sample standard deviation, min and max. Rows whose runs are all missing or
        non-positive become ``failed``. Not yet validated.
    """
    source = str(source)
    table = _table(source)
    runs = {c: _RUN.match(str(c).strip()) for c in table.columns}
    run_cols = [c for c, m in runs.items() if m]
    params = [c for c, m in runs.items() if not m]
    if not run_cols:
        raise SweepError(f"{source}: no 'RunN (unit)' columns (have {', '.join(map(str, table.columns[:6]))}...); "
                         "expected the UCI SGEMM layout")
    require_columns(table, PARAMETERS, source, f"expected {', '.join(PARAMETERS)}", what="parameter column")
    factors = {time_factor(runs[c].group(2), source) for c in run_cols}  # type: ignore[union-attr]
    if len(factors) != 1:
        raise SweepError(f"{source}: the run columns use different time units; convert them to one unit first")
    bad = first_non_numeric(table, params + run_cols)
    if bad is not None:
        raise SweepError(f"{source}: non-numeric values in column {bad[0]!r} ({bad[1]} rows); fix the file")
    t = table[run_cols].to_numpy(dtype="float64") * factors.pop()
    n_bad = int((~(t > 0) & ~np.isnan(t)).sum())
    if n_bad:
        warnings.warn(f"{source}: {n_bad} run times <= 0 or not finite left out of the medians and repeat counts",
                      UserWarning, stacklevel=2)
    t[~(t > 0) | ~np.isfinite(t)] = np.nan
    n_ok = (~np.isnan(t)).sum(axis=1)
    ok = n_ok > 0
    with warnings.catch_warnings():  # all-NaN rows are expected for failed configs
        warnings.simplefilter("ignore", RuntimeWarning)
        median = np.nanmedian(t, axis=1)
        std = np.where(n_ok > 1, np.nanstd(t, axis=1, ddof=1), np.nan)
        lo, hi = np.nanmin(t, axis=1), np.nanmax(t, axis=1)
    n = len(table)
    sizes = {"M": 2048.0, "N": 2048.0, "K": 2048.0} if sizes is None else sizes
    gpu_stem = resolve_gpu(gpu, source)
    data: dict[str, Any] = identity_columns(kernel, gpu_stem, n)
    data.update(size_columns(sizes, n))
    data.update({f"config.{p}": table[p].to_numpy() for p in params})
    data.update(time_ms=median, repeats=pd.array(np.where(ok, n_ok, 0), dtype="Int64"), time_std_ms=std,
                time_min_ms=lo, time_max_ms=hi,
                status=np.where(ok, "ok", "failed"), reason=np.where(ok, "", "no valid run recorded"))
    df = pd.DataFrame(data)
    df.loc[~ok, "repeats"] = pd.NA
    df["status"], df["reason"] = df["status"].astype("str"), df["reason"].astype("str")
    df.attrs["provenance"] = make_provenance(
        {gpu_stem: "NVIDIA GeForce GTX 680"}, {"time_ms": "ms (column headers 'RunN (ms)'); median of the runs"},
        kernels={kernel: "gemm_fast (CLTune)"},
        notes=[f"{int((~ok).sum())} rows without a valid run"] if (~ok).any() else [])
    return df
