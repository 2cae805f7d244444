"""MWP-CWP (seed 002): Table 2's worked example, regimes, and vectorisation."""
from __future__ import annotations

import numpy as np
import pytest

from hybridperf.analytical.mwp_cwp import mwp_cwp
from hybridperf.hardware import load_gpu
from hybridperf.kernel import load_kernel
from hybridperf.profile import KernelProfile


def _table2_gpu():
    return load_gpu("quadro-fx5600").replace(core_clock_mhz=1000.0, dram_bandwidth_gbs=80.0, sm_count=16,
                                             dram_latency_cycles=420.0, departure_delay_uncoal_cycles=10.0,
                                             issue_cycles=4.0)


def _table2_profile(**kw):
    base = dict(threads_per_block=128, blocks=80, registers_per_thread=0, smem_per_block_bytes=0, comp_insts=27,
                uncoal_mem_insts=6, coal_mem_insts=0, sync_insts=6, uncoal_per_mw=32, load_bytes_per_warp=128)
    base.update(kw)
    return KernelProfile.from_values(**base)


def test_table2_golden() -> None:
    r = mwp_cwp(_table2_profile(), _table2_gpu(), active_blocks_per_sm=5).row()
    assert r["departure_delay"] == 320
    assert r["mem_l"] == 730
    assert r["mwp_without_bw_full"] == pytest.approx(730 / 320)
    assert r["bw_per_warp_gbs"] == pytest.approx(0.175, rel=3e-3)
    assert r["mwp_peak_bw"] == pytest.approx(28.57, rel=2e-3)
    assert r["mwp"] == pytest.approx(2.28, rel=2e-3)
    assert r["comp_cycles"] == 132 and r["mem_cycles"] == 4380
    assert r["cwp_full"] == pytest.approx(34.18, rel=1e-3)
    assert r["cwp"] == 20 and r["n"] == 20 and r["rep"] == 1
    assert r["regime"] == 23
    assert r["exec_cycles_app"] == pytest.approx(38430, rel=2e-3)
    assert r["synch_cost"] == pytest.approx(12300, rel=2e-3)
    assert r["exec_cycles"] == pytest.approx(50738, rel=1e-3)
    assert r["exec_cycles"] == pytest.approx(50728.19, abs=0.01)  # exact arithmetic
    assert r["time_ms"] == pytest.approx(r["exec_cycles"] / 1e6)


def test_regimes() -> None:
    gpu = _table2_gpu()
    # MWP > CWP with Mem_cycles >= Comp_cycles -> Eq. 24.
    r = mwp_cwp(_table2_profile(comp_insts=40, uncoal_mem_insts=0, coal_mem_insts=2, sync_insts=0), gpu,
                active_blocks_per_sm=5).row()
    assert r["regime"] == 24 and r["mwp"] > r["cwp"] and r["mem_cycles"] >= r["comp_cycles"]
    assert r["exec_cycles_app"] == pytest.approx(r["mem_l"] + r["comp_cycles"] * r["n"])
    # The paper's rule sends Comp_cycles > Mem_cycles to Eq. 23 even when MWP > CWP, where Eq. 23 would
    # be far below the issue floor N x Comp_cycles; its own Sec. 3.2.2 Case 5 (Comp_cycles > Mem_cycles)
    # is N computation periods plus one memory period: Eq. 24 (documented deviation).
    r = mwp_cwp(_table2_profile(comp_insts=5000, uncoal_mem_insts=0, coal_mem_insts=2, sync_insts=0), gpu,
                active_blocks_per_sm=5).row()
    assert r["regime"] == 24 and r["mwp"] > r["cwp"] and r["comp_cycles"] > r["mem_cycles"]
    assert r["exec_cycles_app"] == pytest.approx(r["mem_l"] + r["comp_cycles"] * r["n"])
    assert r["exec_cycles_app"] >= r["n"] * r["comp_cycles"]
    # Few warps, fast coalesced memory: MWP = CWP = N -> Eq. 22.
    r = mwp_cwp(_table2_profile(threads_per_block=32, blocks=16, comp_insts=100, uncoal_mem_insts=0,
                                coal_mem_insts=1, sync_insts=0), gpu, active_blocks_per_sm=1).row()
    assert r["regime"] == 22 and r["mwp"] == r["n"] == r["cwp"] == 1
    # No global memory at all: pure computation.
    r = mwp_cwp(_table2_profile(uncoal_mem_insts=0, coal_mem_insts=0, sync_insts=0), gpu, active_blocks_per_sm=5).row()
    assert r["regime"] == 0 and r["exec_cycles"] == pytest.approx(4 * 27 * 20)


def test_more_memory_never_faster() -> None:
    gpu = load_gpu("gtx-280")
    k = load_kernel("seed002-tiled-matmul")
    base = mwp_cwp(k.profile({"N": 1024}), gpu).exec_cycles
    prof = k.profile({"N": 1024})
    more = KernelProfile(**{**{f: getattr(prof, f) for f in prof.__slots__}, "uncoal_mem_insts": prof.uncoal_mem_insts * 2})
    assert (mwp_cwp(more, gpu).exec_cycles >= base).all()


def test_scalar_and_array_agree() -> None:
    gpu = load_gpu("gtx-280")
    k = load_kernel("seed002-tiled-matmul")
    sizes = np.array([128.0, 512.0, 2048.0])
    vec = mwp_cwp(k.profile({"N": sizes, "TILE": 16}), gpu).to_frame()
    for i, n in enumerate(sizes):
        one = mwp_cwp(k.profile({"N": n, "TILE": 16}), gpu).to_frame()
        np.testing.assert_allclose(one.iloc[0].to_numpy(float), vec.iloc[i].to_numpy(float))
