"""Malformed inputs (truncated, wrong types, missing fields, unknown units, empty) give a clear
HybridperfError and never a partial output file."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hybridperf.errors import HybridperfError
from hybridperf.importers import FORMATS, import_to_file
from hybridperf.sweep import validate_sweep
from hybridperf.sweepfile import read_sweep
from tests.paths import SWEEP_FIXTURES, TITANV_SWEEP

FUZZ = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
AIWC_GPUS = ["geforce-gtx-1080", "tesla-k20c", "core-i7-6700k"]
OPTIONS: dict[str, dict[str, Any]] = {
    "aiwc": {"known_gpus": AIWC_GPUS},
    "csv": {"mapping": {"Latency": "time_ms", "B": "size.B", "H": "size.H"}, "kernel": "k", "gpu": "tesla-p4",
            "drop": []},
}
SOURCES = {
    "kernel-tuner": SWEEP_FIXTURES / "kt_convolution_a100.json",
    "ktt": SWEEP_FIXTURES / "ktt_coulomb_gtx1070.json",
    "uci-sgemm": SWEEP_FIXTURES / "uci_sgemm_head.csv",
    "neusight": SWEEP_FIXTURES / "neusight" / "ln" / "p2.1.0" / "Tesla P4.csv",
    "aiwc": SWEEP_FIXTURES / "aiwc_full_dat_cut.csv",
}
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**21) | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6)


def check(data: bytes, fmt: str, name: str, **options: Any) -> None:
    """Import must either succeed with a valid sweep or raise one-line HybridperfError; no stray files."""
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / name, Path(tmp) / "out.parquet"
        src.write_bytes(data)
        try:
            df = import_to_file(src, fmt, out, **{**OPTIONS.get(fmt, {}), **options})
        except HybridperfError as exc:
            assert "\n" not in str(exc) and str(exc)
            assert sorted(os.listdir(tmp)) == [name], "a failed import left a file behind"
        else:
            validate_sweep(df, known_kernels=set(df["kernel"]), known_gpus=set(df["gpu"]))
            assert sorted(os.listdir(tmp)) == sorted([name, "out.parquet"])


@pytest.mark.parametrize("fmt", sorted(SOURCES))
@FUZZ
@given(cut=st.floats(0, 1))
def test_truncated_files(fmt, cut) -> None:
    data = SOURCES[fmt].read_bytes()
    check(data[: int(len(data) * cut)], fmt, SOURCES[fmt].name)


@pytest.mark.parametrize("fmt", sorted(SOURCES))
@FUZZ
@given(pos=st.floats(0, 1), junk=st.binary(min_size=1, max_size=12))
def test_corrupted_bytes(fmt, pos, junk) -> None:
    data = SOURCES[fmt].read_bytes()
    i = int(len(data) * pos)
    check(data[:i] + junk + data[i + len(junk):], fmt, SOURCES[fmt].name)


@FUZZ
@given(entry=st.integers(0, 11), key=st.sampled_from(["time", "times", "block_size_x", "GFLOP/s", "timestamp"]),
       value=json_values, delete=st.booleans())
def test_kernel_tuner_wrong_types_and_missing_fields(entry, key, value, delete) -> None:
    doc = json.loads(SOURCES["kernel-tuner"].read_text())
    k = list(doc["cache"])[entry]
    if delete:
        doc["cache"][k].pop(key, None)
    else:
        doc["cache"][k][key] = value
    check(json.dumps(doc).encode(), "kernel-tuner", "c.json")


@FUZZ
@given(key=st.sampled_from(["device_name", "kernel_name", "problem_size", "tune_params_keys", "cache", "objective"]),
       value=json_values, delete=st.booleans())
def test_kernel_tuner_header(key, value, delete) -> None:
    doc = json.loads(SOURCES["kernel-tuner"].read_text())
    if delete:
        doc.pop(key)
    else:
        doc[key] = value
    check(json.dumps(doc).encode(), "kernel-tuner", "c.json")


@FUZZ
@given(path=st.sampled_from([("Metadata", "TimeUnit"), ("Metadata", "Device"), ("Metadata",), ("Results",),
                             ("r", "Status"), ("r", "Configuration"), ("r", "TotalDuration"),
                             ("r", "ComputationResults"), ("c", "LocalSize"), ("c", "GlobalSize"),
                             ("c", "ProfilingData"), ("c", "CompilationData")]),
       value=json_values, delete=st.booleans(), which=st.integers(0, 11))
def test_ktt_wrong_types_and_missing_fields(path, value, delete, which) -> None:
    doc = json.loads(SOURCES["ktt"].read_text())
    res = doc["Results"][which]
    where = {"r": res, "c": res["ComputationResults"][0]}.get(path[0], doc)
    keys = path[1:] if path[0] in ("r", "c") else path
    for k in keys[:-1]:
        where = where[k]
    if delete:
        where.pop(keys[-1], None)
    else:
        where[keys[-1]] = value
    check(json.dumps(doc).encode(), "ktt", "k.json")


@pytest.mark.parametrize("fmt", ["uci-sgemm", "neusight", "aiwc", "csv"])
@FUZZ
@given(row=st.integers(0, 6), col=st.integers(0, 40),
       value=st.text(max_size=6) | st.sampled_from(["", "nan", "-1", "1e400"]))
def test_csv_cells_with_wrong_types(fmt, row, col, value) -> None:
    src = SOURCES.get(fmt, SOURCES["neusight"])
    lines = src.read_text().splitlines()
    cells = lines[1 + row].split(",")
    cells[col % len(cells)] = value.replace(",", "").replace("\n", "").replace('"', "")
    lines[1 + row] = ",".join(cells)
    check(("\n".join(lines) + "\n").encode(), fmt, src.name)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("content", [b"", b"\n", b"   ", b"\x1f\x8b\x08\x00", b"PK\x03\x04garbage", b"{}", b"[]",
                                     b"null"])
def test_empty_and_degenerate_files(fmt, content) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "in.csv"
        src.write_bytes(content)
        with pytest.raises(HybridperfError):
            import_to_file(src, fmt, Path(tmp) / "out.csv", **OPTIONS.get(fmt, {}))
        assert os.listdir(tmp) == ["in.csv"]


@FUZZ
@given(data=st.binary(max_size=200), suffix=st.sampled_from([".csv", ".parquet", ".csv.gz"]))
def test_read_sweep_on_garbage(data, suffix) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"s{suffix}"
        path.write_bytes(data)
        with pytest.raises(HybridperfError):
            read_sweep(path)


@FUZZ
@given(col=st.sampled_from(["kernel", "gpu", "size.N", "time_ms", "repeats", "status", "reason"]),
       row=st.integers(0, 77), value=st.text(max_size=5) | st.sampled_from(["", "-1", "0", "inf", "nan", "1e999"]))
def test_read_sweep_with_a_bad_cell(col, row, value) -> None:
    src = TITANV_SWEEP
    import pandas as pd

    df = pd.read_csv(src, dtype=str, keep_default_na=False)
    df.loc[row, col] = value
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.csv"
        df.to_csv(path, index=False)
        try:
            read_sweep(path)
        except HybridperfError as exc:
            assert "\n" not in str(exc) and str(path) in str(exc)
