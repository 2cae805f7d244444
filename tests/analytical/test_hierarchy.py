"""The hierarchical roofline with waves: hand-computed cases, wave quantization, L2 reuse, spills, ILP."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from hybridperf.analytical.hierarchy import LEVELS, hierarchy
from hybridperf.analytical.launch import launch_state
from hybridperf.hardware import load_gpu
from hybridperf.kernel import load_kernel
from hybridperf.profile import KernelProfile

GPU = load_gpu("a100-pcie-40gb")  # 108 SMs, 1410 MHz, 64 FP32 lanes, 1555 GB/s DRAM, 40 MiB L2


def _fma_profile(blocks: float, **counts: float) -> KernelProfile:
    """256-thread blocks of pure FP32 work (1000 FMAs per thread) unless counts say otherwise."""
    values = dict(threads_per_block=256, blocks=blocks, registers_per_thread=32, smem_per_block_bytes=0,
                  comp_insts=1000.0, coal_mem_insts=0.0, uncoal_mem_insts=0.0, ilp=8.0, dram_bytes=0.0)
    values.update(counts)
    return KernelProfile.from_values(**values)


def test_one_full_wave_of_fp32_work_by_hand() -> None:
    # 8 resident blocks of 8 warps per SM (2048 threads / 256); 108 x 8 blocks is exactly one wave.
    prof = _fma_profile(108 * 8)
    h = hierarchy(prof, GPU)
    # FP32 level: 1000 FMAs x 8 warps x 8 blocks x 32 lanes / 64 FP32 lanes = 32,000 cycles (the four
    # schedulers could issue them twice as fast: 16,000 cycles).
    cycles = 1000 * 8 * 8 * 32 / 64
    assert h.full_waves[0] == 1 and h.tail_fraction[0] == 0
    assert LEVELS[h.limiter[0]] == "fp32"
    assert h.time_ms[0] == pytest.approx(cycles / (GPU.core_clock_mhz * 1e3) + GPU.launch_overhead_us * 1e-3)


def test_volta_and_later_issue_other_instructions_beside_fp32_by_hand() -> None:
    """From compute capability 7.0 an SM's four schedulers each dispatch one warp instruction per cycle while
    its 64 FP32 lanes take two FP32 warp instructions per cycle (V100, Turing and A100 whitepapers): half FMAs and
    half other instructions run at the FP32 rate of the FMAs alone. Before Volta (P100, cc 6.0: 64 lanes) every
    instruction goes at the FP32 lanes' rate, twice the time."""
    mixed = _fma_profile(108 * 8, fp_insts=500.0)  # 1000 instructions per thread, 500 of them FP32
    h = hierarchy(mixed, GPU)
    issue, fp32 = 1000 * 64 / 4, 500 * 64 * 32 / 64  # cycles per SM: 8 blocks x 8 warps
    assert issue == fp32 == 16_000
    overhead = GPU.launch_overhead_us * 1e-3
    assert h.time_ms[0] - overhead == pytest.approx(fp32 / (GPU.core_clock_mhz * 1e3))
    assert h.time_ms[0] - overhead == pytest.approx((hierarchy(_fma_profile(108 * 8, comp_insts=500.0), GPU).time_ms[0]
                                                     - overhead))  # the other 500 cost nothing extra
    p100 = load_gpu("tesla-p100-pcie-16gb")  # 56 SMs, 64 lanes, cc 6.0: 2048 threads per SM, 8 blocks
    hp = hierarchy(_fma_profile(56 * 8, fp_insts=500.0), p100)
    assert LEVELS[hp.limiter[0]] == "issue"
    assert hp.time_ms[0] - p100.launch_overhead_us * 1e-3 == pytest.approx(1000 * 64 / 2 / (p100.core_clock_mhz * 1e3))


def test_tail_wave_costs_a_whole_wave_per_busiest_sm() -> None:
    wave = 108 * 8
    one, plus = (hierarchy(_fma_profile(b), GPU) for b in (wave, wave + 1))
    overhead = GPU.launch_overhead_us * 1e-3
    # One more block runs alone on one SM: the tail costs one block's issue time, 1/8 of a full wave.
    assert plus.time_ms[0] - overhead == pytest.approx((one.time_ms[0] - overhead) * (1 + 1 / 8))
    two = hierarchy(_fma_profile(2 * wave), GPU)
    assert two.time_ms[0] - overhead == pytest.approx(2 * (one.time_ms[0] - overhead))


def test_l2_keeps_rereads_it_can_hold() -> None:
    l2 = GPU.l2_cache_kib * 1024
    base = dict(coal_mem_insts=10.0, dram_bytes=1e8, reread_bytes=4e8)
    fits = hierarchy(_fma_profile(864, reread_distance_bytes=l2 / 2, **base), GPU)
    thrash = hierarchy(_fma_profile(864, reread_distance_bytes=l2 * 4, **base), GPU)
    assert fits.dram_traffic_bytes[0] == pytest.approx(1e8)
    assert fits.l2_hit_ratio[0] == 1
    # A re-read distance four times the L2 misses 1 - 1/4 of the re-reads.
    assert thrash.dram_traffic_bytes[0] == pytest.approx(1e8 + 4e8 * 0.75)
    assert thrash.l2_traffic_bytes[0] == pytest.approx(5e8)  # l2_bytes defaults to dram + re-reads


def test_spills_cost_time_and_grow_with_the_excess() -> None:
    prof = _fma_profile(864, coal_mem_insts=4.0, dram_bytes=864 * 256 * 16.0)
    times = [hierarchy(prof, GPU, spilled_registers=s) for s in (0.0, 8.0, 64.0)]
    assert times[0].spill_bytes[0] == 0
    assert 0 < times[1].spill_bytes[0] < times[2].spill_bytes[0]
    assert times[0].time_ms[0] < times[1].time_ms[0] < times[2].time_ms[0]


def test_local_arrays_reach_dram_beyond_what_l2_holds_of_the_resident_threads() -> None:
    # 864 blocks of 256 threads: 8 resident per SM on all 108 SMs, 221,184 resident threads.
    l2, resident = GPU.l2_cache_kib * 1024, 108 * 8 * 256
    base = dict(coal_mem_insts=10.0, dram_bytes=1e8, local_traffic_bytes=6e9)
    fits = hierarchy(_fma_profile(864, local_bytes_per_thread=64.0, **base), GPU)  # 14.2 MB < 40 MiB
    spills = hierarchy(_fma_profile(864, local_bytes_per_thread=512.0, **base), GPU)  # 113 MB
    assert fits.dram_traffic_bytes[0] == pytest.approx(1e8)
    assert fits.l2_traffic_bytes[0] == pytest.approx(1e8 + 6e9)
    assert spills.dram_traffic_bytes[0] == pytest.approx(1e8 + 6e9 * (1 - l2 / (512 * resident)))
    assert spills.l2_traffic_bytes[0] == pytest.approx(spills.dram_traffic_bytes[0] + 6e9)
    assert spills.time_ms[0] > fits.time_ms[0] > hierarchy(_fma_profile(864, coal_mem_insts=10.0, dram_bytes=1e8),
                                                           GPU).time_ms[0]
    # Spilled registers share the allocation: 112 spilled registers (448 B) + 64 B thrash like 512 B.
    both = hierarchy(_fma_profile(864, local_bytes_per_thread=64.0, **base), GPU, spilled_registers=112.0)
    local = spills.dram_traffic_bytes[0] - 1e8
    assert both.dram_traffic_bytes[0] - 1e8 == pytest.approx((6e9 + both.spill_bytes[0]) * local / 6e9)


@pytest.mark.parametrize("name", ["clblast-xgemm", "neusight-gemm", "kt-convolution"])
def test_more_ilp_never_slower(name: str) -> None:
    k = load_kernel(name)
    prof = k.profile({})
    regs = np.minimum(prof.registers_per_thread, GPU.limits.max_registers_per_thread)
    prof = dataclasses.replace(prof, registers_per_thread=regs)
    st = launch_state(prof, GPU)
    times = [hierarchy(dataclasses.replace(prof, ilp=np.full_like(prof.ilp, v)), GPU, launch=st).time_ms[0]
             for v in (1.0, 4.0, 64.0)]
    assert times[0] >= times[1] >= times[2]


def test_unlaunchable_rows_have_no_time() -> None:
    prof = _fma_profile(864, smem_per_block_bytes=10**9)  # no block fits on an SM
    h = hierarchy(prof, GPU)
    assert np.isnan(h.time_ms[0]) and np.isnan(h.bound_ms[0]) and h.limiter[0] == -1


def test_time_is_never_below_the_bound() -> None:
    k = load_kernel("clblast-xgemm")
    prof = k.profile({"MWG": np.array([16, 64, 128.0]), "NWG": np.array([16, 64, 128.0])})
    h = hierarchy(dataclasses.replace(prof, registers_per_thread=np.minimum(prof.registers_per_thread, 255)), GPU)
    assert (h.time_ms >= h.bound_ms).all()


def test_power_cap_by_hand_on_a_70_watt_part() -> None:
    """The T4 at its board power: E = e x thread instructions, time = E / P - burst once that exceeds the waves."""
    t4 = load_gpu("tesla-t4")
    assert t4.energy_per_inst_pj == pytest.approx(2.24 * 12) and t4.tdp_w == 70
    blocks = 40 * 4 * 100  # 100 full waves of 4 resident 256-thread blocks per SM on 40 SMs
    h = hierarchy(_fma_profile(blocks, comp_insts=20000.0), t4)
    energy = 20000.0 * 256 * blocks * t4.energy_per_inst_pj * 1e-12
    power_ms = energy / 70 * 1e3 - t4.power_burst_ms
    waves_ms = 100 * 4 * 8 * 20000.0 / (64 / 32) / (t4.core_clock_mhz * 1e3)  # the issue level of 100 waves
    assert h.energy_j[0] == pytest.approx(energy)
    assert h.power_ms[0] == pytest.approx(power_ms) and power_ms > waves_ms
    assert LEVELS[h.limiter[0]] == "power"
    assert h.time_ms[0] == pytest.approx(power_ms + t4.launch_overhead_us * 1e-3)
    assert h.bound_ms[0] == pytest.approx(power_ms)


def test_a_short_launch_runs_in_its_burst_and_a_part_without_power_data_is_uncapped() -> None:
    t4 = load_gpu("tesla-t4")
    short = hierarchy(_fma_profile(40 * 4, comp_insts=1000.0), t4)  # about 1 mJ: inside the burst
    assert short.power_ms[0] == 0 and LEVELS[short.limiter[0]] != "power"
    unknown = dataclasses.replace(t4, tdp_w=None)
    big = _fma_profile(40 * 4 * 100, comp_insts=20000.0)
    h, free = hierarchy(big, t4), hierarchy(big, unknown)
    assert np.isnan(free.energy_j[0]) and free.power_ms[0] == 0 and free.time_ms[0] < h.time_ms[0]
    no_node = load_gpu("geforce-rtx-3060-laptop")  # no board power in its spec: the OEM sets it
    assert no_node.tdp_w is None and hierarchy(big, no_node).power_ms[0] == 0


def test_the_power_cap_orders_configurations_by_the_instructions_they_issue() -> None:
    """Two launches of the same work, one issuing twice the instructions: on a capped part the second takes
    twice the energy and, past the burst, about twice the time."""
    t4 = load_gpu("tesla-t4")
    lean, busy = (hierarchy(_fma_profile(40 * 4 * 100, comp_insts=c), t4) for c in (20000.0, 40000.0))
    assert LEVELS[lean.limiter[0]] == LEVELS[busy.limiter[0]] == "power"
    assert busy.energy_j[0] == pytest.approx(2 * lean.energy_j[0])
    assert busy.power_ms[0] + t4.power_burst_ms == pytest.approx(2 * (lean.power_ms[0] + t4.power_burst_ms))


def test_block_launch_floor_by_hand_on_gh100() -> None:
    """An SM starts a block at most every ``block_launch_cycles``: 2,000,000 blocks of 64 threads doing
    almost nothing take ceil(blocks / 132) x 157 cycles at 1980 MHz; a spec without the parameter has
    no such floor."""
    h200 = load_gpu("h200")
    assert h200.block_launch_cycles == 157 and GPU.block_launch_cycles is None
    prof = _fma_profile(2_000_000, threads_per_block=64, comp_insts=4.0)
    h = hierarchy(prof, h200)
    floor_ms = np.ceil(2_000_000 / 132) * 157 / 1.98e9 * 1e3
    assert h.block_launch_ms[0] == pytest.approx(floor_ms)
    assert LEVELS[h.limiter[0]] == "block launch"
    assert h.time_ms[0] == pytest.approx(floor_ms + h200.launch_overhead_us * 1e-3)
    assert h.bound_ms[0] == pytest.approx(floor_ms)
    free = hierarchy(prof, dataclasses.replace(h200, block_launch_cycles=None))
    assert free.block_launch_ms[0] == 0 and free.time_ms[0] < h.time_ms[0]
    assert LEVELS[free.limiter[0]] != "block launch"
    # Few heavy blocks: the waves take far longer than starting the blocks, which changes nothing.
    heavy = _fma_profile(132 * 8, comp_insts=100000.0)
    assert hierarchy(heavy, h200).time_ms[0] == hierarchy(
        heavy, dataclasses.replace(h200, block_launch_cycles=None)).time_ms[0]


def test_without_l1_for_global_loads_l2_carries_every_sector_by_hand() -> None:
    # 108 x 8 blocks of 256 threads, 100 uncoalesced loads each touching 32 sectors per warp: 2.83 GB of
    # sectors against 1 MB of l2_bytes. With L1 serving global loads L2 sees only l2_bytes; without, every sector.
    prof = _fma_profile(108 * 8, uncoal_mem_insts=100.0, uncoal_per_mw=32.0, l2_bytes=1e6)
    sectors = 100 * 32 * 32 * (108 * 8 * 256 / 32)
    cached = hierarchy(prof, GPU)
    bypass_gpu = dataclasses.replace(GPU, limits=dataclasses.replace(GPU.limits, global_loads_cached_in_l1=False))
    bypass = hierarchy(prof, bypass_gpu)
    assert cached.l2_traffic_bytes[0] == pytest.approx(1e6)
    assert bypass.l2_traffic_bytes[0] == pytest.approx(sectors)
    assert bypass.l2_ms[0] == pytest.approx(sectors / (GPU.l2_bandwidth_gbs * 1e9) * 1e3)
    assert bypass.time_ms[0] >= cached.time_ms[0]


def test_only_cc_3_0_bypasses_l1_for_global_loads() -> None:
    # Programming Guide: cc 3.x caches global loads in L2 only; cc 3.5+ adds the read-only data cache (__ldg).
    assert not load_gpu("geforce-gtx-680").limits.global_loads_cached_in_l1  # cc 3.0
    assert all(load_gpu(g).limits.global_loads_cached_in_l1 for g in ("tesla-k40c", "a100-pcie-40gb", "titan-rtx"))


def test_gtx_680_xgemm_reading_a_from_global_memory_is_slower_as_measured() -> None:
    # UCI SGEMM (real GTX 680 runs): within the measured optimum's tile family (MWG = NWG = 128, KWG = 16,
    # 16 x 32 threads; 288 configurations), reading A straight from global memory (SA = 0) ran 2.6-3.1x slower.
    # The model charged it nothing (Spearman 0.25 over the family) until L2 carried every global sector.
    from scipy.stats import spearmanr

    from hybridperf.analytical.run import analyze
    from hybridperf.datasets import load_dataset
    from hybridperf.learn.features import descriptor_params

    rows = load_dataset("uci-sgemm-gtx680")
    fam = rows[(rows.status == "ok") & (rows["config.MWG"] == 128) & (rows["config.NWG"] == 128)
               & (rows["config.KWG"] == 16) & (rows["config.MDIMC"] == 16) & (rows["config.NDIMC"] == 32)]
    kernel = load_kernel("clblast-xgemm")
    t = analyze(kernel, "geforce-gtx-680", descriptor_params(kernel, fam).reset_index(drop=True),
                models=["hierarchical"]).terms["hierarchical"].time_ms.to_numpy()
    sa = fam["config.SA"].to_numpy()
    assert len(fam) == 288
    assert np.median(t[sa == 0]) > 1.5 * np.median(t[sa == 1])
    assert spearmanr(t, fam["time_ms"]).statistic > 0.6


def test_bank_conflicts_at_the_gpu_bank_rate_by_hand() -> None:
    """A warp access of one word per lane is one 128 B wavefront without bank conflicts and n with n-way ones
    (smem_bytes = n x smem_conflict_free_bytes). The A100 pays each of them; a GA10x part, whose banks serve two
    addresses a cycle (its spec's smem_bank_ways_per_cycle, from the padded twins of experiments/smem_conflicts.py),
    pays none up to 2-way and half beyond: 4-way takes 2 wavefronts' time, 8-way 4."""
    ga10x = load_gpu("rtx-a4000")
    assert (GPU.smem_bank_ways_per_cycle, ga10x.smem_bank_ways_per_cycle) == (1, 2)

    def smem_ms(gpu, degree: int) -> float:
        blocks = gpu.sm_count * 8  # one wave of 8 warps per block, 8 blocks per SM
        free = 8 * blocks * 128 * 1000.0  # 1000 shared-memory accesses per thread, one wavefront per warp access
        prof = _fma_profile(blocks, comp_insts=1000.0, fp_insts=0.0, smem_insts=1000.0, smem_bytes=degree * free,
                            smem_conflict_free_bytes=free)
        return float(hierarchy(prof, gpu).smem_ms[0])

    for degree, paid in ((1, 1), (2, 2), (4, 4), (8, 8)):
        assert smem_ms(GPU, degree) == pytest.approx(paid * smem_ms(GPU, 1))
    for degree, paid in ((1, 1), (2, 1), (4, 2), (8, 4)):
        assert smem_ms(ga10x, degree) == pytest.approx(paid * smem_ms(ga10x, 1))
    # Per wavefront: 8 blocks x 8 warps x 1000 accesses at 128 B over 128 B per cycle.
    assert smem_ms(GPU, 1) == pytest.approx(8 * 8 * 1000 / (GPU.core_clock_mhz * 1e3))
