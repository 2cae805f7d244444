"""Every importer on the full real files in ../shared/data/raw reproduces their row counts exactly."""
from __future__ import annotations

import gzip
import json
import sys
import zipfile

import numpy as np
import pandas as pd
import pytest

from hybridperf.importers import import_sweep
from hybridperf.importers.aiwc import GPU_DEVICES
from hybridperf.sweep import summarize_sweep
from tests.paths import RAW, REPO, needs_raw, stem

pytestmark = needs_raw
HUB = "kt-benchmark-hub/cachefiles"
OLD = "kt-benchmark-hub/currently_unused/cachefiles/KernelTuner data"
WIL = "kt-paper-willemsen/kernels/outputdata"
AIWC_STEMS = ["geforce-gtx-titan-x", "geforce-gtx-1080", "geforce-gtx-1080-ti", "tesla-k20c", "tesla-k40c",
              "radeon-r9-fury-x", "radeon-r9-290x", "radeon-r9-295x2", "radeon-rx-480", "radeon-hd-7970",
              "firepro-s9150", "xeon-e5-2697-v2", "core-i7-6700k", "core-i5-3350", "xeon-phi-knl"]


def counts(df: pd.DataFrame) -> tuple[int, int, int, int]:
    s = summarize_sweep(df)
    return s.rows, s.ok, s.failed, s.invalid


def kt_source_counts(path) -> tuple[int, int, int, int]:
    text = gzip.decompress(path.read_bytes()).decode().rstrip()
    doc = json.loads(text[:-1] + "}}" if text.endswith(",") else text)
    obj = doc.get("objective", "time")
    kinds = [("ok" if isinstance(t, (int, float)) and t < 1e20 else "invalid" if t == "InvalidConfig" else "failed")
             for t in (e.get("time", e.get(obj)) for e in doc["cache"].values())]
    return len(kinds), kinds.count("ok"), kinds.count("failed"), kinds.count("invalid")


KT_FILES = [  # path, expected (rows, ok, failed, invalid) from SOURCE.md and the raw JSON
    (f"{HUB}/convolution_milo/A100.json.gz", (4362, 4201, 161, 0)),
    (f"{HUB}/convolution_milo/A4000.json.gz", (4362, 4201, 161, 0)),
    (f"{HUB}/dedispersion_milo/A100.json.gz", (11130, 11130, 0, 0)),
    (f"{HUB}/dedispersion_milo/A4000.json.gz", (11130, 11130, 0, 0)),
    (f"{OLD}/gemm/RTX_2080_Ti.json.gz", (17956, 17956, 0, 0)),
    (f"{OLD}/gemm/RTX_3060_laptop.json.gz", (10000, 10000, 0, 0)),
    (f"{OLD}/gemm/RTX_Titan.json.gz", (17956, 17956, 0, 0)),
    (f"{OLD}/convolution/RTX_2080_Ti.json.gz", (6768, 5256, 1512, 0)),
    (f"{OLD}/convolution/RTX_3060_laptop.json.gz", (6768, 5220, 1548, 0)),
    (f"{OLD}/convolution/RTX_Titan.json.gz", (6768, 5256, 1512, 0)),
    (f"{OLD}/pnpoly/RTX_2080_Ti.json.gz", (4092, 3734, 358, 0)),
    (f"{OLD}/pnpoly/RTX_3060_laptop.json.gz", (4092, 3774, 318, 0)),
    (f"{OLD}/pnpoly/RTX_Titan.json.gz", (4092, 3750, 342, 0)),
    (f"{WIL}/hotspot/hotspot_NVIDIA RTX A4000_size-8192x8192_cache.json.gz", (1660, 1660, 0, 0)),
    (f"{WIL}/expdist/expdist_NVIDIA_RTX_A4000_size-32768x32768_cache.json.gz", (2885, 1505, 1380, 0)),
]


# The larger caches (1-3 s each) run with the slow tests; the small ones always run.
KT_CASES = [pytest.param(p, e, marks=pytest.mark.slow) if e[0] > 5000 else (p, e) for p, e in KT_FILES]


@pytest.mark.parametrize(("path", "expect"), KT_CASES,
                         ids=[p.split("/")[-2] + "/" + p.split("/")[-1][:20] for p, _ in KT_FILES])
def test_kernel_tuner_caches(path, expect) -> None:
    df = import_sweep(RAW / path, "kernel-tuner", progress=False)
    assert counts(df) == expect == kt_source_counts(RAW / path)
    ok = df[df["status"] == "ok"]
    assert (ok["repeats"] >= 10).all() and ok["time_std_ms"].notna().all()


@pytest.mark.slow
def test_ktt_outputs() -> None:
    a = import_sweep(RAW / "ktt-coulomb/Examples/CoulombSum3d/coulomb_2080_full_search_space.json.gz", "ktt")
    assert counts(a) == (210, 210, 0, 0) and len([c for c in a if c.startswith("counter.")]) >= 33
    b = import_sweep(RAW / "ktt-coulomb/Tutorials/08ProfileBasedSearcher/TuningOutput.json.gz", "ktt")
    assert counts(b) == (210, 210, 0, 0) and int(b["repeats"].sum()) == 475
    assert set(b["gpu"]) == {stem("GeForce GTX 1070")}


@pytest.mark.slow
def test_uci_sgemm_archive() -> None:
    df = import_sweep(RAW / "sgemm-uci/sgemm_product_dataset.zip", "uci-sgemm")
    assert counts(df) == (241600, 241600, 0, 0) and (df["repeats"] == 4).all()
    with zipfile.ZipFile(RAW / "sgemm-uci/sgemm_product_dataset.zip") as zf:
        raw = pd.read_csv(zf.open("sgemm_product.csv"))
    assert df["time_ms"].to_numpy() == pytest.approx(np.median(raw.filter(like="Run").to_numpy(), axis=1))
    assert (df["time_ms"].min() == pytest.approx(13.29, abs=0.05)
            and df["time_max_ms"].max() == pytest.approx(3397.08, abs=0.1))


@pytest.mark.slow
def test_neusight_training_collection() -> None:
    with pytest.warns(UserWarning, match="merged 75 repeated measurements"):
        df = import_sweep(RAW / "neusight/scripts/asplos/data/dataset/train/collect", "neusight",
                          known_gpus=[*{stem(g) for g in ("Tesla P4", "Tesla T4", "Tesla P100-PCIE-16GB",
                                                           "NVIDIA A100-PCIE-40GB")}, "tesla-v100-pcie-32gb",
                                      "a100-pcie-80gb"])
    assert df.attrs["provenance"]["neusight"]["source_rows"] == 256509  # SOURCE.md
    assert len(df) == 256509 - 75 and int(df["repeats"].sum()) == 256509
    gemm = df[df["kernel"] == "neusight-gemm"]
    assert (gemm["config.op"] == "bmm").sum() == 87623 and (gemm["config.op"] == "linear").sum() == 32224
    assert (df["kernel"] == "neusight-conv").sum() == 24662


def test_aiwc_full_dat_and_its_time_unit() -> None:
    src = RAW / "aiwc-opendwarfs/derived/full_dat.csv.gz"
    raw = pd.read_csv(src)
    with pytest.warns(UserWarning, match="left out 14320 of 53700 rows"):
        gpu = import_sweep(src, "aiwc", devices=GPU_DEVICES, known_gpus=AIWC_STEMS)
    on_gpus = raw[raw["device"].isin(GPU_DEVICES)]
    assert len(gpu) == on_gpus.groupby(["application", "kernel", "size", "device", "invocation"]).ngroups == 957
    assert int(gpu["repeats"].sum()) == len(on_gpus) == 53700 - 14320
    # The unit check behind the microsecond conclusion (docs/datasets.md): GPU kernels take no less
    # than ~5 us to launch, and instruction throughput must stay near the hardware's peak.
    assert 0.005 < gpu["time_ms"].min() < 0.02
    lud = gpu[(gpu["kernel"] == "aiwc-lud-lud_internal") & (gpu["gpu"] == "geforce-gtx-1080-ti")
              & (gpu["size.class"] == 3)]
    inst_per_s = lud["counter.aiwc_total_instruction_count"].item() / (lud["time_ms"].item() / 1e3)
    assert 1e12 < inst_per_s < 5e13  # GTX 1080 Ti: 3584 lanes x 1.58 GHz = 5.7e12 per s


@pytest.mark.slow
def test_build_reproduces_the_shipped_datasets(tmp_path) -> None:
    sys.path.insert(0, str(REPO / "datasets"))
    try:
        import build  # datasets/build.py
    finally:
        sys.path.remove(str(REPO / "datasets"))
    for spec in build.SETS:
        if spec.name in ("uci-sgemm-gtx680", "neusight-ops"):  # the two largest; same code path as the rest
            continue
        build.build(spec, RAW, tmp_path)
        new = pd.read_parquet(tmp_path / spec.name / "sweep.parquet")
        old = pd.read_parquet(REPO / "datasets" / spec.name / "sweep.parquet")
        pd.testing.assert_frame_equal(new.reset_index(drop=True), old, check_dtype=False)
