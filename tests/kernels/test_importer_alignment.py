"""The importers' size./config. column names are the descriptors' parameter names (skips if an importer is absent)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from hybridperf.kernel import load_kernel

from ._data import FIXTURES, SWEEP_FIXTURES


def _fixture(name: str):
    path = SWEEP_FIXTURES / name
    if not path.exists():
        pytest.skip(f"{path} not present")
    return path


def _check(df: pd.DataFrame, kernel: str, ignore: frozenset[str] = frozenset()) -> None:
    """Every imported parameter is a descriptor parameter, and the rows evaluate."""
    assert set(df["kernel"]) == {kernel}
    desc = load_kernel(kernel)
    names = {c.split(".", 1)[1] for c in df.columns if c.startswith(("size.", "config."))} - ignore
    assert names <= set(desc.parameters), sorted(names - set(desc.parameters))
    params = {n: pd.to_numeric(df[c], errors="coerce").to_numpy(float)
              for c in df.columns if c.startswith(("size.", "config.")) and (n := c.split(".", 1)[1]) in names}
    ok, reasons = desc.constraint_mask(params)
    timed = (df["status"] == "ok").to_numpy()
    assert ok[timed].all(), [r for r, t in zip(reasons, timed) if t and r]
    assert np.isfinite(desc.profile(params).to_frame().to_numpy()).all()


def test_kernel_tuner_gemm() -> None:
    kt = pytest.importorskip("hybridperf.importers.kernel_tuner")
    df = kt.read_kernel_tuner(_fixture("kt_gemm_rtx2080ti.json"))
    _check(df, "clblast-xgemm")
    # problem_size gives M and N only; K is solved from the recorded GFLOP/s (the hub's 4096)
    assert (df["size.K"] == 4096).all() and "derived from the entries' GFLOP/s" in df.attrs["provenance"]["notes"][0]


def test_uci_sgemm() -> None:
    uci = pytest.importorskip("hybridperf.importers.uci_sgemm")
    _check(uci.read_uci_sgemm(_fixture("uci_sgemm_head.csv")), "clblast-xgemm")


def test_kernel_tuner_convolution() -> None:
    kt = pytest.importorskip("hybridperf.importers.kernel_tuner")
    _check(kt.read_kernel_tuner(_fixture("kt_convolution_a100.json")), "kt-convolution")


def test_kernel_tuner_dedispersion(tmp_path) -> None:
    kt = pytest.importorskip("hybridperf.importers.kernel_tuner")
    rows = pd.read_csv(FIXTURES / "dedispersion_rows.csv")
    keys = [c for c in rows.columns if c not in ("device", "source", "time")]
    cache = {",".join(str(int(r[k])) for k in keys): {**{k: int(r[k]) for k in keys}, "time": float(r["time"])}
             for _, r in rows.iterrows()}
    doc = {"device_name": rows["device"].iloc[0], "kernel_name": "dedispersion_kernel",
           "problem_size": [25000, 2048, 1], "tune_params_keys": keys,
           "tune_params": {k: sorted(rows[k].unique().tolist()) for k in keys}, "objective": "time", "cache": cache}
    path = tmp_path / "dedisp.json"
    path.write_text(json.dumps(doc, default=int), encoding="utf-8")
    _check(kt.read_kernel_tuner(path, gpu="rtx-a4000"), "kt-dedispersion")


def test_ktt_coulomb() -> None:
    ktt = pytest.importorskip("hybridperf.importers.ktt")
    df = ktt.read_ktt(_fixture("ktt_coulomb_rtx2080ti.json"), sizes={"grid": 256, "atoms": 64})
    _check(df, "ktt-coulomb-sum-3d")


def test_neusight_gemm_sizes() -> None:
    ns = pytest.importorskip("hybridperf.importers.neusight")
    df = ns.read_neusight(_fixture("neusight/bmm"))
    # config.op is a string the descriptor does not take; the tile (TILE_M, TILE_N, SLICED), THREADS,
    # SPLITK and LINEAR must come from info.library_kernel and the grid/block counters (docs/real-kernels.md)
    _check(df, "neusight-gemm", ignore=frozenset({"op"}))
