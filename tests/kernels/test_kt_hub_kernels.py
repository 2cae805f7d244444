"""kt-pnpoly, kt-hotspot, kt-expdist: counts against brute-force walks of the kernels' loops, and the recorded runs."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from hybridperf.datasets import load_dataset
from hybridperf.kernel import load_kernel
from hybridperf.learn.features import analytical_features


def _recorded(name: str) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    df = load_dataset(name).reset_index(drop=True)
    params = {c.split(".", 1)[1]: df[c].to_numpy(np.float64) for c in df.columns if c.startswith(("size.", "config."))}
    return df, params


# ---------------------------------------------------------------------------------------------
# kt-pnpoly

def _pnpoly_active_threads(n: int, bs: int, tile: int) -> int:
    """Threads of cn_pnpoly that pass `if (i < n)`, by enumerating every launched thread."""
    blocks = math.ceil(n / (bs * tile))
    return sum(b * bs * tile + tx < n for b in range(blocks) for tx in range(bs))


@pytest.mark.parametrize(("n", "bs", "tile"), [(70, 32, 2), (1000, 96, 6), (20_000, 992, 20), (64, 32, 2)])
def test_pnpoly_totals_match_an_enumeration_of_threads(n, bs, tile) -> None:
    k = load_kernel("kt-pnpoly")
    p = k.profile({"N": n, "block_size_x": bs, "tile_size": tile})
    threads = p.total_threads[0]
    assert p.blocks[0] == math.ceil(n / (bs * tile)) and p.threads_per_block[0] == bs
    active = _pnpoly_active_threads(n, bs, tile)
    # one MUFU.RCP per edge and active thread; every point loaded and stored once
    assert p.sfu_insts[0] * threads == pytest.approx(active * 600)
    assert p.global_loads[0] * threads == pytest.approx(n) and p.global_stores[0] * threads == pytest.approx(n)
    p1 = k.profile({"N": n, "block_size_x": bs, "tile_size": tile, "use_precomputed_slopes": 1})
    assert p1.sfu_insts[0] == 0 and p1.comp_insts[0] < p.comp_insts[0]


def test_pnpoly_between_methods_cost_what_their_operations_do() -> None:
    k = load_kernel("kt-pnpoly")
    c = k.profile({"between_method": np.array([0.0, 1.0, 2.0, 3.0]), "tile_size": 20}).comp_insts
    # per edge and point 8, 12, 10, 10 instructions (notes); 600 edges x 20 points apart
    np.testing.assert_allclose(np.diff(c), [600 * 20 * 4, -600 * 20 * 2, 0], rtol=1e-12)


@pytest.fixture(scope="module")
def pnpoly_feats():
    df = load_dataset("kt-pnpoly").reset_index(drop=True)
    return df, analytical_features(df)


def test_pnpoly_register_estimate_fits_every_launch_that_ran(pnpoly_feats) -> None:
    df, feats = pnpoly_feats
    ok = (df["status"] == "ok").to_numpy()
    feasible = feats["feasible"].to_numpy() > 0
    assert feasible[ok].all()
    # the estimate makes some RuntimeFailedConfig launches infeasible (too many registers per block), no ok one
    predicted = ~feasible
    assert predicted.sum() > 0 and (df.loc[predicted, "reason"] == "RuntimeFailedConfig").all()


# ---------------------------------------------------------------------------------------------
# kt-hotspot

def _hotspot_walk(bx: int, by: int, tx: int, ty: int, tf: int) -> tuple[int, int, int]:
    """Fill cells, computed cells and j-row trips of one block, walking calculate_temp's loops thread by thread."""
    tw, th = bx * tx + 2 * tf, by * ty + 2 * tf
    fill = cells = rows = 0
    for y, x in itertools.product(range(by), range(bx)):
        fill += len(range(y, th, by)) * len(range(x, tw, bx))
        for it in range(1, tf + 1):
            r = range(y + it, th - it, by)
            rows += len(r)
            cells += len(r) * len(range(x + it, tw - it, bx))
    return fill, cells, rows


@pytest.mark.parametrize(("bx", "by", "tx", "ty", "tf"), [(1, 32, 1, 7, 8), (32, 8, 1, 1, 1), (16, 4, 3, 2, 5),
                                                          (64, 2, 2, 5, 10), (8, 8, 4, 4, 3)])
def test_hotspot_counts_match_a_walk_of_the_loops(bx, by, tx, ty, tf) -> None:
    k = load_kernel("kt-hotspot")
    for sh in (0, 1):
        p = k.profile({"block_size_x": bx, "block_size_y": by, "tile_size_x": tx, "tile_size_y": ty,
                       "temporal_tiling_factor": tf, "loop_unroll_factor_t": 1, "sh_power": sh})
        fill, cells, _ = _hotspot_walk(bx, by, tx, ty, tf)
        t = bx * by
        assert p.fp_insts[0] * t == pytest.approx(4 * cells)          # 4 FP32 per computed cell
        assert p.sfu_insts[0] * t == pytest.approx(12 * cells)        # 6 FP64 + 6 conversions per cell
        assert p.global_loads[0] * t == pytest.approx((1 + sh) * fill + (1 - sh) * cells)
        assert p.smem_stores[0] * t == pytest.approx((1 + sh) * fill + cells)
        assert p.smem_loads[0] * t == pytest.approx((5 + sh) * cells + tx * ty * t)
        assert p.sync_insts[0] == tf + 1 and p.global_stores[0] == tx * ty
        th, tw = by * ty + 2 * tf, bx * tx + 2 * tf
        assert p.smem_per_block_bytes[0] == (2 + sh) * th * tw * 4   # the tuning script's restriction formula
        assert p.blocks[0] == math.ceil(8192 / (bx * tx)) * math.ceil(8192 / (by * ty))


def test_hotspot_one_step_computes_each_thread_its_own_cell() -> None:
    p = load_kernel("kt-hotspot").profile({"block_size_x": 32, "block_size_y": 8, "temporal_tiling_factor": 1})
    assert p.fp_insts[0] == 4 and p.flops[0] == 15 and p.sfu_insts[0] == 12


# ---------------------------------------------------------------------------------------------
# kt-expdist

def _expdist_walk(m: int, n: int, bx: int, by: int, tx: int, ty: int, uc: int, sm: int, nyb: int) -> dict[str, float]:
    """Totals over all threads of ExpDist's loops (pairs computed, operand/staging loads, barriers)."""
    gx = math.ceil(m / (bx * tx))
    gy = nyb if uc else math.ceil(n / (by * ty))
    pairs = loads = syncs = 0
    for bxi, byi, ty_, tx_ in itertools.product(range(gx), range(gy), range(by), range(bx)):
        i, j = tx_ + bxi * bx * tx, ty_ + byi * by * ty
        starts = range(j, n, gy * by * ty) if uc else [j]
        mine = sum((i + a * bx < m) and (s + b * by < n) for s in starts for a in range(tx) for b in range(ty))
        pairs += mine
        if sm == 0:
            loads += 6 * mine
        else:
            loads += 3 * tx + 3 * ty * len(starts)
        syncs += 1 + (0 if sm == 0 else 1 if not uc else (1 + 2 * len(starts) if sm == 1 else 1 + len(starts)))
    return {"pairs": pairs, "loads": loads, "syncs": syncs, "threads": gx * gy * bx * by}


@pytest.mark.parametrize(("uc", "sm", "nyb"), [(0, 0, 1), (0, 1, 1), (1, 0, 4), (1, 1, 4), (1, 2, 2)])
def test_expdist_counts_match_a_walk_of_the_loops(uc, sm, nyb) -> None:
    m, n, bx, by, tx, ty = 320, 240, 32, 2, 2, 3  # N a multiple of every step: all threads take the same trips
    p = load_kernel("kt-expdist").profile({"M": m, "N": n, "block_size_x": bx, "block_size_y": by, "tile_size_x": tx,
                                           "tile_size_y": ty, "loop_unroll_factor_x": 1, "loop_unroll_factor_y": 1,
                                           "use_column": uc, "use_shared_mem": sm, "n_y_blocks": nyb})
    w = _expdist_walk(m, n, bx, by, tx, ty, uc, sm, nyb)
    threads = p.total_threads[0]
    assert threads == w["threads"] and w["pairs"] == m * n
    assert p.global_loads[0] * threads == pytest.approx(w["loads"])
    assert p.sync_insts[0] * threads == pytest.approx(w["syncs"])
    # 36 FP64 + 2 MUFU per pair; the block reduction adds 5 DADD per thread and the warp sums of thread 0
    red = 5 + (math.ceil(bx * by / 32) - 1) / (bx * by)
    assert (p.sfu_insts[0] - red) * threads == pytest.approx(38 * m * n)


def test_expdist_constraints_reject_exactly_the_compile_failures() -> None:
    df, params = _recorded("kt-expdist")
    ok, _ = load_kernel("kt-expdist").constraint_mask(params)
    failed = (df["reason"] == "CompilationFailedConfig").to_numpy()
    assert failed.sum() == 1380
    np.testing.assert_array_equal(ok, ~failed)


# ---------------------------------------------------------------------------------------------
# Register estimates against the RegisterObserver's counts

@pytest.mark.parametrize("name", ["kt-hotspot", "kt-expdist"])
def test_register_estimate_agrees_with_recorded_counts(name) -> None:
    df, params = _recorded(name)
    ok = (df["status"] == "ok").to_numpy()
    est = load_kernel(name).profile({k: v[ok] for k, v in params.items()}).registers_per_thread
    rec = df.loc[ok, "counter.num_regs"].to_numpy(np.float64)
    ratio = est / rec
    # measured: median 0.91-0.92, p10-p90 0.86-1.05, Spearman 0.64-0.66 (docs/real-kernels.md)
    assert 0.85 <= np.median(ratio) <= 1.0 and np.quantile(ratio, 0.1) >= 0.8 and np.quantile(ratio, 0.9) <= 1.1
    assert spearmanr(est, rec).statistic > 0.5
