"""KTT, UCI SGEMM, NeuSight, AIWC and plain-CSV importers on committed cuts of the real files."""
from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pandas as pd
import pytest

from hybridperf.errors import SweepError
from hybridperf.importers import FORMATS, import_sweep, import_to_file
from hybridperf.importers.aiwc import GPU_DEVICES
from hybridperf.sweep import summarize_sweep
from hybridperf.sweepfile import read_sweep
from tests.paths import SWEEP_FIXTURES, stem

AIWC_GPUS = ["geforce-gtx-1080", "tesla-k20c", "core-i7-6700k"]


def test_ktt_rtx2080ti_counters_and_units() -> None:
    doc = json.loads((SWEEP_FIXTURES / "ktt_coulomb_rtx2080ti.json").read_text())
    df = import_sweep(SWEEP_FIXTURES / "ktt_coulomb_rtx2080ti.json", "ktt", sizes={"grid": 256})
    assert len(df) == 4 and (df["status"] == "ok").all() and set(df["kernel"]) == {"ktt-coulomb-sum-3d"}
    assert set(df["gpu"]) == {stem("NVIDIA GeForce RTX 2080 Ti")}
    first = doc["Results"][0]
    assert df.loc[0, "time_ms"] == pytest.approx(first["TotalDuration"] / 1000)  # microseconds -> ms
    names = [c["Name"] for c in first["ComputationResults"][0]["ProfilingData"]["Counters"]]
    assert len(names) == 33 and all(f"counter.{n}" in df.columns for n in names)
    cr = first["ComputationResults"][0]
    assert df.loc[0, "counter.threads_per_block"] == cr["LocalSize"]["X"] * cr["LocalSize"]["Y"] * cr["LocalSize"]["Z"]
    assert df.loc[0, "counter.grid_x"] == cr["GlobalSize"]["X"]  # GlobalSizeType CUDA: grid in blocks
    assert df.loc[0, "counter.registers_per_thread"] == cr["CompilationData"]["RegistersCount"]
    assert [c for c in df.columns if c.startswith("config.")] == [f"config.{c['Name']}" for c in first["Configuration"]]


def test_ktt_repeated_results_are_pooled() -> None:
    doc = json.loads((SWEEP_FIXTURES / "ktt_coulomb_gtx1070.json").read_text())
    df = import_sweep(SWEEP_FIXTURES / "ktt_coulomb_gtx1070.json", "ktt")
    configs = {tuple((c["Name"], c["Value"]) for c in r["Configuration"]) for r in doc["Results"]}
    assert len(df) == len(configs) == 9 and int(df["repeats"].sum()) == len(doc["Results"]) == 12
    twice = df[df["repeats"] == 2].iloc[0]
    assert twice["time_min_ms"] < twice["time_ms"] < twice["time_max_ms"]
    assert df["counter.inst_fp_32"].notna().sum() == 1  # one profiled configuration
    assert df.attrs["provenance"]["ktt"]["results"] == 12


def test_ktt_time_units(tmp_path) -> None:
    doc = json.loads((SWEEP_FIXTURES / "ktt_coulomb_rtx2080ti.json").read_text())
    ref = import_sweep(SWEEP_FIXTURES / "ktt_coulomb_rtx2080ti.json", "ktt")
    doc["Metadata"]["TimeUnit"] = "Nanoseconds"
    (tmp_path / "ns.json").write_text(json.dumps(doc))
    ns = import_sweep(tmp_path / "ns.json", "ktt")
    assert ns["time_ms"].to_numpy() == pytest.approx(ref["time_ms"].to_numpy() / 1000)
    doc["Metadata"]["TimeUnit"] = "Fortnights"
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    with pytest.raises(SweepError, match="unknown time unit 'Fortnights'"):
        import_sweep(tmp_path / "bad.json", "ktt")
    assert len(import_sweep(tmp_path / "bad.json", "ktt", time_unit="Microseconds")) == 4
    del doc["Metadata"]["TimeUnit"]
    (tmp_path / "none.json").write_text(json.dumps(doc))
    with pytest.raises(SweepError, match="TimeUnit is missing; pass time_unit="):
        import_sweep(tmp_path / "none.json", "ktt")


def test_ktt_failed_results(tmp_path) -> None:
    doc = json.loads((SWEEP_FIXTURES / "ktt_coulomb_rtx2080ti.json").read_text())
    doc["Results"][1]["Status"] = "CompilationFailed"
    doc["Results"][2]["Status"] = "DeviceLimitsExceeded"
    (tmp_path / "f.json").write_text(json.dumps(doc))
    df = import_sweep(tmp_path / "f.json", "ktt")
    assert df["status"].tolist() == ["ok", "failed", "invalid", "ok"]
    assert df.loc[1, "reason"] == "KTT status CompilationFailed" and pd.isna(df.loc[1, "time_ms"])


def test_uci_sgemm_csv_and_zip(tmp_path) -> None:
    raw = pd.read_csv(SWEEP_FIXTURES / "uci_sgemm_head.csv")
    df = import_sweep(SWEEP_FIXTURES / "uci_sgemm_head.csv", "uci-sgemm")
    runs = raw.filter(like="Run").to_numpy()
    assert len(df) == len(raw) == 40 and (df["status"] == "ok").all() and (df["repeats"] == 4).all()
    assert df["time_ms"].to_numpy() == pytest.approx(np.median(runs, axis=1))
    assert df["time_std_ms"].to_numpy() == pytest.approx(runs.std(axis=1, ddof=1))
    assert set(df["gpu"]) == {stem("gtx680")} and set(df["kernel"]) == {"clblast-xgemm"}
    assert ((df[["size.M", "size.N", "size.K"]] == 2048).all(axis=None)
            and len([c for c in df if c.startswith("config.")]) == 14)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("__MACOSX/._sgemm_product.csv", b"junk")
        zf.writestr("sgemm_product.csv", (SWEEP_FIXTURES / "uci_sgemm_head.csv").read_bytes())
    (tmp_path / "u.zip").write_bytes(buf.getvalue())
    pd.testing.assert_frame_equal(import_sweep(tmp_path / "u.zip", "uci-sgemm"), df)
    (tmp_path / "us.csv").write_text((SWEEP_FIXTURES / "uci_sgemm_head.csv").read_text().replace("(ms)", "(us)"))
    assert import_sweep(tmp_path / "us.csv", "uci-sgemm")["time_ms"].to_numpy() == pytest.approx(df["time_ms"] / 1000)
    (tmp_path / "h.csv").write_text((SWEEP_FIXTURES / "uci_sgemm_head.csv").read_text().replace("(ms)", "(hours)"))
    with pytest.raises(SweepError, match="unknown time unit 'hours'"):
        import_sweep(tmp_path / "h.csv", "uci-sgemm")
    (tmp_path / "m.csv").write_text(raw.drop(columns="SA").to_csv(index=False))
    with pytest.raises(SweepError, match="missing parameter column 'SA'"):
        import_sweep(tmp_path / "m.csv", "uci-sgemm")


def test_uci_rows_without_runs_are_failed_not_dropped(tmp_path) -> None:
    raw = pd.read_csv(SWEEP_FIXTURES / "uci_sgemm_head.csv")
    raw.iloc[3, 14:] = np.nan
    raw.iloc[4, 15] = -1.0
    raw.to_csv(tmp_path / "x.csv", index=False)
    df = import_sweep(tmp_path / "x.csv", "uci-sgemm")
    assert len(df) == 40 and df.loc[3, "status"] == "failed" and df.loc[4, "repeats"] == 3


def test_neusight_folder() -> None:
    with pytest.warns(UserWarning, match="merged 2 repeated measurements"):
        df = import_sweep(SWEEP_FIXTURES / "neusight", "neusight")
    s = summarize_sweep(df)
    assert (s.rows, s.ok) == (10 + 6 + 4, 20) and s.gpus == (stem("Tesla P4"),)
    assert set(df["kernel"]) == {"neusight-gemm", "neusight-ln", "neusight-conv"}
    assert set(df.loc[df["kernel"] == "neusight-gemm", "config.op"]) == {"bmm"}
    assert df.loc[df["kernel"] != "neusight-gemm", "config.op"].isna().all()
    assert {"size.B", "size.M", "size.N", "size.K", "size.H", "size.Kernel_Size", "size.Input_Channel"} <= set(df)
    ln = df[df["kernel"] == "neusight-ln"]
    assert sorted(ln["repeats"].tolist()) == [1, 1, 1, 1, 2, 2]
    raw = pd.read_csv(SWEEP_FIXTURES / "neusight" / "ln" / "p2.1.0" / "Tesla P4.csv")
    pair = raw[(raw["B"] == 116) & (raw["H"] == 328)]["Latency"]
    row = ln[(ln["size.B"] == 116) & (ln["size.H"] == 328)].iloc[0]
    assert row["time_ms"] == pytest.approx(pair.median()) and row["time_max_ms"] == pair.max()
    assert df.attrs["provenance"]["neusight"]["source_rows"] == 22
    assert "maxwell_sgemm" in df.loc[df["kernel"] == "neusight-gemm", "info.library_kernel"].iloc[0]


def test_neusight_single_file_and_ops(tmp_path) -> None:
    bmm = SWEEP_FIXTURES / "neusight" / "bmm" / "p2.1.0" / "Tesla P4.csv"
    df = import_sweep(bmm, "neusight")
    raw = pd.read_csv(bmm)
    assert len(df) == 10 and df["time_ms"].tolist() == raw["Latency"].tolist()
    assert df["counter.blocks"].tolist() == (raw["Grid x"] * raw["Grid y"] * raw["Grid z"]).tolist()
    with pytest.raises(SweepError, match="no rows for ops linear"):
        import_sweep(bmm, "neusight", ops=["linear"])
    with pytest.raises(SweepError, match="no per-GPU NeuSight files"):
        import_sweep(tmp_path, "neusight")


def test_aiwc_runs_become_configs() -> None:
    raw = pd.read_csv(SWEEP_FIXTURES / "aiwc_full_dat_cut.csv")
    with pytest.raises(SweepError, match="no spec"):
        import_sweep(SWEEP_FIXTURES / "aiwc_full_dat_cut.csv", "aiwc")
    df = import_sweep(SWEEP_FIXTURES / "aiwc_full_dat_cut.csv", "aiwc", known_gpus=AIWC_GPUS)
    groups = raw.groupby(["application", "kernel", "size", "device"])
    assert len(df) == groups.ngroups == 12 and int(df["repeats"].sum()) == len(raw)
    row = df[(df["kernel"] == "aiwc-lud-lud_diagonal") & (df["gpu"] == "tesla-k20c") & (df["size.class"] == 1)].iloc[0]
    ref = groups.get_group(("lud", "lud_diagonal", "tiny", "k20c"))["kernel_time"]
    assert row["time_ms"] == pytest.approx(ref.median() / 1000) and row["info.size_class"] == "tiny"
    assert row["counter.aiwc_total_instruction_count"] > 0
    with pytest.warns(UserWarning, match="left out 18 of 52 rows"):
        gpus = import_sweep(SWEEP_FIXTURES / "aiwc_full_dat_cut.csv", "aiwc", devices=GPU_DEVICES, known_gpus=AIWC_GPUS)
    assert len(gpus) == 8 and gpus.attrs["provenance"]["aiwc"]["rows_left_out_by_device"] == 18


def test_aiwc_unknown_size_class(tmp_path) -> None:
    raw = pd.read_csv(SWEEP_FIXTURES / "aiwc_full_dat_cut.csv")
    raw.loc[0, "size"] = "huge"
    raw.to_csv(tmp_path / "a.csv", index=False)
    with pytest.raises(SweepError, match="unknown size class 'huge'"):
        import_sweep(tmp_path / "a.csv", "aiwc", known_gpus=AIWC_GPUS)


def test_plain_csv_mapping_units_and_repeats(tmp_path) -> None:
    (tmp_path / "r.csv").write_text("n,block,time,note\n1024,128,1000,a\n1024,128,1200,a\n1024,128,1100,a\n"
                                    "2048,128,4000,b\n2048,256,,c\n")
    with pytest.raises(SweepError, match="unmapped column 'note'"):
        import_sweep(tmp_path / "r.csv", "csv", mapping={"time": "time_ms", "n": "size.N", "block": "config.BLOCK"},
                     kernel="seed004-matvec", gpu="titan-v")
    with pytest.warns(UserWarning):
        df = import_sweep(tmp_path / "r.csv", "csv",
                          mapping={"time": "time_ms", "n": "size.N", "block": "config.BLOCK"},
                          drop=["note"], time_unit="us", kernel="seed004-matvec", gpu="titan-v")
    assert len(df) == 3 and set(df["gpu"]) == {stem("titan-v")}
    first = df[(df["size.N"] == 1024)].iloc[0]
    assert (first["time_ms"], first["repeats"], first["time_min_ms"]) == (1.1, 3, 1.0)
    assert df.loc[df["config.BLOCK"] == 256, "status"].item() == "failed"


def test_plain_csv_errors(tmp_path) -> None:
    (tmp_path / "r.csv").write_text("n,t\n1,2\n")
    with pytest.raises(SweepError, match="column 'x' named in mapping/drop is not in the file"):
        import_sweep(tmp_path / "r.csv", "csv", mapping={"x": "time_ms"})
    with pytest.raises(SweepError, match="no 'kernel' column"):
        import_sweep(tmp_path / "r.csv", "csv", mapping={"t": "time_ms", "n": "size.N"})
    with pytest.raises(SweepError, match="no time column"):
        import_sweep(tmp_path / "r.csv", "csv", mapping={"t": "size.T", "n": "size.N"}, kernel="k", gpu="titan-v")
    with pytest.raises(SweepError, match="unknown time unit"):
        import_sweep(tmp_path / "r.csv", "csv", mapping={"t": "time_ms", "n": "size.N"}, kernel="k", gpu="titan-v",
                     time_unit="min")
    # 'size.N=x' (--map n=size.N=x) became a column no kernel reads, and N its default
    ok = import_sweep(tmp_path / "r.csv", "csv", mapping={"t": "time_ms", "n": "info.device-name"}, kernel="k",
                      gpu="titan-v", known_kernels=["k"])
    assert "info.device-name" in ok.columns  # an info.* column may hold - . +
    ok = import_sweep(tmp_path / "r.csv", "csv", mapping={"t": "time_ms", "n": "counter.dram__bytes_read.sum"},
                      kernel="k", gpu="titan-v", known_kernels=["k"])
    assert "counter.dram__bytes_read.sum" in ok.columns  # Nsight Compute's metric names
    with pytest.raises(SweepError, match="names 'n' twice"):
        import_sweep(tmp_path / "r.csv", "csv", mapping="n=size.N,n=size.M,t=time_ms", kernel="k", gpu="titan-v")
    for dest in ("size.N=x", "size.", "sizes.N", "config.2x"):
        with pytest.raises(SweepError, match=rf"mapping n={dest!r} names no sweep column"):
            import_sweep(tmp_path / "r.csv", "csv", mapping={"t": "time_ms", "n": dest}, kernel="k", gpu="titan-v")


def test_import_api(tmp_path) -> None:
    assert sorted(FORMATS) == ["aiwc", "csv", "kernel-tuner", "ktt", "neusight", "uci-sgemm"]
    with pytest.raises(SweepError, match="unknown import format 'xls'; use one of"):
        import_sweep(SWEEP_FIXTURES / "uci_sgemm_head.csv", "xls")
    with pytest.raises(SweepError, match="unknown option 'gpus' for format 'ktt'; allowed: kernel, gpu"):
        import_sweep(SWEEP_FIXTURES / "ktt_coulomb_gtx1070.json", "ktt", gpus="x")
    with pytest.raises(SweepError, match="unknown kernel 'kt-convolution'"):
        import_sweep(SWEEP_FIXTURES / "kt_convolution_a100.json", "kernel-tuner", known_kernels=["clblast-xgemm"])
    with pytest.raises(SweepError, match="no such file"):
        import_sweep(tmp_path / "nope.json", "ktt")


@pytest.mark.parametrize("out", ["u.parquet", "u.csv", "u.csv.gz"])
def test_import_to_file(tmp_path, out) -> None:
    df = import_to_file(SWEEP_FIXTURES / "uci_sgemm_head.csv", "uci-sgemm", tmp_path / out,
                        provenance={"command": "hybridperf import ...", "licence": "CC-BY-4.0"})
    back = read_sweep(tmp_path / out)
    pd.testing.assert_frame_equal(back, df, check_dtype=False)
    prov = back.attrs["provenance"]
    assert (prov["importer"] == "uci-sgemm" and prov["licence"] == "CC-BY-4.0"
            and prov["command"].startswith("hybridperf"))


def test_import_to_file_failure_writes_nothing(tmp_path) -> None:
    (tmp_path / "bad.json").write_text('{"Metadata": {}, "Results": []')
    for out in ("o.parquet", "o.csv"):
        with pytest.raises(SweepError):
            import_to_file(tmp_path / "bad.json", "ktt", tmp_path / out)
    with pytest.raises(SweepError, match="unknown sweep file type"):
        import_to_file(SWEEP_FIXTURES / "uci_sgemm_head.csv", "uci-sgemm", tmp_path / "o.txt")
    with pytest.raises(SweepError, match="does not exist"):
        import_to_file(SWEEP_FIXTURES / "uci_sgemm_head.csv", "uci-sgemm", tmp_path / "d" / "o.csv")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json"]
