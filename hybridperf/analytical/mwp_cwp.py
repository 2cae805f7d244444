"""Hong & Kim's MWP-CWP model (seed 002, ISCA 2009, Eqs. 5-27)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hybridperf.analytical._terms import Terms
from hybridperf.analytical.launch import LaunchState, dram_bytes_per_mem_warp, launch_state
from hybridperf.arrays import FloatArray
from hybridperf.hardware import GPUSpec
from hybridperf.profile import KernelProfile

__all__ = ["REGIMES", "UNLAUNCHABLE", "MWPCWPResult", "mwp_cwp"]

# Regime labels: the equation of seed 002 that gives Exec_cycles_app. Unlaunchable rows have
# regime -1 and no label (REGIMES.get(-1, "") is "").
REGIMES = {22: "balanced (Eq. 22: MWP = CWP = N)", 23: "memory-bound (Eq. 23: CWP >= MWP)",
           24: "compute-bound (Eq. 24: MWP > CWP or issue-limited)",
           0: "compute-only (no global memory)"}
UNLAUNCHABLE = -1


@dataclass(frozen=True, slots=True)
class MWPCWPResult(Terms):
    """Every intermediate term of the MWP-CWP model (cycles unless named otherwise)."""

    mem_l_uncoal: FloatArray
    mem_l_coal: FloatArray
    weight_uncoal: FloatArray
    weight_coal: FloatArray
    mem_l: FloatArray
    departure_delay: FloatArray
    mwp_without_bw_full: FloatArray
    mwp_without_bw: FloatArray
    bw_per_warp_gbs: FloatArray
    mwp_peak_bw: FloatArray
    mwp: FloatArray
    mem_cycles: FloatArray
    comp_cycles: FloatArray
    cwp_full: FloatArray
    cwp: FloatArray
    n: FloatArray
    rep: FloatArray
    active_sms: FloatArray
    active_blocks_per_sm: FloatArray
    regime: npt.NDArray[np.int64]
    exec_cycles_app: FloatArray
    synch_cost: FloatArray
    exec_cycles: FloatArray
    cpi: FloatArray
    time_ms: FloatArray


def mwp_cwp(profile: KernelProfile, gpu: GPUSpec, *, launch: LaunchState | None = None,
            active_blocks_per_sm: npt.ArrayLike | None = None) -> MWPCWPResult:
    """Execution cycles from memory- and computation-warp parallelism (Hong & Kim, ISCA'09).

    Implements seed 002 Eqs. 5-8 (MWP, BW_per_warp, CWP), 9-21 (latencies, weights, departure
    delay, Mem_cycles, Comp_cycles, N, #Rep), 22-24 (Exec_cycles_app by regime), 25 (CPI) and
    26-27 (synchronization cost), as restated in MODELS.md section 2, with four deviations:

    * Regime selection. The paper sends "(CWP >= MWP) or (Comp_cycles > Mem_cycles)" to Eq. 23,
      whose time can fall below the issue floor N x Comp_cycles x #Rep (every warp's
      instructions must issue): with one memory instruction and a long computation Eq. 23 is
      Mem_cycles x N / MWP + Comp_cycles x (MWP - 1), far below N x Comp_cycles. The paper's own
      Sec. 3.2.2 (Case 5, Fig. 7: Comp_cycles > Mem_cycles) gives N computation periods plus one
      memory period, which is Eq. 24, and CWP >= MWP by a small margin is compute-bound too
      (memory time N x Mem_cycles / MWP < issue time N x Comp_cycles when CWP_full - 1 < MWP).
      So where the paper picks Eq. 23 we take Eq. 24 whenever it is larger, and report regime 24.
      The paper's Table 2 example (CWP 20 >> MWP 2.28) keeps Eq. 23.
    * Bytes per warp in Eq. 7: ``load_bytes_per_warp``, or the profile's DRAM bytes per warp
      memory instruction where larger (uncoalesced 32 B sectors, vector loads; see
      :func:`~hybridperf.analytical.launch.dram_bytes_per_mem_warp`), so that MWP_peak_BW never
      admits more than ``dram_bytes`` at peak bandwidth. The paper's examples (128 B per warp,
      one 4 B word per lane) are unchanged.
    * (MWP - 1) in Eqs. 22, 23 and 26 counts the other memory warps in flight; it is taken as
      max(MWP - 1, 0), because MWP < 1 (peak bandwidth per SM admits less than one memory warp
      per Mem_L: few SMs' share of bandwidth, wide requests) would otherwise subtract time.
    * #Rep (Eq. 21) is at least 1. With fewer blocks than fill every SM to its resident limit, N counts the
      warps of the busiest SM (ceil(#Blocks / #SMs) blocks) and that SM runs them once, but Eq. 21's average
      gave fewer repetitions than one: one block more than the SMs was #Rep 0.5 at twice the N, and the time
      fell (matvec, BLOCK 256, H200: 132 blocks 27.4 ms, 133 blocks 20.5 ms; measured 4.88 and 9.55 ms). The
      paper's examples fill their SMs (#Rep >= 1) and are unchanged.

    With these, the time is never below the issue floor N x Comp_cycles x #Rep nor, when the
    kernel has global memory instructions, below ``dram_bytes`` / peak bandwidth.

    Counts are per thread (= per warp for non-divergent code). ``#Comp_insts`` is
    ``comp_insts + sfu_insts``; ``comp_insts`` already holds shared-memory and sync instructions
    (shared-memory accesses count as computation, seed 002 Sec. 3.6),
    ``#Mem_insts`` = coalesced + uncoalesced global memory instructions, ``#Total_insts`` their sum.
    Kernels with no global memory instruction (Eqs. 13-14 undefined) are modelled as pure
    computation, ``Comp_cycles * N * #Rep``, regime 0.

    Parameters
    ----------
    profile : KernelProfile
        Launch resources and per-thread counts.
    gpu : GPUSpec
        Uses ``dram_latency_cycles`` (Mem_LD), ``departure_delay_coal_cycles``,
        ``departure_delay_uncoal_cycles``, ``issue_cycles``, ``core_clock_mhz`` (Freq),
        ``dram_bandwidth_gbs`` (Mem_Bandwidth) and ``sm_count``.
    launch : LaunchState, optional
        Precomputed launch geometry.
    active_blocks_per_sm : array_like, optional
        Resident blocks per SM, overriding the occupancy calculator (the paper states it).

    Returns
    -------
    MWPCWPResult
        Terms in cycles; ``time_ms`` = ``exec_cycles`` (Eq. 27) / Freq; ``regime`` = 22, 23, 24
        (0 without global memory). Unlaunchable rows (no block fits on an SM; ``launch_state``
        gives the reason) have NaN times and regime -1 (:data:`UNLAUNCHABLE`, no label).

    Notes
    -----
    Limits stated by the paper (Sec. 3.5): no cache model, branch divergence not modelled,
    #Rep is fractional above 1 (partial waves are not rounded up).
    """
    st = launch if launch is not None else launch_state(profile, gpu, active_blocks_per_sm=active_blocks_per_sm)
    p = profile
    uncoal, coal = p.uncoal_mem_insts, p.coal_mem_insts
    mem_insts = uncoal + coal
    has_mem = mem_insts > 0
    safe_mem = np.where(has_mem, mem_insts, 1.0)
    mem_ld = gpu.dram_latency_cycles
    mem_l_uncoal = mem_ld + (p.uncoal_per_mw - 1.0) * gpu.departure_delay_uncoal_cycles   # (10)
    mem_l_coal = np.full_like(mem_l_uncoal, mem_ld)                                       # (11)
    w_uncoal = np.where(has_mem, uncoal / safe_mem, 0.0)                                   # (13)
    w_coal = np.where(has_mem, coal / safe_mem, 0.0)                                       # (14)
    mem_l = mem_l_uncoal * w_uncoal + mem_l_coal * w_coal                                  # (12)
    dep = (gpu.departure_delay_uncoal_cycles * p.uncoal_per_mw * w_uncoal
           + gpu.departure_delay_coal_cycles * w_coal)                                      # (15)
    n = st.n_warps                                                                          # (20)
    with np.errstate(divide="ignore", invalid="ignore"):
        mwp_wo_full = np.where(has_mem, mem_l / dep, np.inf)                                # (16)
        mwp_wo = np.minimum(mwp_wo_full, n)                                                 # (17)
        bytes_per_warp = dram_bytes_per_mem_warp(p, st)
        bw_per_warp = np.where(has_mem, gpu.core_clock_mhz * 1e6 * bytes_per_warp
                               / np.where(has_mem, mem_l, 1.0) / 1e9, 0.0)                  # (7), GB/s
        mwp_peak = np.where(has_mem, gpu.dram_bandwidth_gbs / (bw_per_warp * st.active_sms), np.inf)  # (6)
    mwp = np.minimum(np.minimum(mwp_wo, mwp_peak), n)                                       # (5)
    mem_cycles = mem_l_uncoal * uncoal + mem_l_coal * coal                                  # (18)
    comp_insts = p.comp_insts + p.sfu_insts
    total_insts = comp_insts + mem_insts
    comp_cycles = gpu.issue_cycles * total_insts                                            # (19)
    cwp_full = (mem_cycles + comp_cycles) / comp_cycles                                     # (8)
    cwp = np.minimum(cwp_full, n)                                                           # (9)
    # (21), at least 1 (deviation, docstring): an SM that runs N warps at once runs them at least once.
    rep = np.maximum(st.rep, 1.0)

    # MWP - 1 other memory warps overlap; none when peak bandwidth admits less than one (MWP < 1).
    others = np.maximum(mwp - 1.0, 0.0)
    e22 = (mem_cycles + comp_cycles + comp_cycles / safe_mem * others) * rep
    e23 = (mem_cycles * n / mwp + comp_cycles / safe_mem * others) * rep
    e24 = (mem_l + comp_cycles * n) * rep
    e0 = comp_cycles * n * rep
    is22 = (mwp == n) & (cwp == n)
    # Paper: "(CWP >= MWP) or (Comp_cycles > Mem_cycles)" -> Eq. 23. Deviation (docstring): Eq. 24
    # where it is larger, so the time never falls below the issue floor N x Comp_cycles x #Rep.
    is23 = ~is22 & ((cwp >= mwp) | (comp_cycles > mem_cycles)) & (e23 >= e24)
    regime = np.where(~has_mem, 0, np.where(is22, 22, np.where(is23, 23, 24)))
    regime = np.where(st.launchable, regime, UNLAUNCHABLE).astype(np.int64)
    exec_app = np.select([regime == 0, regime == 22, regime == 23], [e0, e22, e23], e24)
    synch = np.where(has_mem, dep * others, 0.0) * p.sync_insts * st.active_blocks_per_sm * rep  # (26)
    exec_cycles = exec_app + synch                                                          # (27)
    cpi = exec_app / (total_insts * (p.threads_per_block / gpu.warp_size) * p.blocks / st.active_sms)  # (25)
    return MWPCWPResult(
        mem_l_uncoal=mem_l_uncoal, mem_l_coal=mem_l_coal, weight_uncoal=w_uncoal, weight_coal=w_coal,
        mem_l=mem_l, departure_delay=dep, mwp_without_bw_full=mwp_wo_full, mwp_without_bw=mwp_wo,
        bw_per_warp_gbs=bw_per_warp, mwp_peak_bw=mwp_peak, mwp=mwp, mem_cycles=mem_cycles,
        comp_cycles=comp_cycles, cwp_full=cwp_full, cwp=cwp, n=n, rep=rep, active_sms=st.active_sms,
        active_blocks_per_sm=st.active_blocks_per_sm, regime=regime, exec_cycles_app=exec_app,
        synch_cost=synch, exec_cycles=exec_cycles, cpi=cpi,
        time_ms=exec_cycles / (gpu.core_clock_mhz * 1e3),
    )
