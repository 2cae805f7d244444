"""Launch geometry shared by the cycle models: active SMs, resident blocks and warps, waves."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hybridperf.analytical._terms import Terms
from hybridperf.analytical.occupancy import OccupancyResult, occupancy
from hybridperf.arrays import FloatArray
from hybridperf.hardware import GPUSpec
from hybridperf.profile import KernelProfile

__all__ = ["LaunchState", "dram_bytes_per_mem_warp", "launch_state"]


@dataclass(frozen=True, slots=True)
class LaunchState(Terms):
    """Where a launch's blocks go.

    ``active_blocks_per_sm`` is the occupancy limit capped by the blocks an SM actually receives
    (a 4-block grid on 80 SMs puts one block on each of 4 SMs); ``n_warps`` is Hong & Kim's N
    (seed 002 Eq. 20); ``rep`` is #Rep (Eq. 21, fractional); ``waves`` = ceil(rep).
    ``launchable`` is False where no block can be resident on an SM (occupancy 0: a hard limit
    exceeded, or 0 resident blocks given) or no block is launched; those rows have NaN geometry,
    so every model built on it gives NaN times, and ``reason`` says why.
    """

    active_sms: FloatArray
    active_blocks_per_sm: FloatArray
    n_warps: FloatArray
    warps_per_block: FloatArray
    total_warps: FloatArray
    rep: FloatArray
    waves: FloatArray
    occupancy: FloatArray
    launchable: npt.NDArray[np.bool_]
    reason: npt.NDArray[np.object_]


def launch_state(profile: KernelProfile, gpu: GPUSpec, occ: OccupancyResult | None = None,
                 active_blocks_per_sm: npt.ArrayLike | None = None) -> LaunchState:
    """Compute the launch geometry from occupancy (or from given resident blocks per SM).

    Parameters
    ----------
    profile : KernelProfile
        Threads per block, blocks, registers and shared memory per row.
    gpu : GPUSpec
        SM count and per-SM limits.
    occ : OccupancyResult, optional
        Precomputed occupancy (computed when omitted).
    active_blocks_per_sm : array_like, optional
        Overrides the occupancy calculator (e.g. a paper's stated value, or a profiler's).
    """
    blocks = profile.blocks
    if active_blocks_per_sm is None:
        if occ is None:
            occ = occupancy(gpu.limits, profile.threads_per_block, profile.registers_per_thread,
                            profile.smem_per_block_bytes)
        resident = occ.active_blocks_per_sm
        why = np.broadcast_to(occ.reason, blocks.shape).astype(object)
    else:
        resident = np.broadcast_to(np.asarray(active_blocks_per_sm, dtype=np.float64), blocks.shape)
        why = np.full(blocks.shape, "", dtype=object)
    resident = np.broadcast_to(resident, blocks.shape)
    why = np.where((why == "") & ~(resident >= 1), "no block fits on an SM (0 resident blocks per SM)",
                   why)
    why = np.where((why == "") & ~(blocks >= 1), "no blocks launched (blocks < 1)", why)
    ok = why == ""
    nan = np.where(ok, 1.0, np.nan)
    resident = resident * nan
    active_sms = np.minimum(float(gpu.sm_count), blocks) * nan
    with np.errstate(divide="ignore", invalid="ignore"):
        per_sm = np.minimum(resident, np.ceil(blocks / active_sms))
        rep = blocks / (per_sm * active_sms)
    warps_per_block = np.ceil(profile.threads_per_block / gpu.warp_size)
    n_warps = per_sm * warps_per_block
    return LaunchState(
        active_sms=active_sms.astype(np.float64), active_blocks_per_sm=per_sm, n_warps=n_warps,
        warps_per_block=warps_per_block, total_warps=warps_per_block * blocks, rep=rep,
        waves=np.ceil(rep - 1e-9), occupancy=(resident * warps_per_block) / gpu.limits.max_warps_per_sm,
        launchable=ok, reason=why,
    )


def dram_bytes_per_mem_warp(profile: KernelProfile, st: LaunchState,
                            miss_ratio: npt.ArrayLike = 1.0) -> FloatArray:
    """Bytes one warp memory instruction that reaches DRAM moves: the "bytes per warp" of the
    bandwidth terms (seed 002 Eq. 7 ``Load_bytes_per_warp``; seed 000 Appendix A
    ``transaction_size``, "transaction size for a DRAM request", 128 B on Tesla C2050).

    It is ``load_bytes_per_warp`` (128 B = 32 lanes x 4 B by default, the papers' value), raised
    to the profile's own DRAM traffic per DRAM-reaching warp memory instruction,
    ``dram_bytes / (total_warps x mem_insts x miss_ratio)``, where that is larger (uncoalesced
    sectors, vector loads, counts that move more than 4 B per lane). With it a model's bandwidth
    limit can never admit more than ``dram_bytes`` at peak bandwidth. Rows without global memory
    instructions get ``load_bytes_per_warp``.
    """
    p = profile
    mem = p.coal_mem_insts + p.uncoal_mem_insts
    requests = st.total_warps * mem * np.asarray(miss_ratio, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        declared = np.where(requests > 0, p.dram_bytes / np.where(requests > 0, requests, 1.0), 0.0)
    return np.maximum(p.load_bytes_per_warp, declared)
