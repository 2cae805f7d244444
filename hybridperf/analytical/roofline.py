"""Roofline bound (Williams et al., CACM 2009), quantised into waves, plus launch overhead."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hybridperf.analytical._terms import Terms
from hybridperf.analytical.launch import LaunchState, launch_state
from hybridperf.arrays import FloatArray
from hybridperf.hardware import GPUSpec
from hybridperf.profile import KernelProfile

__all__ = ["DEFAULT_LAUNCH_OVERHEAD_US", "RooflineResult", "roofline"]

# Typical kernel-launch-to-completion floor of an empty kernel on recent NVIDIA GPUs (a few us).
DEFAULT_LAUNCH_OVERHEAD_US = 3.0


@dataclass(frozen=True, slots=True)
class RooflineResult(Terms):
    """Roofline terms: compute and memory times, the bound, waves and the quantised estimate."""

    flops_total: FloatArray
    dram_bytes: FloatArray
    arithmetic_intensity: FloatArray
    compute_ms: FloatArray
    memory_ms: FloatArray
    bound_ms: FloatArray
    memory_bound: npt.NDArray[np.bool_]
    waves: FloatArray
    wave_efficiency: FloatArray
    time_ms: FloatArray


def roofline(profile: KernelProfile, gpu: GPUSpec, *, launch: LaunchState | None = None,
             launch_overhead_us: float = DEFAULT_LAUNCH_OVERHEAD_US) -> RooflineResult:
    """time >= max(FLOPs / peak FLOP rate, DRAM bytes / bandwidth) (MODELS.md section 8).

    ``bound_ms`` is the pure roofline lower bound. ``time_ms`` divides it by the wave efficiency
    (rep / ceil(rep): a partial last wave of resident blocks costs a full wave) and adds
    ``launch_overhead_us``; it is the cheap, robust baseline. FLOPs per thread come from
    ``profile.flops``; DRAM bytes are for the whole launch (``profile.dram_bytes``).
    """
    st = launch if launch is not None else launch_state(profile, gpu)
    flops = profile.flops * profile.total_threads
    compute_ms = flops / (gpu.peak_fp32_gflops * 1e9) * 1e3
    memory_ms = profile.dram_bytes / (gpu.dram_bandwidth_gbs * 1e9) * 1e3
    bound = np.maximum(compute_ms, memory_ms)
    eff = st.rep / np.maximum(st.waves, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ai = np.where(profile.dram_bytes > 0, flops / profile.dram_bytes, np.inf)
    return RooflineResult(
        flops_total=flops, dram_bytes=profile.dram_bytes, arithmetic_intensity=ai,
        compute_ms=compute_ms, memory_ms=memory_ms, bound_ms=bound, memory_bound=memory_ms >= compute_ms,
        waves=st.waves, wave_efficiency=eff, time_ms=bound / eff + launch_overhead_us * 1e-3,
    )
