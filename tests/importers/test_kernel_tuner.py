"""Kernel Tuner caches: committed cuts of real caches, every schema, open caches, failures, round trip."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from hybridperf.errors import SweepError
from hybridperf.importers import export_kernel_tuner, import_sweep
from hybridperf.sweep import summarize_sweep
from tests.paths import SWEEP_FIXTURES, stem


def counts(df: pd.DataFrame) -> tuple[int, int, int, int]:
    s = summarize_sweep(df)
    return s.rows, s.ok, s.failed, s.invalid


def source_counts(path) -> tuple[int, int, int, int]:
    """Rows/ok/failed/invalid counted straight from the JSON, independently of the importer."""
    text = path.read_text().rstrip()
    doc = json.loads(text[:-1] + "}}" if text.endswith(",") else text)
    kinds = []
    for e in doc["cache"].values():
        t = e.get("time", e.get(doc.get("objective", "time")))
        kinds.append("ok" if isinstance(t, (int, float)) and t < 1e20
                     else "invalid" if t == "InvalidConfig" else "failed")
    return len(kinds), kinds.count("ok"), kinds.count("failed"), kinds.count("invalid")


@pytest.mark.parametrize("name", ["kt_convolution_a100.json", "kt_gemm_rtx2080ti.json",
                                  "kt_pnpoly_rtx3060.json", "kt_expdist_a4000_open.json"])
def test_fixture_counts_match_the_source(name) -> None:
    assert counts(import_sweep(SWEEP_FIXTURES / name, "kernel-tuner")) == source_counts(SWEEP_FIXTURES / name)


def test_convolution_cut() -> None:
    df = import_sweep(SWEEP_FIXTURES / "kt_convolution_a100.json", "kernel-tuner")
    doc = json.loads((SWEEP_FIXTURES / "kt_convolution_a100.json").read_text())
    first = next(iter(doc["cache"].values()))
    assert counts(df) == (12, 8, 4, 0)
    assert set(df["kernel"]) == {"kt-convolution"} and set(df["gpu"]) == {stem("NVIDIA A100-PCIE-40GB")}
    assert df.loc[0, "time_ms"] == pytest.approx(np.median(first["times"]))
    assert df.loc[0, "repeats"] == 32 and df.loc[0, "time_std_ms"] == pytest.approx(np.std(first["times"], ddof=1))
    assert df.loc[0, "time_min_ms"] == min(first["times"]) and df.loc[0, "time_max_ms"] == max(first["times"])
    assert (df.loc[0, "size.W"], df.loc[0, "size.H"]) == (4096, 4096)
    assert [c for c in df.columns if c.startswith("config.")] == [f"config.{k}" for k in doc["tune_params_keys"]]
    failed = df[df["status"] == "failed"]
    assert (set(failed["reason"]) <= {"RuntimeFailedConfig", "CompilationFailedConfig"}
            and failed["time_ms"].isna().all())
    assert "counter.gflop_per_s" in df.columns
    prov = df.attrs["provenance"]
    assert prov["importer"] == "kernel-tuner" and len(prov["source_sha256"]) == 64
    assert prov["source_devices"] == {stem("a100"): "NVIDIA A100-PCIE-40GB"}


def test_older_schema_without_objective_and_integer_problem_size() -> None:
    gemm = import_sweep(SWEEP_FIXTURES / "kt_gemm_rtx2080ti.json", "kernel-tuner", sizes={"K": 4096})
    assert counts(gemm) == (6, 6, 0, 0) and set(gemm["kernel"]) == {"clblast-xgemm"}
    assert [c for c in gemm.columns if c.startswith("size.")] == ["size.M", "size.N", "size.K"]
    assert gemm.attrs["provenance"]["kernel_tuner"]["schema_version"] == "unversioned"
    pn = import_sweep(SWEEP_FIXTURES / "kt_pnpoly_rtx3060.json", "kernel-tuner")
    assert counts(pn) == (7, 5, 2, 0) and (pn["size.N"] == 20_000_000).all()
    named = import_sweep(SWEEP_FIXTURES / "kt_pnpoly_rtx3060.json", "kernel-tuner", size_names=["points"],
                         kernel="my-pnpoly")
    assert "size.points" in named and set(named["kernel"]) == {"my-pnpoly"}


def test_open_cache_is_closed_like_kernel_tuner_does() -> None:
    df = import_sweep(SWEEP_FIXTURES / "kt_expdist_a4000_open.json", "kernel-tuner", sizes={"M": 32768, "N": 32768})
    assert counts(df) == (5, 3, 2, 0)
    assert set(df.loc[df["status"] == "failed", "reason"]) == {"CompilationFailedConfig"}
    assert "open (unfinished) cache" in df.attrs["provenance"]["notes"][0]
    assert {"counter.num_regs", "counter.nvml_energy", "counter.temperature"} <= set(df.columns)
    assert "config.nvml_gr_clock" in df.columns


def synthetic(tmp_path, entries: dict, **head) -> object:
    doc = {"device_name": "NVIDIA RTX A4000", "kernel_name": "k", "tune_params_keys": ["a"],
           "tune_params": {"a": [1, 2, 3, 4, 5]}, "cache": entries, **head}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(doc))
    return path


def test_sentinels_error_strings_and_missing_times(tmp_path) -> None:
    path = synthetic(tmp_path, {
        "1": {"a": 1, "time": 1e20}, "2": {"a": 2, "time": "InvalidConfig"},
        "3": {"a": 3, "time": 2.5}, "4": {"a": 4, "time": "ErrorConfig"}, "5": {"a": 5, "time": 0.0},
    })
    df = import_sweep(path, "kernel-tuner")
    assert df["status"].tolist() == ["failed", "invalid", "ok", "failed", "failed"]
    assert "1e+20" in df.loc[0, "reason"] and df.loc[3, "reason"] == "ErrorConfig"
    assert df.loc[2, "time_ms"] == 2.5 and pd.isna(df.loc[2, "repeats"]) and set(df["kernel"]) == {"kt-k"}


@pytest.mark.parametrize(("entries", "words"), [
    ({"1": {"time": 1.0}}, "lacks parameter 'a'"),
    ({"1": {"a": 1}}, "has no 'time'"),
    ({"1": {"a": 1, "time": [1]}}, "time must be a number"),
    ({"1": {"a": 1, "time": 1.0, "times": ["x"]}}, "'times' must be a list of numbers"),
    ({"1": [1, 2]}, "expected an object"),
    ({"1": {"a": {"x": 1}, "time": 1.0}}, "parameter 'a' has a value of type dict"),
])
def test_malformed_entries(tmp_path, entries, words) -> None:
    with pytest.raises(SweepError, match=words):
        import_sweep(synthetic(tmp_path, entries), "kernel-tuner")


def test_truncated_inside_an_entry(tmp_path) -> None:
    text = (SWEEP_FIXTURES / "kt_convolution_a100.json").read_text()
    (tmp_path / "t.json").write_text(text[: len(text) // 2])
    with pytest.raises(SweepError, match="not valid JSON .*delete that line"):
        import_sweep(tmp_path / "t.json", "kernel-tuner")


@pytest.mark.parametrize("name", ["kt_convolution_a100.json", "kt_expdist_a4000_open.json", "kt_pnpoly_rtx3060.json"])
def test_export_round_trip(tmp_path, name) -> None:
    df = import_sweep(SWEEP_FIXTURES / name, "kernel-tuner")
    out = export_kernel_tuner(df, tmp_path / "replay.json", timestamp="2024-01-01 00:00:00+00:00")
    doc = json.loads(out.read_text())
    src = json.loads((SWEEP_FIXTURES / name).read_text().rstrip().rstrip(",") + ("}}" if "open" in name else ""))
    # Kernel Tuner accepts a cache for replay only if these match the original run.
    for key in ("device_name", "kernel_name", "tune_params_keys"):
        assert doc[key] == src[key]
    assert list(doc["cache"]) == list(src["cache"])
    assert doc["schema_version"] == "1.0.0"
    back = import_sweep(out, "kernel-tuner")
    cols = [c for c in df.columns]
    pd.testing.assert_frame_equal(back[cols], df[cols], check_dtype=False)


def test_export_needs_one_kernel_gpu_and_size(tmp_path) -> None:
    df = import_sweep(SWEEP_FIXTURES / "kt_convolution_a100.json", "kernel-tuner")
    two = pd.concat([df, df.assign(gpu=stem("rtx-a4000"))], ignore_index=True)
    with pytest.raises(SweepError, match="2 values in 'gpu'; export one at a time"):
        export_kernel_tuner(two, tmp_path / "x.json")
    sizes = pd.concat([df, df.assign(**{"size.W": 8192})], ignore_index=True)
    with pytest.raises(SweepError, match="'size.W' has 2 values"):
        export_kernel_tuner(sizes, tmp_path / "x.json")
    holes = df.astype({"config.read_only": "float64"})
    holes.loc[0, "config.read_only"] = np.nan
    with pytest.raises(SweepError, match="missing on 1 rows"):
        export_kernel_tuner(holes, tmp_path / "x.json")
    assert list(tmp_path.iterdir()) == []


def test_export_without_repeat_columns_round_trips(tmp_path) -> None:
    # repeats and the spread columns are optional in a sweep: exporting one without them once failed (KeyError)
    from hybridperf.importers import read_kernel_tuner
    from hybridperf.sweep import validate_sweep

    df = validate_sweep(pd.DataFrame({"kernel": ["seed004-matvec"] * 2, "gpu": ["titan-v"] * 2, "size.N": [4096.0] * 2,
                                      "config.BLOCK": [128, 256], "time_ms": [0.5, 0.4], "status": ["ok", "ok"]}))
    back = read_kernel_tuner(export_kernel_tuner(df, tmp_path / "cache.json"))
    assert back["config.BLOCK"].tolist() == [128, 256] and back["time_ms"].tolist() == [0.5, 0.4]


def test_export_is_a_kernel_tuner_cache_with_times_and_mean(tmp_path) -> None:
    """time is the mean of times (Kernel Tuner's definition), times and GFLOP/s keep Kernel Tuner's names,
    the file validates against the cache schema and Kernel Tuner's own reader takes it."""
    jsonschema = pytest.importorskip("jsonschema")
    kt_util = pytest.importorskip("kernel_tuner.util")
    from tests.importers.kt_cache_schema import cache_schema

    src = json.loads((SWEEP_FIXTURES / "kt_convolution_a100.json").read_text())
    df = import_sweep(SWEEP_FIXTURES / "kt_convolution_a100.json", "kernel-tuner")
    out = export_kernel_tuner(df, tmp_path / "c.json", timestamp="2024-01-01 00:00:00+00:00")
    doc = json.loads(out.read_text())
    schema, _ = cache_schema()
    jsonschema.validate(doc, schema)
    n_times = 0
    for key, entry in src["cache"].items():
        got = doc["cache"][key]
        if isinstance(entry["time"], str):
            assert got["time"] == entry["time"] and "times" not in got
            continue
        assert got["times"] == entry["times"]
        assert got["time"] == pytest.approx(np.mean(entry["times"]), rel=1e-12)
        assert got["time"] == pytest.approx(entry["time"], rel=1e-9)  # what Kernel Tuner itself recorded
        assert got["GFLOP/s"] == pytest.approx(entry["GFLOP/s"])
        n_times += 1
    assert n_times == 8 and doc["hybridperf_time"].startswith("mean of times")
    read = kt_util.read_cache(str(out), open_cache=False)
    assert set(read["cache"]) == set(src["cache"])


def test_export_without_repeats_says_time_is_the_median(tmp_path) -> None:
    df = import_sweep(SWEEP_FIXTURES / "kt_convolution_a100.json", "kernel-tuner").drop(columns=["info.times_ms"])
    doc = json.loads(export_kernel_tuner(df, tmp_path / "c.json").read_text())
    ok = df[df["status"] == "ok"]
    assert "median time_ms on the other 8 ok entries" in doc["hybridperf_time"]
    assert sorted(e["time"] for e in doc["cache"].values() if not isinstance(e["time"], str)) == \
        sorted(ok["time_ms"].tolist())
    assert not any("times" in e for e in doc["cache"].values())


def test_a_size_the_kernel_has_not_is_refused() -> None:
    """sizes={'K': 4096} on a convolution cache added a size.K column that nothing reads; the kernel kept its
    default W and H unsaid."""
    with pytest.raises(SweepError, match=r"sizes= names 'K', no size of kernel kt-convolution \(its sizes: W, H\)"):
        import_sweep(SWEEP_FIXTURES / "kt_convolution_a100.json", "kernel-tuner", sizes={"K": 4096})
    out = import_sweep(SWEEP_FIXTURES / "kt_convolution_a100.json", "kernel-tuner", sizes={"W": 4096})
    assert (out["size.W"] == 4096).all()


def test_a_problem_size_of_other_length_than_the_kernels_sizes_is_refused(tmp_path) -> None:
    """Four values for the convolution's W and H became size.p0 .. size.p3, read by nothing."""
    doc = json.loads((SWEEP_FIXTURES / "kt_convolution_a100.json").read_text())
    doc["problem_size"] = [4096, 4096, 2, 3]
    path = tmp_path / "conv.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(SweepError, match=r"kernel convolution_kernel has 2 size names \(W, H\) but problem_size has 4"):
        import_sweep(path, "kernel-tuner")
