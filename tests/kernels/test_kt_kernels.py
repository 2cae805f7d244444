"""kt-convolution and kt-dedispersion: shared memory, launch geometry and validity against the hub caches."""
from __future__ import annotations

import gzip
import itertools
import json

import numpy as np
import pandas as pd
import pytest

from hybridperf.kernel import load_kernel

from ._data import FIXTURES, raw

CONV = ("block_size_x", "block_size_y", "tile_size_x", "tile_size_y", "read_only", "use_padding",
        "filter_height", "filter_width")


@pytest.fixture(scope="module")
def conv():
    return load_kernel("kt-convolution")


@pytest.fixture(scope="module")
def dedisp():
    return load_kernel("kt-dedispersion")


def _conv_params(rows: pd.DataFrame) -> dict[str, np.ndarray]:
    params = {p: rows[p].to_numpy(float) for p in CONV}
    for p in ("use_shmem", "use_cmem"):  # the 2023 caches lack them: the kernel then always uses both
        params[p] = rows[p].fillna(1).to_numpy(float) if p in rows else np.ones(len(rows))
    return params


def test_convolution_fixture_validity(conv) -> None:
    rows = pd.read_csv(FIXTURES / "convolution_rows.csv")
    ok, _ = conv.constraint_mask(_conv_params(rows))
    status = rows["time"].astype(str)
    compile_failed = (status == "CompilationFailedConfig").to_numpy()
    timed = pd.to_numeric(rows["time"], errors="coerce").notna().to_numpy()
    assert compile_failed.any() and timed.sum() == 20
    assert ok[timed].all() and not ok[compile_failed].any()
    prof = conv.profile({k: v[timed] for k, v in _conv_params(rows).items()})
    assert np.isfinite(prof.to_frame().to_numpy()).all()
    np.testing.assert_allclose(prof.flops * prof.total_threads, 2 * 4096 * 4096 * 15 * 15, rtol=1e-12)


def test_convolution_hand_computed_shared_memory(conv) -> None:
    p = conv.profile({"block_size_x": 32, "block_size_y": 8, "tile_size_x": 1, "tile_size_y": 2})
    assert p.threads_per_block[0] == 256 and p.blocks[0] == 128 * 256
    assert p.smem_per_block_bytes[0] == (16 + 14) * (32 + 14) * 4
    # 48 threads wide: 62-column tile, padding (32 - 14) & 31 = 18 columns
    p = conv.profile({"block_size_x": 48, "block_size_y": 4, "tile_size_x": 1, "tile_size_y": 1, "use_padding": 1})
    assert p.smem_per_block_bytes[0] == (4 + 14) * (62 + 18) * 4
    # 16 x 4 outputs wide: (32 - 62) & 31 = 2 padding columns (C's & on a negative number)
    p = conv.profile({"block_size_x": 16, "block_size_y": 4, "tile_size_x": 4, "tile_size_y": 1, "use_padding": 1})
    assert p.smem_per_block_bytes[0] == (4 + 14) * (64 + 14 + 2) * 4
    p = conv.profile({"use_shmem": 0})
    assert p.smem_per_block_bytes[0] == 0 and p.smem_insts[0] == 0 and p.sync_insts[0] == 0


def test_convolution_loads_count_distinct_inputs(conv) -> None:
    # 1x1 outputs: 15x15 distinct inputs; tile 1x2 with block_size_y 8: rows 0..22 -> 23 x 15
    p = conv.profile({"tile_size_x": 1, "tile_size_y": 1})
    assert p.smem_loads[0] == 225 and p.fp_insts[0] == 225
    p = conv.profile({"tile_size_x": 1, "tile_size_y": 2, "block_size_y": 8})
    assert p.smem_loads[0] == 23 * 15 and p.fp_insts[0] == 2 * 225
    p = conv.profile({"tile_size_x": 1, "tile_size_y": 2, "block_size_y": 16})  # rows no longer overlap
    assert p.smem_loads[0] == 2 * 225


@pytest.mark.parametrize("path", [
    ("kt-benchmark-hub", "currently_unused", "cachefiles", "KernelTuner data", "convolution", "RTX_2080_Ti.json.gz"),
    ("kt-benchmark-hub", "cachefiles", "convolution_milo", "A100.json.gz"),
])
def test_convolution_compile_failures_are_exactly_the_rejected_configs(conv, path) -> None:
    doc = json.loads(gzip.decompress(raw(*path).read_bytes()))
    rows = pd.DataFrame([{**{k: e[k] for k in doc["tune_params_keys"]}, "time": e["time"]}
                         for e in doc["cache"].values()])
    ok, _ = conv.constraint_mask(_conv_params(rows))
    compile_failed = (rows["time"].astype(str) == "CompilationFailedConfig").to_numpy()
    np.testing.assert_array_equal(~ok, compile_failed)


def test_dedispersion_fixture_and_geometry(dedisp) -> None:
    rows = pd.read_csv(FIXTURES / "dedispersion_rows.csv")
    names = [c for c in rows.columns if c in dedisp.config_names]
    assert len(names) == 8
    params = {p: rows[p].to_numpy(float) for p in names}
    assert dedisp.constraint_mask(params)[0].all()
    prof = dedisp.profile(params)
    assert np.isfinite(prof.to_frame().to_numpy()).all()
    np.testing.assert_allclose(prof.flops * prof.total_threads, 25000 * 2048 * 1536, rtol=1e-9)
    np.testing.assert_allclose(prof.global_stores * prof.total_threads, 25000 * 2048, rtol=1e-9)
    p = dedisp.profile({"block_size_x": 16, "block_size_y": 32, "tile_size_x": 2, "tile_size_y": 3,
                        "tile_stride_x": 1})
    assert p.threads_per_block[0] == 512 and p.blocks[0] == np.ceil(25000 / 32) * np.ceil(2048 / 96)
    assert p.smem_per_block_bytes[0] == 0


def test_dedispersion_constraints(dedisp) -> None:
    cfgs = {"block_size_x": np.array([32.0, 1.0, 4.0]), "block_size_y": np.array([64.0, 32.0, 64.0]),
            "tile_size_x": np.array([1.0, 1.0, 1.0]), "tile_stride_x": np.array([0.0, 0.0, 1.0])}
    ok, _ = dedisp.constraint_mask(cfgs)
    assert list(ok) == [False, True, False]  # 2048 threads; valid; stride without a tile


def test_dedispersion_cache_is_exactly_the_constrained_space(dedisp) -> None:
    path = raw("kt-benchmark-hub", "cachefiles", "dedispersion_milo", "A100.json.gz")
    doc = json.loads(gzip.decompress(path.read_bytes()))
    tp = doc["tune_params"]
    product = np.array(list(itertools.product(*tp.values())), dtype=float)
    ok, _ = dedisp.constraint_mask({k: product[:, i] for i, k in enumerate(tp)})
    assert ok.sum() == len(doc["cache"]) == 11_130


def _convolution_twins(conv, gpus: list[str]) -> pd.DataFrame:
    """Each unpadded configuration of the recorded caches of ``gpus`` beside its padded twin (everything else equal,
    the twin conflict-free by the model): measured times, the modelled bank-conflict degree and the hierarchical
    roofline's shared-memory time of both (``_padded`` the twin's)."""
    from hybridperf.analytical.hierarchy import hierarchy
    from hybridperf.datasets import load_dataset
    from hybridperf.hardware import load_gpu

    df = load_dataset("kt-convolution")
    df = df[(df["status"] == "ok") & df["gpu"].isin(gpus)].reset_index(drop=True)
    params = {p: df[f"config.{p}"].to_numpy(float) for p in CONV}
    for p in ("use_shmem", "use_cmem"):  # the 2023 caches lack them: the kernel then always uses both
        params[p] = df[f"config.{p}"].fillna(1).to_numpy(float)
    params |= {"W": df["size.W"].to_numpy(float), "H": df["size.H"].to_numpy(float)}
    prof = conv.profile(params)
    warps = np.ceil(prof.threads_per_block / 32) * prof.blocks
    with np.errstate(invalid="ignore"):  # no shared memory (use_shmem = 0): no accesses to divide by
        degree = np.round(prof.smem_bytes / (warps * 128 * (prof.smem_loads + prof.smem_stores)), 2)
    smem_ms = np.full(len(df), np.nan)
    for gpu in gpus:
        on = (df["gpu"] == gpu).to_numpy()
        smem_ms[on] = hierarchy(prof.take(on), load_gpu(gpu)).smem_ms
    rows = df.assign(degree=degree, smem_ms=smem_ms)[params["use_shmem"] == 1]
    twin = [f"config.{p}" for p in (*CONV, "use_cmem") if p != "use_padding"] + ["gpu"]
    pairs = rows[rows["config.use_padding"] == 0].merge(rows[rows["config.use_padding"] == 1], on=twin,
                                                        suffixes=("", "_padded"))
    return pairs[pairs["degree_padded"] == 1]


def test_convolution_bank_conflicts_match_padded_twins(conv) -> None:
    """Each unpadded configuration of a recorded cache against its padded twin (everything else equal, the twin
    conflict-free by the model): on the RTX 2080 Ti, the TITAN RTX and the A100 the twin ratio of time follows the
    modelled bank-conflict degree, 1.08-5.9x over degrees 1.14-8 (kt-convolution.toml notes). The upper bound used
    before rated the 2-way block_size_x = 8 configurations 4-way and blocks whose warps straddle rows conflict-free.
    (The GA10x parts pay half: test_ga10x_banks_serve_two_addresses_a_cycle.)"""
    pairs = _convolution_twins(conv, ["geforce-rtx-2080-ti", "titan-rtx", "a100-pcie-40gb"])
    ratio = ((pairs["time_ms"] / pairs["time_ms_padded"]).groupby([pairs["gpu"], pairs["degree"]])
             .agg(["median", "size"]))
    checked = ratio[(ratio["size"] >= 16) & (ratio.index.get_level_values("degree") >= 1.14)]
    assert len(checked) >= 10 and set(checked.index.get_level_values("degree")) >= {1.14, 1.33, 2.0, 4.0, 8.0}
    for (gpu, deg), r in checked.iterrows():
        assert 1 + 0.4 * (deg - 1) <= r["median"] <= 1.02 * deg, (gpu, deg, r["median"])


def test_ga10x_banks_serve_two_addresses_a_cycle(conv) -> None:
    """The hierarchical roofline's shared-memory time of each unpadded configuration over its padded twin's against
    the measured time ratio, per GPU and conflict degree (medians, 16+ pairs): on the GA10x parts (RTX 3060 laptop,
    RTX A4000) 2-way conflicts cost nothing measured (1.00-1.01x) and 4-way / 8-way 1.9 / 3.6x, which their specs'
    smem_bank_ways_per_cycle = 2 models (1, 2, 4x); elsewhere the modelled ratio is the degree. Measured stays within
    0.65-1.1x of modelled on every GPU (Turing's 8-way: 5.86 against 8); charged in full, the GA10x 2-way pairs were
    modelled 2x against 1.0 measured."""
    pairs = _convolution_twins(conv, ["geforce-rtx-3060-laptop", "rtx-a4000", "geforce-rtx-2080-ti", "titan-rtx",
                                      "a100-pcie-40gb"])
    pairs = pairs.assign(measured=pairs["time_ms"] / pairs["time_ms_padded"],
                         modelled=pairs["smem_ms"] / pairs["smem_ms_padded"])
    by = pairs.groupby(["gpu", "degree"])
    med = by[["measured", "modelled"]].median()
    med = med[(by.size() >= 16) & (med.index.get_level_values("degree") > 1)]
    ga10x = med.loc[["geforce-rtx-3060-laptop", "rtx-a4000"]]
    assert set(ga10x.index.get_level_values("degree")) >= {1.14, 1.33, 2.0}
    assert ga10x.xs(2.0, level="degree")["modelled"].tolist() == pytest.approx([1.0, 1.0])
    assert len(med) >= 15
    for (gpu, deg), r in med.iterrows():
        assert 0.65 * r["modelled"] <= r["measured"] <= 1.1 * r["modelled"], (gpu, deg, r.tolist())
