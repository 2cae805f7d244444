"""neusight-gemm: the grid derived from the cuBLAS tile matches NeuSight's recorded launches; flops = 2BMNK."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hybridperf.kernel import load_kernel

from ._data import FIXTURES


@pytest.fixture(scope="module")
def gemm():
    return load_kernel("neusight-gemm")


def record_params(t: pd.DataFrame) -> dict[str, np.ndarray]:
    """Descriptor parameters read off NeuSight rows (kernel name, Block x, Grid z)."""
    tile = t["Kernel Name"].str.extract(r"sgemm_(\d+)x(\d+)_").astype(float)
    linear = (t["OPName"] == "linear").to_numpy(float)
    return {"B": t["B"].to_numpy(float), "M": t["M"].to_numpy(float), "N": t["N"].to_numpy(float),
            "K": t["K"].to_numpy(float), "TILE_M": tile[0].to_numpy(), "TILE_N": tile[1].to_numpy(),
            "THREADS": t["Block x"].to_numpy(float),
            "SLICED": np.where(t["Kernel Name"].str.contains("sliced1x4"), 4.0, 1.0),
            "SPLITK": (t["Grid z"] / np.where(linear == 1, 1, t["B"])).to_numpy(float), "LINEAR": linear}


def test_recorded_launches_are_reproduced(gemm) -> None:
    t = pd.read_csv(FIXTURES / "neusight_gemm_rows.csv")
    assert {"bmm", "linear"} <= set(t["OPName"]) and t["Kernel Name"].nunique() >= 20
    params = record_params(t)
    assert gemm.constraint_mask(params)[0].all()
    prof = gemm.profile(params)
    np.testing.assert_array_equal(prof.blocks, t["Grid x"] * t["Grid y"] * t["Grid z"])
    np.testing.assert_array_equal(prof.threads_per_block, t["Block x"] * t["Block y"] * t["Block z"])
    # grid x and y come from the tile alone (z defines SPLITK, so it is not an independent check)
    rows = np.where(params["LINEAR"] == 1, params["B"] * params["M"], params["M"])
    np.testing.assert_array_equal(np.ceil(params["K"] / params["TILE_M"]), t["Grid x"])
    np.testing.assert_array_equal(np.ceil(rows / params["TILE_N"]), t["Grid y"])
    total = prof.flops * prof.threads_per_block * prof.blocks
    np.testing.assert_allclose(total, 2 * t["B"] * t["M"] * t["N"] * t["K"], rtol=1e-12)
    assert np.isfinite(prof.to_frame().to_numpy()).all()
    # issued FFMAs cover the padded tiles: never fewer than the useful multiply-adds
    assert (prof.fp_insts * prof.total_threads >= t["B"] * t["M"] * t["N"] * t["K"]).all()


def test_hand_computed_tiles(gemm) -> None:
    p = gemm.profile({"TILE_M": 128, "TILE_N": 64, "THREADS": 128, "B": 2, "M": 100, "N": 64, "K": 300})
    assert p.blocks[0] == 3 * 2 * 2                      # ceil(300/128) x ceil(100/64) x B
    assert p.smem_per_block_bytes[0] == (128 + 64) * 8 * 4 * 2
    assert p.fp_insts[0] == 64 * 8 * 8                   # 8x8 outputs per thread, 64/8 k-steps of 8
    p = gemm.profile({"TILE_M": 32, "TILE_N": 32, "THREADS": 128, "SLICED": 4, "M": 64, "N": 64, "K": 64,
                      "LINEAR": 1, "B": 3})
    assert p.blocks[0] == 2 * 6                          # linear: rows = B*M = 192
    assert p.smem_per_block_bytes[0] == 64 * 8 * 4 * 2 * 4
    assert p.fp_insts[0] == 32 * 8 * 2                   # 32 outputs, ceil(64/4/8) = 2 k-steps


def test_split_k_beyond_the_reduction_is_rejected(gemm) -> None:
    ok, reasons = gemm.constraint_mask({"N": np.array([16.0, 16.0]), "SPLITK": np.array([4.0, 32.0])})
    assert list(ok) == [True, False] and "SPLITK" in reasons[1]
