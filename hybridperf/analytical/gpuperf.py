"""GPUPerf (Sim et al., PPoPP 2012, seed 000): T_comp, T_mem, T_overlap and the benefit metrics."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hybridperf.analytical._terms import Terms
from hybridperf.analytical.launch import LaunchState, dram_bytes_per_mem_warp, launch_state
from hybridperf.arrays import FloatArray
from hybridperf.hardware import GPUSpec
from hybridperf.profile import KernelProfile

__all__ = ["GPUPerfResult", "gpuperf"]


@dataclass(frozen=True, slots=True)
class GPUPerfResult(Terms):
    """Every term of GPUPerf, in cycles unless the name says otherwise."""

    insts: FloatArray
    itilp: FloatArray
    itilp_max: FloatArray
    w_parallel: FloatArray
    o_sync: FloatArray
    o_sfu: FloatArray
    o_cfdiv: FloatArray
    o_bank: FloatArray
    w_serial: FloatArray
    t_comp: FloatArray
    avg_trans_warp: FloatArray
    avg_dram_lat: FloatArray
    amat: FloatArray
    request_bytes: FloatArray
    mwp: FloatArray
    mwp_peak_bw: FloatArray
    cwp: FloatArray
    mwp_cp: FloatArray
    itmlp: FloatArray
    t_mem: FloatArray
    f_overlap: FloatArray
    t_overlap: FloatArray
    t_exec: FloatArray
    t_mem_prime: FloatArray
    t_fp: FloatArray
    t_mem_min: FloatArray
    b_itilp: FloatArray
    b_serial: FloatArray
    b_fp: FloatArray
    b_memlp: FloatArray
    time_ms: FloatArray


def gpuperf(profile: KernelProfile, gpu: GPUSpec, *, launch: LaunchState | None = None,
            o_cfdiv: npt.ArrayLike = 0.0, o_bank: npt.ArrayLike = 0.0,
            active_blocks_per_sm: npt.ArrayLike | None = None) -> GPUPerfResult:
    """GPUPerf execution time and its four potential-benefit metrics (seed 000).

    T_exec = T_comp + T_mem - T_overlap (Eq. 1) with T_comp = W_parallel + W_serial (Eqs. 2-10),
    T_mem from ITMLP and AMAT (Eqs. 11-15), T_overlap (Eqs. 16-17), MWP/CWP from Appendix A,
    T_fp and T_mem_min (Eqs. 18-19) and B_itilp, B_serial, B_fp, B_memlp (Eqs. 20-23), as
    restated in MODELS.md section 3.

    Counts are per warp (= per thread for non-divergent code): ``#insts`` = ``comp_insts`` +
    global memory instructions (``comp_insts`` holds shared-memory and sync instructions and
    excludes SFU instructions, as Table 2 defines #insts); ``#mem_insts`` = global
    memory instructions; ``avg_trans_warp`` = (coalesced + uncoalesced * uncoal_per_mw) /
    #mem_insts. ``hit_lat`` is the L1 hit latency. B_fp is reported as computed and may be
    negative (MODELS.md 3); it is not clamped.

    ``transaction_size`` of BW_per_warp (Appendix A: "transaction size for a DRAM request", 128 B
    on the paper's Tesla C2050, where one coalesced warp request is one 128 B transaction) is
    read as the bytes one warp memory request moves from DRAM (``request_bytes``, see
    :func:`~hybridperf.analytical.launch.dram_bytes_per_mem_warp`): ``load_bytes_per_warp``
    (128 B, as seed 002 Eq. 7), or the profile's DRAM bytes per DRAM-reaching warp request where
    larger. It is not the GPU's ``transaction_bytes``: on cc >= 3.0 that is the 32 B sector, a
    quarter of what a coalesced warp request moves, and using it let MWP_peak_bw admit 4x the
    peak bandwidth (times down to 0.27x the DRAM floor). With ``request_bytes``, T_mem (hence
    T_exec) is never below ``dram_bytes`` / peak bandwidth for any miss_ratio > 0 (ITMLP <=
    MWP_peak_bw and AMAT >= avg_DRAM_lat x miss_ratio). ``size_of_data`` (Eq. 19, "the size of
    input data") is ``dram_bytes`` in such requests per active SM (per warp of work, times the warps of
    work per SM below), which makes T_mem_min the DRAM transfer time at peak bandwidth, in cycles.

    Deviation: ``#warps per SM`` (the work of Eqs. 3, 7, 9, 11, 18 and 20, and the SM's share of the data in Eq.
    19; the paper's #total_warps / #active_SMs) is at least N, the warps the busiest SM runs at once: with fewer
    blocks than fill every SM, ITILP and MWP grew with N (the busiest SM's ceil(#blocks / #SMs) blocks) while the
    work stayed the average, and one block more than the SMs halved the time (matvec, BLOCK 256, H200: 132 blocks
    32.6 ms, 133 blocks 15.4 ms; measured 4.88 and 9.55 ms). T_mem_min takes the same SM's data, so that B_memlp
    does not count its extra blocks as lost memory-level parallelism. Launches that fill their SMs are unchanged.

    Parameters
    ----------
    profile : KernelProfile
        Launch resources and per-thread counts (``ilp``, ``mlp``, ``miss_ratio`` included).
    gpu : GPUSpec
        Uses ``avg_inst_latency_cycles``, ``fp32_lanes_per_sm`` (SIMD_width), ``sfu_per_sm``
        (SFU_width), ``dram_latency_cycles`` (DRAM_lat), ``departure_delay_coal_cycles`` (Delta
        between warp requests, Appendix A MWP) and ``departure_delay_uncoal_cycles`` (Delta between
        the extra transactions of a split request, Eq. 13; seed 000 has one Delta, 20 cycles on
        C2050, where both fields hold it; on cc >= 3.0 a split request's transactions are 32 B
        sectors, spaced less than whole 128 B warp requests),
        ``l1_hit_latency_cycles`` (hit_lat), ``fp_latency_cycles``, ``sync_gamma`` (Gamma),
        ``core_clock_mhz`` and ``dram_bandwidth_gbs``.
    o_cfdiv, o_bank : array_like
        Extra cycles per SM from control-flow divergence and bank conflicts (profiler counters;
        0 when unknown).
    """
    st = launch if launch is not None else launch_state(profile, gpu, active_blocks_per_sm=active_blocks_per_sm)
    p = profile
    ws = float(gpu.warp_size)
    n = st.n_warps
    # Warps of work per SM: the paper's average over the active SMs, at least the N warps the busiest SM runs at
    # once (deviation, docstring).
    per_sm = np.maximum(st.total_warps / st.active_sms, n)
    mem_insts = p.coal_mem_insts + p.uncoal_mem_insts
    insts = p.comp_insts + mem_insts
    lat = gpu.avg_inst_latency_cycles
    itilp_max = np.full_like(n, lat / (ws / gpu.fp32_lanes_per_sm))                    # (5)
    itilp = np.minimum(p.ilp * n, itilp_max)                                            # (4)
    w_parallel = insts * per_sm * lat / itilp                                           # (3)
    has_mem = mem_insts > 0
    safe_mem = np.where(has_mem, mem_insts, 1.0)
    avg_trans = np.where(has_mem, (p.coal_mem_insts + p.uncoal_mem_insts * p.uncoal_per_mw) / safe_mem, 1.0)
    # (13): the extra transactions of a split request depart Departure_del_uncoal apart.
    avg_dram_lat = gpu.dram_latency_cycles + (avg_trans - 1.0) * gpu.departure_delay_uncoal_cycles
    f_sync = gpu.sync_gamma * avg_dram_lat * mem_insts / insts                          # (8)
    o_sync = p.sync_insts * per_sm * f_sync                                             # (7)
    f_sfu = np.clip(p.sfu_insts / insts - gpu.sfu_per_sm / gpu.fp32_lanes_per_sm, 0.0, 1.0)  # (10)
    o_sfu = p.sfu_insts * per_sm * (ws / gpu.sfu_per_sm) * f_sfu                        # (9)
    o_cf = np.broadcast_to(np.asarray(o_cfdiv, dtype=np.float64), n.shape)
    o_bk = np.broadcast_to(np.asarray(o_bank, dtype=np.float64), n.shape)
    w_serial = o_sync + o_sfu + o_cf + o_bk                                             # (6)
    t_comp = w_parallel + w_serial                                                      # (2)

    amat = avg_dram_lat * p.miss_ratio + gpu.l1_hit_latency_cycles                      # (12)
    request_bytes = dram_bytes_per_mem_warp(p, st, p.miss_ratio)                        # transaction_size
    bw_per_warp = gpu.core_clock_hz * request_bytes / avg_dram_lat                      # App. A, B/s
    mwp_peak = gpu.dram_bandwidth_gbs * 1e9 / (bw_per_warp * st.active_sms)             # App. A
    mwp = np.minimum(np.minimum(avg_dram_lat / gpu.departure_delay_coal_cycles, mwp_peak), n)  # App. A
    comp_cycles = insts * lat / itilp                                                   # App. A
    mem_cycles = mem_insts * amat / p.mlp                                               # App. A
    cwp = np.minimum((mem_cycles + comp_cycles) / comp_cycles, n)                       # App. A
    mwp_cp = np.minimum(np.maximum(1.0, cwp - 1.0), mwp)                                # (15)
    itmlp = np.minimum(p.mlp * mwp_cp, mwp_peak)                                        # (14)
    t_mem = mem_insts * per_sm / itmlp * amat                                           # (11)
    zeta = np.where(cwp <= mwp, 1.0, 0.0)
    f_overlap = (n - zeta) / n                                                          # (17)
    t_overlap = np.minimum(t_comp * f_overlap, t_mem)                                   # (16)
    t_exec = t_comp + t_mem - t_overlap                                                 # (1)

    t_fp = p.fp_insts * per_sm * gpu.fp_latency_cycles / itilp                          # (18)
    size_of_data = p.dram_bytes / request_bytes / st.total_warps * per_sm  # the busiest SM's share (see above)
    t_mem_min = size_of_data * avg_dram_lat / mwp_peak                                  # (19)
    b_itilp = w_parallel - insts * per_sm * lat / itilp_max                             # (20)
    b_serial = w_serial                                                                 # (21)
    b_fp = t_comp - t_fp - b_itilp - b_serial                                           # (22)
    t_mem_prime = t_mem - t_overlap
    b_memlp = np.maximum(t_mem_prime - t_mem_min, 0.0)                                  # (23)
    return GPUPerfResult(
        insts=insts, itilp=itilp, itilp_max=itilp_max, w_parallel=w_parallel, o_sync=o_sync,
        o_sfu=o_sfu, o_cfdiv=np.array(o_cf), o_bank=np.array(o_bk), w_serial=w_serial, t_comp=t_comp,
        avg_trans_warp=avg_trans, avg_dram_lat=avg_dram_lat, amat=amat, request_bytes=request_bytes,
        mwp=mwp, mwp_peak_bw=mwp_peak, cwp=cwp, mwp_cp=mwp_cp, itmlp=itmlp, t_mem=t_mem,
        f_overlap=f_overlap, t_overlap=t_overlap, t_exec=t_exec, t_mem_prime=t_mem_prime, t_fp=t_fp,
        t_mem_min=t_mem_min, b_itilp=b_itilp, b_serial=b_serial, b_fp=b_fp, b_memlp=b_memlp,
        time_ms=t_exec / (gpu.core_clock_mhz * 1e3),
    )
