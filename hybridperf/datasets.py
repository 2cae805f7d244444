"""The real recorded sweeps shipped in datasets/: discovery, loading and a summary table."""
from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from hybridperf.errors import HybridperfError, SweepError
from hybridperf.files import file_sha256
from hybridperf.sweep import known_names, noise_floor, summarize_sweep
from hybridperf.sweepfile import read_provenance, read_sweep

__all__ = ["DATA_FILE_NAMES", "DatasetInfo", "datasets_dir", "describe_datasets", "list_datasets", "load_dataset",
           "load_sources", "select_runs"]

# Data file names looked for in a dataset folder, in order; else the folder's only .parquet/.csv.
DATA_FILE_NAMES = ("sweep.parquet", "sweep.csv", "sweep.csv.gz")
_LICENCE = re.compile(r"licen[cs]e\W*[:=]\s*(.+)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class DatasetInfo:
    """One dataset folder: a sweep file plus a README.md with its provenance and licence."""

    name: str
    path: Path
    data_path: Path
    readme_path: Path
    title: str
    licence: str
    data_bytes: int


def datasets_dir() -> Path:
    """Folder holding the datasets: ``$HYBRIDPERF_DATASETS``, else ``datasets/`` of the source checkout."""
    env = os.environ.get("HYBRIDPERF_DATASETS")
    return Path(env) if env else Path(__file__).resolve().parents[1] / "datasets"


def _data_file(folder: Path) -> Path | None:
    for name in DATA_FILE_NAMES:
        if (folder / name).is_file():
            return folder / name
    found = [p for p in folder.iterdir() if p.is_file() and p.name.lower().endswith((".parquet", ".csv", ".csv.gz"))]
    return found[0] if len(found) == 1 else None


def _readme_fields(readme: Path, data: Path) -> tuple[str, str]:
    text = readme.read_text(encoding="utf-8", errors="replace")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    title = lines[0].lstrip("#").strip() if lines else readme.parent.name
    licence = ""
    try:
        licence = str(read_provenance(data).get("licence", ""))
    except SweepError:
        licence = ""
    if not licence:
        m = next((m for m in map(_LICENCE.search, lines) if m), None)
        licence = m.group(1).strip(" *") if m else "not stated"
    return title, licence


def list_datasets(root: str | Path | None = None) -> list[DatasetInfo]:
    """Every folder below ``root`` (default :func:`datasets_dir`) with a sweep file and a README.md.

    Returns
    -------
    list of DatasetInfo
        Sorted by name; an empty list if the folder does not exist.
    """
    root = Path(root) if root is not None else datasets_dir()
    if not root.is_dir():
        return []
    out = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        readme, data = folder / "README.md", _data_file(folder)
        if not readme.is_file() or data is None:
            continue
        title, licence = _readme_fields(readme, data)
        out.append(DatasetInfo(name=folder.name, path=folder, data_path=data, readme_path=readme,
                               title=title, licence=licence, data_bytes=data.stat().st_size))
    return out


def _info(name: str, root: str | Path | None) -> DatasetInfo:
    sets = list_datasets(root)
    for info in sets:
        if info.name == name:
            return info
    names = ", ".join(i.name for i in sets) or "none found"
    raise SweepError(f"unknown dataset {name!r} in {Path(root) if root else datasets_dir()}; available: {names}")


def load_dataset(name: str, *, root: str | Path | None = None) -> pd.DataFrame:
    """Load a shipped dataset by folder name, validated.

    Kernel and GPU names are checked against the shipped descriptors and specs plus the names
    the dataset declares in its provenance (``kernels``, ``gpus``): a set may hold GPUs that have
    no spec yet (listed in ``gpus_without_spec`` and in its README).

    Parameters
    ----------
    name : str
        Folder name, e.g. ``"uci-sgemm-gtx680"`` (see :func:`list_datasets`).
    root : str or Path, optional
        Datasets folder (default :func:`datasets_dir`).

    Returns
    -------
    pandas.DataFrame
        The sweep; ``df.attrs["provenance"]`` holds the stored provenance.
    """
    info = _info(name, root)
    prov = read_provenance(info.data_path)
    kernels = (known_names("kernel") or set()) | set(prov.get("kernels", []))
    gpus = (known_names("gpu") or set()) | set(prov.get("gpus", []))
    return read_sweep(info.data_path, known_kernels=kernels or None, known_gpus=gpus or None)


def load_sources(sources: Sequence[str | Path], *, root: str | Path | None = None,
                 check_names: bool = True, unique: bool = False) -> tuple[pd.DataFrame, dict[str, str]]:
    """Sweeps named by file path or shipped dataset name, concatenated, and the sha256 of each source
    (keys: the path, or ``dataset:NAME``) for a model's provenance. ``check_names=False`` reads files
    whose kernels have no descriptor yet (e.g. to write one from them). ``unique``: a configuration in two
    sources is a SweepError naming both (what training refuses, one row per configuration)."""
    from hybridperf.progress import track

    frames, hashes = [], {}
    for src in track(list(sources), "load " + ", ".join(Path(str(s)).name for s in sources)[:60]):
        if Path(src).is_file():
            frames.append(read_sweep(src, check_names=check_names))
            hashes[str(src)] = file_sha256(src)
            continue
        known = {d.name: d for d in list_datasets(root)}
        if str(src) not in known:
            raise SweepError(f"{str(src)!r} is neither a sweep file nor a shipped dataset; run 'hybridperf datasets' "
                             "for the names or check the path")
        frames.append(load_dataset(str(src), root=root))
        hashes[f"dataset:{src}"] = file_sha256(known[str(src)].data_path)
    if not frames:
        raise SweepError("give at least one sweep file or dataset name (see 'hybridperf datasets')")
    if unique and len(frames) > 1:
        _check_across(frames, [str(s) for s in sources])
    return pd.concat(frames, ignore_index=True), hashes


def _check_across(frames: list[pd.DataFrame], names: list[str]) -> None:
    """A SweepError when two of ``frames`` (named ``names``) hold the same configuration."""
    from hybridperf.sweep import configuration_key

    whole = pd.concat([f.assign(_source=i) for i, f in enumerate(frames)], ignore_index=True)
    key = configuration_key(whole)
    seen = whole.drop_duplicates(subset=[*key, "_source"])  # repeats within one file are that file's own error
    both = seen[seen.duplicated(subset=key, keep=False)]
    if both.empty:
        return
    first = both.groupby(key, dropna=False, sort=False)["_source"].apply(lambda s: tuple(sorted(set(s)))).iloc[0]
    n = len(both.drop_duplicates(subset=key))  # configurations, each counted once however many sources hold it
    example = both.iloc[0]
    shown = ", ".join(f"{c}={example[c]:g}" if isinstance(example[c], float) else f"{c}={example[c]}"
                      for c in key if pd.notna(example[c]))
    raise SweepError(f"{names[first[0]]} and {names[first[1]]} hold the same configuration ({shown}); "
                     f"{n} configuration{'s' if n != 1 else ''} appear in more than one source; training takes one "
                     "row per configuration: drop the repeats from one source, or merge them into one row (time_ms "
                     "= median, repeats = count)")


def select_runs(data: pd.DataFrame, *, kernels: Sequence[str] | None = None,
                gpus: Sequence[str] | None = None) -> pd.DataFrame:
    """The rows of ``data`` of the given kernels (names, aliases or descriptor files) and GPUs (names, aliases
    or spec files); a SweepError naming what the data holds when a filter matches no row."""
    from hybridperf.hardware import load_gpu, normalize_name
    from hybridperf.kernel import load_kernel

    out = data
    for values, col, what in ((kernels, "kernel", "kernel"), (gpus, "gpu", "GPU")):
        if not values:
            continue
        have = sorted(map(str, out[col].unique()))
        wanted = set()
        for v in values:
            wanted.add(str(v))
            with contextlib.suppress(HybridperfError):
                wanted.add(load_kernel(v).name if col == "kernel" else load_gpu(v).key)
            if col == "gpu":  # GPUs without a spec: their stem, however the name is written
                wanted |= {h for h in have if normalize_name(h) == normalize_name(str(v))}
        out = out[out[col].astype(str).isin(wanted)]
        if out.empty:
            raise SweepError(f"no runs of {what} {', '.join(map(str, values))} in the data; it holds "
                             f"{', '.join(have[:8])}{', ...' if len(have) > 8 else ''}")
    return out


def _ranges(ranges: dict[str, tuple[float, float, int]]) -> str:
    parts = []
    for k, (lo, hi, n) in ranges.items():
        parts.append(f"{k} ({n} values)" if pd.isna(lo) else f"{k}={lo:g}" if lo == hi else f"{k}={lo:g}..{hi:g}")
    return "; ".join(parts)


def describe_datasets(root: str | Path | None = None) -> list[dict[str, Any]]:
    """One row per dataset for a table: counts, GPUs, kernels, ranges, noise floor, licence.

    Returns
    -------
    list of dict
        Keys: ``name``, ``rows``, ``ok``, ``failed``, ``invalid``, ``gpus``, ``kernels``,
        ``sizes`` and ``configs`` (ranges as text), ``noise_cv_median``, ``noise_cv_p95``,
        ``noise_configs`` (see :func:`hybridperf.sweep.noise_floor`), ``licence``, ``data_bytes``.
    """
    rows = []
    for info in list_datasets(root):
        df = load_dataset(info.name, root=root)
        s, noise = summarize_sweep(df), noise_floor(df)
        rows.append({
            "name": info.name, "rows": s.rows, "ok": s.ok, "failed": s.failed, "invalid": s.invalid,
            "gpus": ", ".join(s.gpus), "kernels": ", ".join(s.kernels) if len(s.kernels) <= 4 else
            f"{len(s.kernels)} kernels ({', '.join(s.kernels[:3])}, ...)",
            "sizes": _ranges(s.sizes),
            "configs": f"{len(s.configs)} parameters" if len(s.configs) > 4 else _ranges(s.configs),
            "noise_cv_median": noise["cv_median"], "noise_cv_p95": noise["cv_p95"], "noise_configs": noise["configs"],
            "licence": info.licence, "data_bytes": info.data_bytes, "data_mb": info.data_bytes / 1e6,
        })
    return rows
