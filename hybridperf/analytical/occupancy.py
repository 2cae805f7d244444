"""Occupancy calculator: resident blocks/warps per SM and the limiting resource."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hybridperf.analytical._terms import Terms
from hybridperf.arrays import FloatArray
from hybridperf.hardware import CCLimits

__all__ = ["OccupancyResult", "occupancy"]

LIMITERS = ("warps", "registers", "shared memory", "blocks")


@dataclass(frozen=True, slots=True)
class OccupancyResult(Terms):
    """Per-row occupancy terms; infeasible rows have NaN numbers and a reason."""

    warps_per_block: FloatArray
    blocks_by_warps: FloatArray
    blocks_by_registers: FloatArray
    blocks_by_smem: FloatArray
    blocks_by_limit: FloatArray
    active_blocks_per_sm: FloatArray
    active_warps_per_sm: FloatArray
    active_threads_per_sm: FloatArray
    occupancy: FloatArray
    limiter: npt.NDArray[np.object_]
    feasible: npt.NDArray[np.bool_]
    reason: npt.NDArray[np.object_]


def _ceil_to(x: FloatArray, unit: float) -> FloatArray:
    return np.ceil(x / unit) * unit


def occupancy(limits: CCLimits, threads_per_block: npt.ArrayLike, registers_per_thread: npt.ArrayLike,
              smem_per_block_bytes: npt.ArrayLike) -> OccupancyResult:
    """Resident blocks and warps per SM, as the CUDA Occupancy Calculator computes them.

    Active blocks per SM = min(block limit, warp limit, register limit, shared-memory limit)
    (MODELS.md section 1; seed 004 "Influencing Parameters: Occupancy", Tables 1-2). On cc >= 2.0
    registers are allocated per warp in units of ``register_alloc_unit``, as NVIDIA's
    ``cuda_occupancy.h`` (cudaOccMaxBlocksPerSMRegsLimit) computes it: the SM's register file is
    split into ``warp_alloc_granularity`` sub-partitions, each holding
    floor(registers_per_sm / sub-partitions / registers per warp) warps; a block must also pass
    the hardware check, registers per warp x warps per block rounded up to the sub-partitions
    <= ``max_registers_per_block``. This matters where the per-block limit is not the SM's file
    (cc 3.7: 64 K per block of 128 K; cc 3.2, 5.3, 6.2: 32 K of 64 K), which the older
    spreadsheet rule (warps that fit in one per-block pool, times pools per SM) under-counts.
    (``cuda_occupancy.h`` also reports 0 on cc 6.0 for blocks that would not fit a 4-sub-partition
    cc 6.x SM, a forward-compatibility policy of the API, not a launch limit of GP100: not
    applied here.) On cc 1.x registers are
    allocated per block, with warps per block rounded up to the granularity. Shared memory per
    block (plus the runtime reserve on cc >= 8.0) is rounded up to ``smem_alloc_unit_bytes``.

    Parameters
    ----------
    limits : CCLimits
        Per-SM limits of the compute capability.
    threads_per_block, registers_per_thread, smem_per_block_bytes : array_like
        Launch resources (threads, 32-bit registers per thread, bytes per block).

    Returns
    -------
    OccupancyResult
        ``occupancy`` = active warps / max warps per SM; ``limiter`` names the binding resource.
        Rows over a hard limit (threads per block, registers per thread or per block, shared
        memory per block) are infeasible: ``feasible`` is False, numbers are NaN and ``reason``
        says which limit was exceeded.
    """
    t, r, s = np.broadcast_arrays(*(np.atleast_1d(np.asarray(a, dtype=np.float64))
                                    for a in (threads_per_block, registers_per_thread, smem_per_block_bytes)))
    L = limits
    warps = np.ceil(t / L.warp_size)
    with np.errstate(divide="ignore", invalid="ignore"):
        by_warps = np.floor(L.max_warps_per_sm / warps)
        by_warps = np.minimum(by_warps, np.floor(L.max_threads_per_sm / t))
        if L.register_alloc_granularity == "warp":
            parts = L.warp_alloc_granularity  # register-file sub-partitions
            regs_per_warp = _ceil_to(r * L.warp_size, L.register_alloc_unit)
            warps_by_regs = np.floor(L.registers_per_sm / parts / regs_per_warp) * parts
            by_regs = np.floor(warps_by_regs / warps)
            # The hardware's per-block check rounds warps up to the sub-partitions.
            regs_per_block = regs_per_warp * _ceil_to(warps, parts)
        else:
            regs_per_block = _ceil_to(_ceil_to(warps, L.warp_alloc_granularity) * L.warp_size * r,
                                      L.register_alloc_unit)
            by_regs = np.floor(L.registers_per_sm / regs_per_block)
        by_regs = np.where(r <= 0, np.inf, by_regs)
        smem_alloc = _ceil_to(s + L.reserved_smem_per_block_bytes, L.smem_alloc_unit_bytes)
        by_smem = np.where(smem_alloc <= 0, np.inf, np.floor(L.smem_per_sm_bytes / smem_alloc))
    by_limit = np.full_like(t, float(L.max_blocks_per_sm))
    stacked = np.stack([by_warps, by_regs, by_smem, by_limit])
    active = np.min(stacked, axis=0)
    limiter = np.asarray(LIMITERS, dtype=object)[np.argmin(stacked, axis=0)]

    reason = np.full(t.shape, "", dtype=object)
    checks = [
        (~np.isfinite(t) | (t < 1), "threads per block must be at least 1"),
        (t > L.max_threads_per_block, f"threads per block exceed the limit of {L.max_threads_per_block}"),
        (r > L.max_registers_per_thread, f"registers per thread exceed the limit of {L.max_registers_per_thread}"),
        (regs_per_block > L.max_registers_per_block,
         f"registers per block exceed the limit of {L.max_registers_per_block}"),
        (s < 0, "shared memory per block is negative"),
        (s > L.max_smem_per_block_bytes,
         f"shared memory per block exceeds the limit of {L.max_smem_per_block_bytes} B"),
        (active < 1, "not even one block fits on an SM"),
    ]
    for bad, why in reversed(checks):  # the first failing check wins
        reason = np.where(bad, why, reason)
    feasible = reason == ""
    nan = np.where(feasible, 1.0, np.nan)
    active = active * nan
    act_warps = active * warps
    return OccupancyResult(
        warps_per_block=warps, blocks_by_warps=by_warps, blocks_by_registers=by_regs,
        blocks_by_smem=by_smem, blocks_by_limit=by_limit, active_blocks_per_sm=active,
        active_warps_per_sm=act_warps, active_threads_per_sm=active * t,
        occupancy=act_warps / L.max_warps_per_sm,
        limiter=np.where(feasible, limiter, "infeasible").astype(object),
        feasible=feasible, reason=reason.astype(object),
    )
