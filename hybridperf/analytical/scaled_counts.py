"""Occupancy-scaled instruction counts with a calibrated adjusting weight (seed 004, Eqs. 1-4)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from hybridperf.analytical._terms import Terms
from hybridperf.analytical.launch import LaunchState, launch_state
from hybridperf.arrays import FloatArray
from hybridperf.errors import HybridperfError
from hybridperf.hardware import GPUSpec
from hybridperf.profile import KernelProfile

__all__ = ["ScaledCountsResult", "calibrate_adjusting_weight", "scaled_counts"]


@dataclass(frozen=True, slots=True)
class ScaledCountsResult(Terms):
    """Terms of seed 004's Eq. 4 (cycles per thread, then milliseconds)."""

    n_threads: FloatArray
    comp_cycles: FloatArray
    global_accesses: FloatArray
    mem_access_gm: FloatArray
    mem_access_sm: FloatArray
    cycles_per_thread: FloatArray
    occupancy: FloatArray
    adjusting_weight: FloatArray
    raw_time_ms: FloatArray
    time_ms: FloatArray


def scaled_counts(profile: KernelProfile, gpu: GPUSpec, *, adjusting_weight: npt.ArrayLike = 1.0,
                  latency_gm_cycles: float | None = None, latency_sm_cycles: float | None = None,
                  l1_hits: npt.ArrayLike = 0.0, l2_hits: npt.ArrayLike = 0.0,
                  launch: LaunchState | None = None) -> ScaledCountsResult:
    """Execution time from occupancy-scaled instruction counts (seed 004, Eq. 4).

    memAccess_GM = (loads_GM + stores_GM - L1_hits - L2_hits) * latency_GM
    + L1_hits * latency_L1 + L2_hits * latency_L2 (Eq. 3; Eq. 1 when no hits), memAccess_SM =
    (loads_SM + stores_SM) * latency_SM (Eq. 2), and ET_total = N_threads * (n_computations +
    memAccess_GM + memAccess_SM) / (F * O * adjustingWeight) (Eq. 4), with n_computations the
    cost-weighted computation cycles (``comp_cycles``; FMA = 2 cycles in seed 004), F the core
    clock and O the occupancy (MODELS.md section 1). Latencies default to the GPU's
    ``dram_latency_cycles``, ``smem_latency_cycles``, ``l1_hit_latency_cycles`` and
    ``l2_hit_latency_cycles`` (seed 004: 500, 5, -, 250 cycles). Counts are per thread.

    Eq. 1 charges one global-memory latency per access of one 4 B word (seed 004 has no caches
    and float data), so a thread makes at least ``dram_bytes`` / (4 B x N_threads) accesses;
    ``global_accesses`` is loads + stores raised to that where a profile's DRAM traffic needs
    more (e.g. counters whose access counts are capped below their footprint). For the seed's
    kernels loads + stores already move ``dram_bytes`` and nothing changes; with it the
    uncalibrated time is never below the DRAM transfer time at peak bandwidth.

    Parameters
    ----------
    adjusting_weight : array_like
        seed 004's adjustingWeight; 1.0 gives the uncalibrated time. See
        :func:`calibrate_adjusting_weight`.
    l1_hits, l2_hits : array_like
        Per-thread cache hits (profiler counters); 0 reproduces seed 004 (caches disabled).
    """
    st = launch if launch is not None else launch_state(profile, gpu)
    p = profile
    lat_gm = gpu.dram_latency_cycles if latency_gm_cycles is None else latency_gm_cycles
    lat_sm = gpu.smem_latency_cycles if latency_sm_cycles is None else latency_sm_cycles
    h1 = np.asarray(l1_hits, dtype=np.float64)
    h2 = np.asarray(l2_hits, dtype=np.float64)
    n_threads = p.total_threads
    accesses = np.maximum(p.global_loads + p.global_stores, p.dram_bytes / (4.0 * n_threads))
    mem_gm = ((accesses - h1 - h2) * lat_gm
              + h1 * gpu.l1_hit_latency_cycles + h2 * gpu.l2_hit_latency_cycles)  # (1), (3)
    mem_sm = (p.smem_loads + p.smem_stores) * lat_sm                                   # (2)
    cyc = p.comp_cycles + mem_gm + mem_sm
    try:
        w = np.asarray(adjusting_weight, dtype=np.float64)
    except (TypeError, ValueError):
        w = np.asarray(np.nan)
    if not np.all(np.isfinite(w) & (w > 0)):
        raise HybridperfError(f"adjusting_weight must be a positive number (1 = uncalibrated), "
                              f"got {adjusting_weight!r}")
    raw_ms = n_threads * cyc / (gpu.core_clock_hz * st.occupancy) * 1e3               # (4), w = 1
    return ScaledCountsResult(
        n_threads=n_threads, comp_cycles=p.comp_cycles, global_accesses=accesses, mem_access_gm=mem_gm,
        mem_access_sm=mem_sm, cycles_per_thread=cyc, occupancy=st.occupancy,
        adjusting_weight=np.broadcast_to(w, n_threads.shape).astype(np.float64),
        raw_time_ms=raw_ms, time_ms=raw_ms / w,
    )


def calibrate_adjusting_weight(raw_time_ms: npt.ArrayLike, measured_time_ms: npt.ArrayLike,
                               method: Literal["log", "linear"] = "log") -> float:
    """Fit seed 004's adjustingWeight from one or more measured runs.

    With one run this is the paper's rule, weight = predicted / actual. With several runs,
    ``method="log"`` minimises the squared error of log(predicted/actual) (the geometric mean of
    the ratios: relative errors weigh equally), and ``method="linear"`` minimises the squared
    error in milliseconds (weight = sum(raw^2) / sum(raw * measured)).

    Parameters
    ----------
    raw_time_ms : array_like
        Uncalibrated times (``scaled_counts(...).raw_time_ms``) of the calibration runs.
    measured_time_ms : array_like
        Measured times of the same runs, > 0.
    """
    raw = np.atleast_1d(np.asarray(raw_time_ms, dtype=np.float64))
    meas = np.atleast_1d(np.asarray(measured_time_ms, dtype=np.float64))
    if raw.shape != meas.shape or raw.size == 0:
        raise HybridperfError(
            f"calibration needs equal, non-empty arrays of predicted and measured times; got {raw.size} and {meas.size}"
        )
    if not (np.all(np.isfinite(raw)) and np.all(raw > 0) and np.all(np.isfinite(meas)) and np.all(meas > 0)):
        raise HybridperfError("calibration times must be finite and positive; drop failed runs first")
    if method == "log":
        return float(np.exp(np.mean(np.log(raw) - np.log(meas))))
    if method == "linear":
        return float(np.sum(raw * raw) / np.sum(raw * meas))
    raise HybridperfError(f"unknown calibration method {method!r}; use 'log' or 'linear'")
