"""Importers: recorded runs in other tools' formats to validated sweep tables (and back to Kernel Tuner)."""
from __future__ import annotations

import inspect
import json
import math
import zlib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from hybridperf.devices import match_device
from hybridperf.errors import HybridperfError, SweepError
from hybridperf.files import file_sha256
from hybridperf.importers.aiwc import read_aiwc
from hybridperf.importers.kernel_tuner import export_kernel_tuner, read_kernel_tuner
from hybridperf.importers.ktt import read_ktt
from hybridperf.importers.neusight import read_neusight
from hybridperf.importers.plain_csv import read_csv_sweep
from hybridperf.importers.uci_sgemm import read_uci_sgemm
from hybridperf.rowcheck import drop_bad_rows
from hybridperf.sweep import known_names, validate_sweep
from hybridperf.sweepfile import sweep_file_kind, write_sweep

__all__ = [
    "FORMATS",
    "export_kernel_tuner",
    "import_sweep",
    "import_to_file",
    "read_aiwc",
    "read_csv_sweep",
    "read_kernel_tuner",
    "read_ktt",
    "read_neusight",
    "read_uci_sgemm",
]

FORMATS: dict[str, Callable[..., pd.DataFrame]] = {
    "aiwc": read_aiwc,
    "csv": read_csv_sweep,
    "kernel-tuner": read_kernel_tuner,
    "ktt": read_ktt,
    "neusight": read_neusight,
    "uci-sgemm": read_uci_sgemm,
}
# Errors a malformed file can provoke deep inside a parser; reported as one-line SweepErrors.
_PARSE_ERRORS = (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError,
                 RecursionError, UnicodeError, OSError, EOFError, zlib.error)


# Options given as text (e.g. from the command line) are parsed by kind.
_LIST_OPTIONS = frozenset({"ops", "devices", "drop", "size_names"})
_DICT_OPTIONS = frozenset({"sizes", "mapping"})


def _coerce(name: str, value: Any) -> Any:
    """Parse a text option: lists 'a,b', dicts 'K=4096,M=2048', booleans 'true'/'false'."""
    if not isinstance(value, str):
        return value
    if name == "progress":
        flag = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}.get(value.lower())
        if flag is None:
            raise SweepError(f"option progress={value!r}: use true or false")
        return flag
    if name in _LIST_OPTIONS:
        return [v.strip() for v in value.split(",") if v.strip()]
    if name in _DICT_OPTIONS:
        return _pairs(name, value)
    return value


def _pairs(name: str, value: str) -> dict[str, Any]:
    """A dict option's text 'K=4096,M=2048' (sizes: numbers >= 0; mapping: column names), each name once."""
    pairs = [item.partition("=") for item in value.split(",") if item.strip()]
    if not pairs or any(not sep or not k.strip() for k, sep, _ in pairs):
        raise SweepError(f"option {name}={value!r}: write NAME=VALUE pairs separated by commas")
    keys = [k.strip() for k, _, _ in pairs]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise SweepError(f"option {name}={value!r} names {twice[0]!r} twice; give each once")
    if name == "mapping":
        return {k.strip(): v.strip() for k, _, v in pairs}
    try:
        sizes = {k.strip(): float(v) for k, _, v in pairs}
    except ValueError:
        raise SweepError(f"option sizes={value!r}: every size needs a number, e.g. K=4096") from None
    bad = [k for k, v in sizes.items() if not (math.isfinite(v) and v >= 0)]
    if bad:
        raise SweepError(f"option sizes={value!r}: size {bad[0]} must be a finite number >= 0, e.g. K=4096")
    return sizes


def _names_option(value: Iterable[str] | str | None) -> list[str] | None:
    """``known_kernels`` / ``known_gpus`` as a list: text (the command line's ``--option known_gpus=A,B``) is
    split at commas, never into characters."""
    if value is None:
        return None
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value]


def _descriptor_option(options: dict[str, Any], allowed: list[str]) -> dict[str, Any] | None:
    """``kernel=FILE.toml``: the rows are named after the descriptor (registered for this process), and a
    Kernel Tuner cache's problem_size takes its size names; returns the descriptor's record for the
    provenance (None when ``kernel`` is a name)."""
    text = options.get("kernel")
    if not isinstance(text, str) or not (text.endswith(".toml") or Path(text).is_file()):
        return None
    from hybridperf.kernel import register_kernel

    desc = register_kernel(text)
    options["kernel"] = desc.name
    if "size_names" in allowed and "size_names" not in options:
        options["size_names"] = list(desc.size_names)
    return {"name": desc.name, "path": str(text), "sha256": desc.sha256}


def _check_size_option(rows: pd.DataFrame, sizes: Mapping[str, float] | None, source: str | Path) -> None:
    """A SweepError where ``sizes=`` names a size that a kernel of the rows with a descriptor has not (its column
    would be carried along and read by nothing: the kernel kept its default size unsaid)."""
    from hybridperf.kernel import load_kernel

    for name in sorted(rows["kernel"].astype(str).unique()) if sizes else ():
        try:
            desc = load_kernel(name)
        except HybridperfError:
            continue  # no descriptor yet: its sizes are whatever the user names
        unknown = [k for k in sizes if k not in desc.size_names]  # type: ignore[union-attr]
        if unknown:
            raise SweepError(f"{source}: sizes= names {unknown[0]!r}, no size of kernel {name} (its sizes: "
                             f"{', '.join(desc.size_names) or 'none'}); drop it or give the kernel's own")


def import_sweep(source: str | Path, fmt: str, *, provenance: dict[str, Any] | None = None,
                 known_kernels: Iterable[str] | None = None, known_gpus: Iterable[str] | None = None,
                 strict: bool = False, **options: Any) -> pd.DataFrame:
    """Read recorded runs in format ``fmt`` and return a validated sweep table.

    Parameters
    ----------
    source : str or Path
        The file (or, for ``neusight``, a folder) to import.
    fmt : str
        One of :data:`FORMATS`: ``kernel-tuner``, ``ktt``, ``uci-sgemm``, ``neusight``, ``aiwc``, ``csv``.
    provenance : dict, optional
        Extra provenance (source repo, commit, licence, command) merged over what the importer
        records (importer, options, source path and sha256, units, source device/kernel names).
    known_kernels : iterable of str, optional
        Accepted kernel names. Default: the shipped descriptors plus the names the importer
        assigns by its documented convention (so importing never blocks on naming).
    known_gpus : iterable of str, optional
        GPU names accepted besides the shipped spec stems: pass the stems of GPUs without a spec to
        import their runs (text is split at commas: ``--option known_gpus=A,B``).
    strict : bool
        Stop at rows whose parameters break their kernel's descriptor (a value it does not list, out
        of bounds) instead of leaving them out with a warning that counts them by reason. Rows of a
        kernel without a descriptor are kept as they are.
    **options
        Passed to the format's reader (see ``hybridperf.importers.<format>``), e.g.
        ``kernel=``, ``gpu=``, ``sizes=``, ``mapping=``, ``time_unit=``, ``progress=``. ``kernel`` may
        be a descriptor file: rows carry its name (and a Kernel Tuner cache its size names).

    Returns
    -------
    pandas.DataFrame
        The validated sweep; ``df.attrs["provenance"]`` holds the provenance.

    Raises
    ------
    SweepError
        For an unknown format or option, and for any malformed input (one line naming the file,
        the field or column, and a fix).
    """
    reader = FORMATS.get(fmt)
    if reader is None:
        raise SweepError(f"unknown import format {fmt!r}; use one of {', '.join(FORMATS)}")
    allowed = [p for p in inspect.signature(reader).parameters if p != "source"]
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise SweepError(f"unknown option {unknown[0]!r} for format {fmt!r}; allowed: {', '.join(allowed)}")
    options = {k: _coerce(k, v) for k, v in options.items()}
    known_kernels, known_gpus = _names_option(known_kernels), _names_option(known_gpus)
    descriptor = _descriptor_option(options, allowed)
    try:
        df = reader(source, **options)
    except HybridperfError:
        raise
    except _PARSE_ERRORS as exc:
        msg = " ".join(str(exc).split())[:160]
        raise SweepError(f"{source}: cannot read as {fmt} ({type(exc).__name__}: {msg}); "
                         "check the file and the format name") from None
    prov = dict(df.attrs.get("provenance", {}))
    kernels = None if known_kernels is None else set(known_kernels)
    if kernels is None:
        kernels = (known_names("kernel") or set()) | set(df["kernel"].astype("str").unique())
    gpus = (known_names("gpu") or set()) | set(known_gpus or ())
    if gpus:
        devices = prov.get("source_devices", {})
        for stem in sorted(set(df["gpu"].astype("str").unique()) - gpus):
            n = int((df["gpu"] == stem).sum())
            device = devices.get(stem, stem)
            match = match_device(str(device))
            why = match.reason if match.listed else (
                "write a spec (docs/gpu-spec-format.md) and put its folder on $HYBRIDPERF_GPU_PATH, pass "
                "gpu=<spec name> if it is the same part")
            tail = "" if "known_gpus" in why else f"; to import its rows without a spec pass known_gpus={stem}"
            raise SweepError(f"{source}: device {device!r} ({n} rows) has no spec: {why}{tail}")
    out = validate_sweep(df, source=str(source), known_kernels=kernels, known_gpus=gpus or None)
    out = drop_bad_rows(out, strict=strict, what=f"rows of {source}", names=False).reset_index(drop=True)
    _check_size_option(out, options.get("sizes"), source)
    if descriptor is not None:
        prov["descriptor"] = descriptor
    from hybridperf import __version__

    path = Path(source)
    without = sorted(set(out["gpu"].astype("str").unique()) - (known_names("gpu") or set()))
    if without:
        prov["gpus_without_spec"] = without
    prov.update({
        "importer": fmt,
        "importer_options": json.loads(json.dumps(options, default=str)),
        "source_path": str(source),
        "source_sha256": file_sha256(path) if path.is_file() else None,
        "hybridperf_version": __version__,
    })
    prov.update(provenance or {})
    out.attrs["provenance"] = prov
    return out


def import_to_file(source: str | Path, fmt: str, out_path: str | Path, *,
                   provenance: dict[str, Any] | None = None, known_kernels: Iterable[str] | None = None,
                   known_gpus: Iterable[str] | None = None, strict: bool = False, **options: Any) -> pd.DataFrame:
    """Import ``source`` and write the sweep to ``out_path`` atomically (Parquet or CSV + sidecar).

    Parameters are those of :func:`import_sweep`; ``out_path`` ends in ``.parquet``, ``.csv`` or
    ``.csv.gz``. Nothing is written unless the whole import validates, and a failed write never
    leaves a partial file.

    Returns
    -------
    pandas.DataFrame
        The sweep written (for a summary, see :func:`hybridperf.sweep.summarize_sweep`).
    """
    out_path = Path(out_path)
    sweep_file_kind(out_path)  # fail on a bad output name before the (possibly long) import
    if not out_path.parent.is_dir():
        raise SweepError(f"{out_path}: directory {str(out_path.parent)!r} does not exist; create it first")
    from hybridperf.progress import task

    with task(f"import {Path(source).name} ({fmt})"):
        df = import_sweep(source, fmt, provenance=provenance, known_kernels=known_kernels,
                          known_gpus=known_gpus, strict=strict, **options)
    with task(f"write {out_path.name} ({len(df)} rows)"):
        write_sweep(df, out_path, provenance=df.attrs["provenance"])
    return df
