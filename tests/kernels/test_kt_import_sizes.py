"""The Kernel Tuner importer recovers Xgemm's K, which problem_size does not record, from the recorded GFLOP/s."""
from __future__ import annotations

import json

import pytest

from hybridperf.errors import SweepError
from hybridperf.importers import import_sweep

from ._data import SWEEP_FIXTURES


def _gemm_cache(tmp_path, m: int, n: int, k: int, flops, kwg=(16, 32), gflops: bool = True):
    """A small Xgemm cache whose GFLOP/s follows the given flop formula."""
    keys = ["MWG", "NWG", "KWG"]
    cache = {}
    for i, (mwg, w) in enumerate([(16, 16), (32, 32), (64, 16)]):
        time_ms = 10.0 + 3 * i
        entry = {"MWG": mwg, "NWG": mwg, "KWG": w, "time": time_ms, "times": [time_ms] * 3}
        if gflops:
            entry["GFLOP/s"] = flops(m, n, k) / 1e9 / (time_ms / 1e3)
        cache[f"{mwg},{mwg},{w}"] = entry
    doc = {"device_name": "NVIDIA GeForce RTX 2080 Ti", "kernel_name": "Xgemm", "problem_size": [m, n],
           "tune_params_keys": keys, "tune_params": {"MWG": [16, 32, 64], "NWG": [16, 32, 64], "KWG": list(kwg)},
           "objective": "time", "cache": cache}
    path = tmp_path / "gemm.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_k_of_the_hub_caches_comes_from_gflops() -> None:
    # the hub's gemm_milo.py: flops = 2MNK + 2MK, M = N = K = 4096 (problem_size holds [4096, 4096])
    df = import_sweep(SWEEP_FIXTURES / "kt_gemm_rtx2080ti.json", "kernel-tuner")
    assert (df["size.K"] == 4096).all() and (df["size.M"] == 4096).all()
    assert "2MNK + 2MK" in df.attrs["provenance"]["notes"][0]


@pytest.mark.parametrize(("m", "n", "k"), [(1024, 1024, 1024), (4096, 2048, 512), (2048, 2048, 8192)])
def test_either_flop_formula_gives_k(tmp_path, m, n, k) -> None:
    for formula, flops in (("2MNK + 2MK", lambda m, n, k: 2 * m * n * k + 2 * m * k),
                           ("2MNK", lambda m, n, k: 2 * m * n * k)):
        df = import_sweep(_gemm_cache(tmp_path, m, n, k, flops), "kernel-tuner")
        assert (df["size.K"] == k).all(), formula
        assert f"(flops = {formula})" in df.attrs["provenance"]["notes"][0]


def test_sizes_option_overrides_and_missing_metric_is_an_error(tmp_path) -> None:
    path = _gemm_cache(tmp_path, 1024, 1024, 1024, lambda m, n, k: 2 * m * n * k)
    assert (import_sweep(path, "kernel-tuner", sizes={"K": 2048})["size.K"] == 2048).all()
    bare = _gemm_cache(tmp_path, 1024, 1024, 1024, None, gflops=False)
    with pytest.raises(SweepError, match=r"no entry records GFLOP/s.*sizes=K="):
        import_sweep(bare, "kernel-tuner")
    assert (import_sweep(bare, "kernel-tuner", sizes={"K": 1024})["size.K"] == 1024).all()
