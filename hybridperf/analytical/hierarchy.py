"""Hierarchical roofline with waves: levels and pipes per wave, tail wave, latency, L2 reuse, spills, power cap."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hybridperf.analytical._terms import Terms
from hybridperf.analytical.launch import LaunchState, launch_state
from hybridperf.arrays import FloatArray
from hybridperf.hardware import GPUSpec
from hybridperf.profile import KernelProfile

__all__ = ["LEVELS", "LEVEL_COLUMNS", "HierarchyResult", "hierarchy", "limiter_names"]

# The resources a launch can be limited by, in the order of HierarchyResult.limiter's codes: those of a wave,
# then the board's power cap and the SMs' block-launch rate (the whole launch).
LEVELS = ("issue", "fp32", "sfu", "shared memory", "load/store", "l2", "dram", "latency", "power", "block launch")
# HierarchyResult's time column of each level, in the order of LEVELS.
LEVEL_COLUMNS = ("issue_ms", "fp32_ms", "sfu_ms", "smem_ms", "lsu_ms", "l2_ms", "dram_ms", "latency_ms", "power_ms",
                 "block_launch_ms")
SECTOR_BYTES = 32.0


@dataclass(frozen=True, slots=True)
class HierarchyResult(Terms):
    """Traffic at each level (bytes, whole launch), each level's time (ms, whole launch, waves
    included), the wave geometry, the limiting level of the full waves and the time.

    ``*_ms`` of a level is the time the launch would take were that level its only limit; ``time_ms``
    is the sum over waves of the slowest level of each wave or, if longer, the power cap's time or the time
    the SMs take to start the launch's blocks (``block_launch_ms``; 0 where the spec gives no
    ``block_launch_cycles``), plus the launch overhead. ``energy_j`` is the board energy the launch's
    instructions take (NaN where the spec gives no energy per instruction or no board power: no power cap,
    ``power_ms`` 0).
    """

    dram_traffic_bytes: FloatArray
    l2_traffic_bytes: FloatArray
    l2_hit_ratio: FloatArray
    smem_traffic_bytes: FloatArray
    lsu_traffic_bytes: FloatArray
    spill_bytes: FloatArray
    spill_fraction: FloatArray
    issue_ms: FloatArray
    fp32_ms: FloatArray
    sfu_ms: FloatArray
    smem_ms: FloatArray
    lsu_ms: FloatArray
    l2_ms: FloatArray
    dram_ms: FloatArray
    latency_ms: FloatArray
    energy_j: FloatArray
    power_ms: FloatArray
    block_launch_ms: FloatArray
    full_waves: FloatArray
    tail_fraction: FloatArray
    wave_efficiency: FloatArray
    limiter: npt.NDArray[np.int64]
    bound_ms: FloatArray
    time_ms: FloatArray


def limiter_names(codes: npt.ArrayLike, feasible: npt.ArrayLike) -> list[str]:
    """The level name of each limiter code ('' where the launch is infeasible or has no limiter)."""
    return [LEVELS[int(i)] if ok and i >= 0 else "" for i, ok in zip(np.asarray(codes), np.asarray(feasible))]


def _per_block_cycles(p: KernelProfile, gpu: GPUSpec, st: LaunchState, spill_insts: FloatArray) -> list[FloatArray]:
    """Cycles one block occupies each SM-local resource: issue, FP32, SFU, shared memory, load/store."""
    wpb = st.warps_per_block
    ws = float(gpu.warp_size)
    mem = p.coal_mem_insts + p.uncoal_mem_insts
    insts = _issued_insts(p, spill_insts)
    issue = insts * wpb / gpu.issue_per_cycle_per_sm
    fp32 = np.maximum(p.fp_insts * wpb * ws, p.flops * p.threads_per_block / 2.0) / gpu.fp32_lanes_per_sm
    sfu = p.sfu_insts * wpb * ws / gpu.sfu_per_sm
    smem = np.maximum(p.smem_insts * wpb, _smem_wavefront_bytes(p, gpu) / gpu.smem_bytes_per_cycle_per_sm)
    lsu_bytes = _lsu_bytes_per_warp(p, spill_insts, gpu.warp_size) * wpb
    lsu = np.maximum(np.maximum((mem + spill_insts) * wpb, lsu_bytes / gpu.l1_bytes_per_cycle_per_sm),
                     p.lsu_wavefronts * wpb)
    return [issue, fp32, sfu, smem, lsu]


def _smem_wavefront_bytes(p: KernelProfile, gpu: GPUSpec) -> FloatArray:
    """Shared-memory bank traffic of one block at the GPU's bank rate: the bank conflicts of ``smem_bytes`` beyond
    ``smem_conflict_free_bytes`` take 1 / ``smem_bank_ways_per_cycle`` of their wavefronts, never fewer than the
    conflict-free ones (ways 1: ``smem_bytes`` as counted)."""
    blocks = np.maximum(p.blocks, 1.0)
    free = np.minimum(p.smem_conflict_free_bytes, p.smem_bytes) / blocks
    return np.maximum(free, p.smem_bytes / blocks / gpu.smem_bank_ways_per_cycle)


def _global_sector_bytes_per_warp(p: KernelProfile) -> FloatArray:
    """Bytes of the sectors a warp's global accesses touch (coalesced: ``load_bytes_per_warp``; uncoalesced:
    ``uncoal_per_mw`` 32 B sectors)."""
    return p.coal_mem_insts * p.load_bytes_per_warp + p.uncoal_mem_insts * p.uncoal_per_mw * SECTOR_BYTES


def _lsu_bytes_per_warp(p: KernelProfile, spill_insts: FloatArray, warp_size: int) -> FloatArray:
    """Bytes the load/store units move per warp: the global accesses' sectors and the 4-byte spill accesses."""
    return _global_sector_bytes_per_warp(p) + spill_insts * warp_size * 4.0


def _issued_insts(p: KernelProfile, spill_insts: FloatArray) -> FloatArray:
    """Instructions one thread issues: compute, SFU, global-memory and spill accesses (the issue level's
    count, and the power cap's per thread)."""
    return p.comp_insts + p.sfu_insts + p.coal_mem_insts + p.uncoal_mem_insts + spill_insts


def _power_ms(insts_per_thread: FloatArray, total_threads: FloatArray,
              gpu: GPUSpec) -> tuple[FloatArray, FloatArray]:
    """(energy J, power-cap time ms) of a launch: E = ``energy_per_inst_pj`` x thread instructions, and
    max(E / ``tdp_w`` - ``power_burst_ms``, 0); (NaN, 0) where the spec gives no energy or board power."""
    e_pj, tdp, burst = gpu.energy_per_inst_pj, gpu.tdp_w, gpu.power_burst_ms
    if e_pj is None or tdp is None or burst is None:
        return np.full(np.shape(total_threads), np.nan), np.zeros(np.shape(total_threads))
    energy = insts_per_thread * total_threads * e_pj * 1e-12
    return energy, np.maximum(energy / tdp * 1e3 - burst, 0.0)


def _block_launch_ms(blocks: FloatArray, active_sms: FloatArray, gpu: GPUSpec) -> FloatArray:
    """Time the SMs take to start every block of the launch: ceil(blocks / active SMs) x ``block_launch_cycles``
    at the core clock; 0 where the spec does not give the parameter."""
    c = gpu.block_launch_cycles
    if c is None:
        return np.zeros(np.shape(blocks))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.ceil(np.maximum(blocks, 1.0) / np.maximum(active_sms, 1.0) - 1e-9) * c / gpu.core_clock_hz * 1e3


def _latency_cycles(p: KernelProfile, gpu: GPUSpec, l2_share: FloatArray, dram_share: FloatArray) -> FloatArray:
    """One warp's critical path: its FP32 instructions at ``fp_latency_cycles`` over the ``ilp``
    independent accumulation chains, its global accesses at the average access time of the hierarchy
    (the L1 hit latency, plus the L2 share of the L2-L1 difference, plus the DRAM share of the DRAM-L2
    difference; seed 000 Eq. 12 with one more level) over the ``mlp`` independent ones in flight, a
    shared-memory round trip per barrier, and every other instruction one issue cycle; never below one
    instruction per cycle."""
    mem = p.coal_mem_insts + p.uncoal_mem_insts
    insts = p.comp_insts + p.sfu_insts + mem
    fp = np.minimum(p.fp_insts, p.comp_insts)
    l1, l2, dram = gpu.l1_hit_latency_cycles, gpu.l2_hit_latency_cycles, gpu.dram_latency_cycles
    amat = l1 + l2_share * max(l2 - l1, 0.0) + dram_share * max(dram - l2, 0.0)
    chain = (fp * gpu.fp_latency_cycles / np.maximum(p.ilp, 1.0) + (insts - fp - mem)
             + mem * amat / np.maximum(p.mlp, 1.0) + p.sync_insts * gpu.smem_latency_cycles)
    return np.maximum(chain, insts)


def _miss(capacity_bytes: float, distance_bytes: FloatArray) -> FloatArray:
    """Share of re-reads an L2 of ``capacity_bytes`` misses when ``distance_bytes`` are touched between
    two uses: 1 - capacity / distance, clipped to [0, 1] (the hit rate of a cache that keeps a random
    capacity-sized part of a cyclic stream; an assumption, see the docstring of :func:`hierarchy`)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.clip(1.0 - capacity_bytes / np.where(distance_bytes > 0, distance_bytes, np.inf), 0.0, 1.0)


def hierarchy(profile: KernelProfile, gpu: GPUSpec, *, launch: LaunchState | None = None,
              spilled_registers: npt.ArrayLike | None = None) -> HierarchyResult:
    """Execution time as a hierarchical roofline quantised into waves of resident blocks.

    A roofline per level of the hierarchy (Williams, Waterman and Patterson, CACM 2009, extended to
    every level as the hierarchical roofline of Yang, Kurth and Williams, "Hierarchical Roofline
    analysis for GPUs", CCPE 2020) applied per wave of blocks, as NeuSight's tile/wave decomposition
    does (Lee, Phanishayee and Mahajan, ASPLOS 2025: latency = waves x time per wave, one wave = every
    SM busy with its resident blocks). With r resident blocks per SM (occupancy, capped by the blocks
    an SM receives) on S active SMs:

        waves      W = B / (r S);  n_full = floor(W) full waves, a tail wave of b_t = B - n_full r S blocks
                   on ceil(b_t / S) blocks per SM (wave quantization)
        t(k, b)    = max(k C_issue, k C_fp32, k C_sfu, k C_smem, k C_lsu,
                         b L2_block / BW_l2, b DRAM_block / BW_dram, C_latency)   cycles, for a wave of
                   b blocks, k of them on the busiest SM
        cycles     = n_full t(r, r S) + t(ceil(b_t / S), b_t)
        time       = max(cycles / f_core, t_power, ceil(B / S) c_block / f_core) + launch overhead

    The power cap t_power = max(E / P - tau, 0), E = e x the thread instructions of the launch (the
    issue count below, spills included, times the threads), P the board power ``tdp_w``, e
    ``energy_per_inst_pj`` and tau ``power_burst_ms``: a part that would draw more than its board power
    at its boost clock lowers the clock until it does not, after running above the cap for about tau.
    This is the power cap of the energy roofline (Choi, Bedard, Fowler and Vuduc, "A Roofline Model of
    Energy", IPDPS 2013: time >= energy / power), with the energy of a launch counted per issued
    instruction so that configurations of one problem still differ by the work they issue. It decides
    the 70-75 W parts: NeuSight's cuBLAS GEMM on the T4 reaches 2.67e12 thread instructions per second
    in runs of 1-3 ms and 1.98e12 in runs of 30-100 ms (experiments/results/power_constants.md), while
    the 250 W parts hold their rate.

    The block-launch floor ceil(B / S) c_block / f_core: an SM starts a new block at most every c_block =
    ``block_launch_cycles`` cycles, however little the block does. Measured with this project's recorder
    (datasets/h200-cuda-bench, h100-cuda-bench; experiments/block_launch.py): the fastest runs of four
    different kernels with 32-128-thread blocks (dot, reduction, matadd, vecadd) take 79.5-80.5 ns per
    block per SM on both an H200 and an H100 SXM at 1980 MHz, 157 cycles, whatever their bytes; blocks of
    32 or 64 threads then run 2-3x slower than blocks of 256 moving the same bytes. Specs without the
    parameter have no such floor (not measured; Turing runs show at most 83-98 cycles per block).

    Per block (W = warps per block, w = warp size, per-thread counts from the descriptor):
    C_issue = (comp + sfu + global + spill insts) W / issue rate (``issue_per_cycle_per_sm``; by
    default 4 from compute capability 7.0, one warp instruction per cycle from each scheduler of the SM's four
    partitions (V100, Turing, A100, H100 whitepapers), before it the FP32 lane rate, MWP-CWP's issue assumption;
    measured / modelled time of the Kernel Tuner convolution, medians: A100 1.94 -> 2.64, RTX 2080 Ti and TITAN RTX
    2.38 / 2.71 -> 2.68 / 3.06 at 2 -> 4, beside the 128-lane GA10x parts' 2.31 / 2.88; the INT32 pipe not modelled);
    C_fp32 = max(fp_insts W w, flops x threads / 2) / FP32 lanes; C_sfu = sfu_insts W w / SFU lanes;
    C_smem = max(smem_insts W, smem bytes / ``smem_bytes_per_cycle_per_sm``) (one warp access per cycle,
    wide vectors take several), the bank conflicts of ``smem_bytes`` beyond ``smem_conflict_free_bytes`` at
    ``smem_bank_ways_per_cycle`` addresses per bank per cycle (2 on GA10x: experiments/smem_conflicts.py);
    C_lsu = max(global + spill insts, sector bytes /
    ``l1_bytes_per_cycle_per_sm``, ``lsu_wavefronts``) with sector bytes = coalesced x load_bytes_per_warp +
    uncoalesced x uncoal_per_mw x 32 B per warp instruction, and the L1 wavefronts (one tag lookup per cache
    line a warp access touches, one per cycle) where the descriptor counts them: the seed-004 matvec, whose
    lanes read rows apart, takes 32 per load, not the 8 cycles its 32 sectors' bytes imply, which the fresh
    H200 and H100 hold-outs showed (N = 49152: 192 blocks, two on some SMs, ran 3x the time of N = 31744; the
    latency chain alone predicted 0.41x of it). The latency chain C_latency is one warp's critical path:
    ALU instructions at ``avg_inst_latency_cycles`` and shared-memory ones at ``smem_latency_cycles``
    over ``ilp`` independent ones, global accesses at the L2 hit latency plus the DRAM share of the
    DRAM-L2 latency difference over ``mlp``, a barrier one shared-memory latency (Hong and Kim's
    per-warp memory and computation periods, ISCA 2009, without their overlap terms: the wave is as
    slow as its slowest resource, or as one warp's chain when too few warps hide it).

    Traffic: DRAM carries ``dram_bytes`` plus the re-reads ``reread_bytes`` that L2 misses, a share
    1 - L2 / ``reread_distance_bytes`` (clipped to [0, 1]: an L2 holding a random part of a cyclic
    stream; an assumption, not a paper's equation) plus the local memory beyond what L2 holds; L2
    carries max(``l2_bytes``, DRAM traffic) plus the local-memory traffic. Where L1 does not serve global
    loads (``limits.global_loads_cached_in_l1`` false: cc 3.0), L2 carries at least every sector the warps'
    global accesses touch (the load/store level's global bytes): on the GTX 680's UCI SGEMM runs, Xgemm
    reading A straight from global memory (SA = 0) ran 2.6-3.1x slower than staging it in shared memory
    within the measured optimum's tile family, which the model without this missed (Spearman 0.25 over
    the family's 288 configurations; 0.85 with it).

    Spills: registers the descriptor asks beyond ``max_registers_per_thread`` (``spilled_registers``,
    given by the caller before the clamp) are spilled; a fraction f = spilled / asked of the
    register accesses goes to local memory: 2 f ``comp_insts`` 4-byte accesses per thread (a
    load and a store per spilled operand; an estimate), through the load/store units.

    Local memory: the spills and the descriptor's own local arrays (``local_traffic_bytes`` of loads and
    stores, ``local_bytes_per_thread`` allocated per thread; e.g. an array indexed at run time) go through
    L2 (the L1 hits of small allocations are not modelled), and a share 1 - L2 / (resident threads x
    (4 x spilled + ``local_bytes_per_thread``)) of them (clipped to [0, 1], the re-read rule above: every
    resident thread's allocation is touched between two uses of one) reaches DRAM. On KTT's CoulombSum3d this
    is what decides the configurations whose energyValue[] nvcc put in local memory (``ktt-coulomb-sum-3d``):
    the descriptor's local traffic is the recorded local sectors' bytes within 2 % on the RTX 2080 Ti, and
    without it the model alone ranked the GTX 1070's runs at Spearman 0.14 (0.905 with it;
    experiments/results/kt_analytical_rank.md).

    Parameters
    ----------
    profile : KernelProfile
        Launch resources and per-thread counts, with the hierarchy's byte counts (``smem_bytes``,
        ``l2_bytes``, ``reread_bytes``, ``reread_distance_bytes``) and local memory (``local_traffic_bytes``,
        ``local_bytes_per_thread``).
    gpu : GPUSpec
        Uses the SM count, core clock, DRAM and L2 bandwidth (GB/s), L2 size, lane counts, the
        per-SM shared-memory and L1 bytes per cycle, the issue rate, latencies (cycles), the
        launch overhead (us) and, for the power cap, the board power, energy per instruction and burst.
    launch : LaunchState, optional
        Precomputed launch geometry.
    spilled_registers : array_like, optional
        Registers per thread beyond the architecture's maximum (default: the profile's excess).

    Returns
    -------
    HierarchyResult
        Unlaunchable rows (``launch.reason``) have NaN times.
    """
    st = launch if launch is not None else launch_state(profile, gpu)
    p = profile
    cap = float(gpu.limits.max_registers_per_thread)
    asked = p.registers_per_thread
    spilled = np.maximum(asked - cap, 0.0) if spilled_registers is None else \
        np.broadcast_to(np.asarray(spilled_registers, dtype=np.float64), asked.shape)
    frac = np.where(spilled > 0, spilled / np.maximum(np.minimum(asked, cap) + spilled, 1.0), 0.0)
    spill_insts = 2.0 * frac * p.comp_insts
    energy, power_ms = _power_ms(_issued_insts(p, spill_insts), p.total_threads, gpu)
    block_launch_ms = _block_launch_ms(p.blocks, st.active_sms, gpu)
    spill_bytes = spill_insts * 4.0 * p.total_threads
    l2_capacity = gpu.l2_cache_kib * 1024.0
    resident_threads = st.active_blocks_per_sm * st.active_sms * p.threads_per_block
    reread_miss = _miss(l2_capacity, p.reread_distance_bytes)
    # Local memory: the descriptor's local arrays and the spilled registers, each thread's own, all resident
    # threads' allocations between two uses of one of them.
    local_traffic = spill_bytes + p.local_traffic_bytes
    local_footprint = spilled * 4.0 + p.local_bytes_per_thread
    local_miss = np.where(local_footprint > 0, _miss(l2_capacity, local_footprint * resident_threads), 0.0)
    dram = p.dram_bytes + p.reread_bytes * reread_miss + local_traffic * local_miss
    l2 = np.maximum(p.l2_bytes, dram) + local_traffic
    if not gpu.limits.global_loads_cached_in_l1:  # every global sector crosses L2 (cc 3.0)
        l2 = np.maximum(l2, _global_sector_bytes_per_warp(p) * st.total_warps + local_traffic)
    lsu_bytes = _lsu_bytes_per_warp(p, spill_insts, gpu.warp_size) * st.total_warps
    with np.errstate(divide="ignore", invalid="ignore"):
        l2_share = np.clip(np.where(lsu_bytes > 0, l2 / lsu_bytes, 1.0), 0.0, 1.0)
        dram_share = np.clip(np.where(lsu_bytes > 0, dram / lsu_bytes, 1.0), 0.0, 1.0)
    blocks = np.maximum(p.blocks, 1.0)
    per_sm = _per_block_cycles(p, gpu, st, spill_insts)
    clock_hz = gpu.core_clock_hz
    per_block_global = [l2 / blocks / (gpu.l2_bandwidth_gbs * 1e9 / clock_hz),
                        dram / blocks / (gpu.dram_bandwidth_gbs * 1e9 / clock_hz)]
    chain = _latency_cycles(p, gpu, l2_share, dram_share)
    r, s = st.active_blocks_per_sm, st.active_sms
    with np.errstate(invalid="ignore"):
        n_full = np.floor(st.rep + 1e-9)
        tail_blocks = np.maximum(p.blocks - n_full * r * s, 0.0)
        tail_per_sm = np.ceil(tail_blocks / s - 1e-9)
        levels_full = [r * c for c in per_sm] + [r * s * c for c in per_block_global] + [chain]
        levels_tail = [tail_per_sm * c for c in per_sm] + [tail_blocks * c for c in per_block_global] + [chain]
        tail_on = tail_blocks > 0
        level_cycles = [n_full * f + np.where(tail_on, t, 0.0) for f, t in zip(levels_full, levels_tail)]
        cycles = n_full * np.max(levels_full, axis=0) + np.where(tail_on, np.max(levels_tail, axis=0), 0.0)
        bound = np.max([blocks * c / s for c in per_sm] + [blocks * c for c in per_block_global], axis=0)
        limiter = np.argmax(np.where(n_full > 0, np.array(levels_full), np.array(levels_tail)), axis=0)
    to_ms = 1e3 / clock_hz
    floor_ms = np.maximum(power_ms, block_launch_ms)
    limiter = np.where(floor_ms > cycles * to_ms,
                       np.where(power_ms >= block_launch_ms, LEVELS.index("power"), LEVELS.index("block launch")),
                       limiter)
    overhead_ms = gpu.launch_overhead_us * 1e-3
    nan = np.where(st.launchable, 1.0, np.nan)
    ms = [c * to_ms * nan for c in level_cycles]
    return HierarchyResult(
        dram_traffic_bytes=dram, l2_traffic_bytes=l2, l2_hit_ratio=1.0 - reread_miss,
        smem_traffic_bytes=p.smem_bytes, lsu_traffic_bytes=lsu_bytes,
        spill_bytes=spill_bytes, spill_fraction=frac,
        issue_ms=ms[0], fp32_ms=ms[1], sfu_ms=ms[2], smem_ms=ms[3], lsu_ms=ms[4], l2_ms=ms[5], dram_ms=ms[6],
        latency_ms=ms[7], energy_j=energy * nan, power_ms=power_ms * nan, block_launch_ms=block_launch_ms * nan,
        full_waves=n_full * nan,
        tail_fraction=tail_blocks / (r * s), wave_efficiency=st.rep / np.maximum(st.waves, 1.0),
        limiter=np.where(st.launchable, limiter, -1), bound_ms=np.maximum(bound * to_ms, floor_ms) * nan,
        time_ms=(np.maximum(cycles * to_ms, floor_ms) + overhead_ms) * nan,
    )

