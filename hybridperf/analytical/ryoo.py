"""Ryoo et al.'s efficiency and utilization metrics (seed 003, CGO 2008, Eqs. 1-2)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hybridperf.analytical._terms import Terms
from hybridperf.arrays import FloatArray

__all__ = ["RyooResult", "ryoo_metrics"]


@dataclass(frozen=True, slots=True)
class RyooResult(Terms):
    """Efficiency (1/instructions) and Utilization (latency-hiding work) of a configuration."""

    efficiency: FloatArray
    utilization: FloatArray
    w_tb: FloatArray
    b_sm: FloatArray


def ryoo_metrics(instr: npt.ArrayLike, regions: npt.ArrayLike, threads: npt.ArrayLike,
                 threads_per_block: npt.ArrayLike, blocks_per_sm: npt.ArrayLike,
                 warp_size: int = 32) -> RyooResult:
    """Efficiency = 1 / (Instr * Threads) (Eq. 1) and
    Utilization = Instr / Regions * ((W_TB - 1) / 2 + (B_SM - 1) * W_TB) (Eq. 2), seed 003 Sec. 4.

    Parameters
    ----------
    instr : array_like
        Dynamic instructions per thread (Instr).
    regions : array_like
        Instruction intervals delimited by blocking instructions, plus kernel start/end.
    threads : array_like
        Threads launched in total.
    threads_per_block : array_like
        Threads per block; W_TB = ceil(threads_per_block / warp_size).
    blocks_per_sm : array_like
        Resident blocks per SM (B_SM, from the occupancy calculator).
    """
    i = np.asarray(instr, dtype=np.float64)
    w_tb = np.ceil(np.asarray(threads_per_block, dtype=np.float64) / warp_size)
    b_sm = np.asarray(blocks_per_sm, dtype=np.float64)
    eff = 1.0 / (i * np.asarray(threads, dtype=np.float64))
    util = i / np.asarray(regions, dtype=np.float64) * ((w_tb - 1.0) / 2.0 + (b_sm - 1.0) * w_tb)
    arrays = np.broadcast_arrays(np.atleast_1d(eff), np.atleast_1d(util), np.atleast_1d(w_tb), np.atleast_1d(b_sm))
    return RyooResult(*(np.array(a, dtype=np.float64) for a in arrays))
