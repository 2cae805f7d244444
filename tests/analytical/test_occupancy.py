"""Occupancy calculator: golden values from the seeds and a brute-force block-packing reference."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridperf.analytical.occupancy import occupancy
from hybridperf.hardware import CCLimits, load_cc_limits, load_gpu

CCS = ["1.0", "1.3", "2.0", "3.2", "3.5", "3.7", "5.2", "5.3", "6.0", "6.1", "6.2", "7.0", "7.5", "8.0", "8.6",
       "8.9", "9.0"]


def test_golden_cc86_seed004_tables_1_2() -> None:
    r = occupancy(load_cc_limits("8.6"), 320, 10, 1024).row()
    assert r["active_blocks_per_sm"] == 4
    assert r["active_warps_per_sm"] == 40
    assert r["active_threads_per_sm"] == 1280
    assert r["occupancy"] == pytest.approx(40 / 48, abs=1e-12)


def test_golden_8800gtx_seed003_section4() -> None:
    r = occupancy(load_gpu("8800-gtx").limits, 256, 13, 2088).row()
    assert r["active_blocks_per_sm"] == 2
    assert r["limiter"] == "registers"


def _warp_fits(L: CCLimits, warps: int, per_warp: int, parts: int) -> bool:
    """cuda_occupancy.h's per-block register checks for a register file split into ``parts``."""
    assumed = per_warp * math.ceil(warps / parts) * parts  # hardware check: warps rounded up to parts
    return assumed <= L.max_registers_per_block and per_warp * warps <= L.max_registers_per_block


def _brute_force(L: CCLimits, t: int, r: int, s: int) -> int:
    """Place blocks on an SM one by one, allocating each resource, until one runs out.

    Registers on cc >= 2.0 follow NVIDIA's cuda_occupancy.h (cudaOccMaxBlocksPerSMRegsLimit): the
    SM's register file is split into ``warp_alloc_granularity`` sub-partitions; each warp takes
    registers (per warp, rounded up to the allocation unit) from the sub-partition with the most
    left; a block is resident only if all its warps find room.
    """
    warps = math.ceil(t / L.warp_size)
    if t > L.max_threads_per_block or r > L.max_registers_per_thread or s > L.max_smem_per_block_bytes:
        return 0
    per_warp = math.ceil(r * L.warp_size / L.register_alloc_unit) * L.register_alloc_unit
    if L.register_alloc_granularity == "warp":
        if not _warp_fits(L, warps, per_warp, L.warp_alloc_granularity):
            return 0
        free = [L.registers_per_sm // L.warp_alloc_granularity] * L.warp_alloc_granularity
    else:
        w = math.ceil(warps / L.warp_alloc_granularity) * L.warp_alloc_granularity
        regs_block = math.ceil(w * L.warp_size * r / L.register_alloc_unit) * L.register_alloc_unit
        if regs_block > L.max_registers_per_block:
            return 0
    smem_block = math.ceil((s + L.reserved_smem_per_block_bytes) / L.smem_alloc_unit_bytes) * L.smem_alloc_unit_bytes
    blocks = used_w = used_t = used_s = 0
    while True:
        nxt = blocks + 1
        if nxt > L.max_blocks_per_sm or used_w + warps > L.max_warps_per_sm or used_t + t > L.max_threads_per_sm:
            return blocks
        if used_s + smem_block > L.smem_per_sm_bytes and smem_block > 0:
            return blocks
        if r > 0:
            if L.register_alloc_granularity == "warp":
                trial = list(free)
                for _ in range(warps):
                    i = max(range(len(trial)), key=trial.__getitem__)
                    if trial[i] < per_warp:
                        return blocks
                    trial[i] -= per_warp
                free = trial
            elif nxt * regs_block > L.registers_per_sm:
                return blocks
        blocks, used_w, used_t, used_s = nxt, used_w + warps, used_t + t, used_s + smem_block


@settings(max_examples=300, deadline=None)
@given(cc=st.sampled_from(CCS), t=st.integers(1, 1100), r=st.integers(0, 260), s=st.integers(0, 110_000))
def test_matches_brute_force_packing(cc: str, t: int, r: int, s: int) -> None:
    L = load_cc_limits(cc)
    res = occupancy(L, t, r, s).row()
    expected = _brute_force(L, t, r, s)
    if expected == 0:
        assert not res["feasible"] and res["reason"]
        assert math.isnan(res["occupancy"])
    else:
        assert res["feasible"], res["reason"]
        assert res["active_blocks_per_sm"] == expected
        assert 0 < res["occupancy"] <= 1


def test_infeasible_reasons() -> None:
    L = load_cc_limits("8.6")
    r = occupancy(L, [2048, 256, 256, 256], [10, 300, 10, 10], [0, 0, 200_000, 0])
    assert list(r.feasible) == [False, False, False, True]
    assert "threads per block" in r.reason[0]
    assert "registers per thread" in r.reason[1]
    assert "shared memory" in r.reason[2]
    assert list(r.limiter[:3]) == ["infeasible"] * 3
    assert np.isnan(r.occupancy[:3]).all()


def test_scalar_and_array_agree() -> None:
    L = load_cc_limits("7.0")
    t, regs, smem = [64, 128, 256, 1024], [32, 64, 16, 40], [0, 4096, 49152, 1000]
    vec = occupancy(L, t, regs, smem).to_frame()
    for i in range(4):
        one = occupancy(L, t[i], regs[i], smem[i]).to_frame().iloc[0]
        assert one.equals(vec.iloc[i].rename(one.name)) or all(
            (a == b) or (isinstance(a, float) and np.isnan(a) and np.isnan(b)) for a, b in zip(one, vec.iloc[i]))
