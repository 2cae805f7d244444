"""Launch geometry shared by the cycle models: active SMs, resident blocks and warps, waves."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hybridperf.analytical._terms import Terms
from hybridperf.analytical.occupancy import OccupancyResult, occupancy
from hybridperf.hardware import GPUSpec
from hybridperf.kernel import KernelProfile

__all__ = ["LaunchState", "launch_state"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class LaunchState(Terms):
    """Where a launch's blocks go.

    ``active_blocks_per_sm`` is the occupancy limit capped by the blocks an SM actually receives
    (a 4-block grid on 80 SMs puts one block on each of 4 SMs); ``n_warps`` is Hong & Kim's N
    (seed 002 Eq. 20); ``rep`` is #Rep (Eq. 21, fractional); ``waves`` = ceil(rep).
    """

    active_sms: FloatArray
    active_blocks_per_sm: FloatArray
    n_warps: FloatArray
    warps_per_block: FloatArray
    total_warps: FloatArray
    rep: FloatArray
    waves: FloatArray
    occupancy: FloatArray


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
    if active_blocks_per_sm is None:
        if occ is None:
            occ = occupancy(gpu.limits, profile.threads_per_block, profile.registers_per_thread,
                            profile.smem_per_block_bytes)
        resident = occ.active_blocks_per_sm
    else:
        resident = np.asarray(active_blocks_per_sm, dtype=np.float64)
    blocks = profile.blocks
    active_sms = np.minimum(float(gpu.sm_count), blocks)
    per_sm = np.minimum(resident, np.ceil(blocks / active_sms))
    warps_per_block = np.ceil(profile.threads_per_block / gpu.warp_size)
    n_warps = per_sm * warps_per_block
    rep = blocks / (per_sm * active_sms)
    return LaunchState(
        active_sms=np.broadcast_to(active_sms, blocks.shape).astype(np.float64),
        active_blocks_per_sm=per_sm, n_warps=n_warps, warps_per_block=warps_per_block,
        total_warps=warps_per_block * blocks, rep=rep, waves=np.ceil(rep - 1e-9),
        occupancy=(resident * warps_per_block) / gpu.limits.max_warps_per_sm,
    )
