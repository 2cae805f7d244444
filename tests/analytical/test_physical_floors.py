"""No analytical time below the physical floors, over every shipped descriptor and GPU spec.

Floors of a launch (independent of every model): DRAM bytes / peak DRAM bandwidth, FLOPs / peak
FP32 rate, and issue-limited instruction time, every warp instruction (``comp_insts`` + global
memory instructions) issued at the SM's dispatch rate (``issue_per_cycle_per_sm``: 4 warp instructions per
cycle from compute capability 7.0, one per scheduler of the four partitions; before it the FP32 lane rate,
fp32_lanes_per_sm / warp_size), spread over the active SMs. The roofline is held to the first two only: it
models FLOPs and bytes, not instructions. Scaled counts and the hierarchical roofline (whose issue level is that
ceiling) are held to all three.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridperf.analytical.gpuperf import gpuperf
from hybridperf.analytical.hierarchy import hierarchy
from hybridperf.analytical.launch import launch_state
from hybridperf.analytical.mwp_cwp import mwp_cwp
from hybridperf.analytical.roofline import roofline
from hybridperf.analytical.run import analyze
from hybridperf.analytical.scaled_counts import scaled_counts
from hybridperf.hardware import GPUSpec, list_gpus
from hybridperf.kernel import KernelDescriptor, Param, list_kernels
from hybridperf.profile import KernelProfile

KERNELS = {k.name: k for k in list_kernels()}
GPUS = list_gpus()
ROWS = 24
REL = 1e-9


def floors_ms(prof: KernelProfile, gpu: GPUSpec) -> dict[str, np.ndarray]:
    """The three physical floors of each row, in milliseconds."""
    warps = np.ceil(prof.threads_per_block / gpu.warp_size) * prof.blocks
    sms = np.minimum(float(gpu.sm_count), prof.blocks)
    insts = prof.comp_insts + prof.coal_mem_insts + prof.uncoal_mem_insts
    return {
        "dram": prof.dram_bytes / (gpu.dram_bandwidth_gbs * 1e9) * 1e3,
        "flops": prof.flops * prof.total_threads / (gpu.peak_fp32_gflops * 1e9) * 1e3,
        "issue": insts * warps / gpu.issue_per_cycle_per_sm / sms / (gpu.core_clock_mhz * 1e3),
    }


def model_times_ms(prof: KernelProfile, gpu: GPUSpec) -> dict[str, np.ndarray]:
    st_ = launch_state(prof, gpu)
    return {
        "mwp-cwp": mwp_cwp(prof, gpu, launch=st_).time_ms,
        "gpuperf": gpuperf(prof, gpu, launch=st_).time_ms,
        "scaled-counts": scaled_counts(prof, gpu, launch=st_).time_ms,
        "roofline": roofline(prof, gpu, launch=st_).time_ms,
        "hierarchical": hierarchy(prof, gpu, launch=st_).time_ms,
    }


def violations(times: dict[str, np.ndarray], floors: dict[str, np.ndarray], ok: np.ndarray) -> list[str]:
    out = []
    for model, t in times.items():
        for name, f in floors.items():
            if model == "roofline" and name == "issue":
                continue
            bad = ok & np.isfinite(t) & (t < f * (1 - REL))
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                out.append(f"{model} below the {name} floor on {int(bad.sum())} rows (row {i}: "
                           f"{t[i]:.4g} ms < {f[i]:.4g} ms, ratio {t[i] / f[i]:.3f})")
    return out


def _size_values(p: Param) -> st.SearchStrategy[float]:
    lo = p.min if p.min is not None else 0.0
    default = p.default if p.default is not None else max(lo, 1.0)
    hi = p.max if p.max is not None else max(4.0 * default, lo + 4.0)
    scaled = st.integers(-3, 2).map(lambda e: float(min(hi, max(lo, round(default * 2.0**e)))))
    return st.one_of(scaled, st.integers(int(np.ceil(lo)), int(hi)).map(float))


@st.composite
def config_rows(draw: st.DrawFn, kernel: KernelDescriptor) -> pd.DataFrame:
    """ROWS launches of a descriptor: config values from its lists, sizes within its bounds."""
    cols: dict[str, list[float]] = {}
    for p in kernel.config:
        values = st.sampled_from(p.values) if p.values else st.just(float(p.default))
        cols[p.name] = draw(st.lists(values, min_size=ROWS, max_size=ROWS))
    for p in kernel.sizes:
        cols[p.name] = draw(st.lists(_size_values(p), min_size=ROWS, max_size=ROWS))
    return pd.DataFrame(cols, dtype=np.float64)


def _profile(kernel: KernelDescriptor, rows: pd.DataFrame) -> tuple[KernelProfile, np.ndarray]:
    values = {c: rows[c].to_numpy() for c in rows.columns}
    ok, _ = kernel.constraint_mask(values)
    return kernel.profile(values), np.broadcast_to(ok, (len(rows),))


@pytest.mark.parametrize("name", sorted(KERNELS))
@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_models_never_below_physical_floors_on_any_gpu(name: str, data: st.DataObject) -> None:
    kernel = KERNELS[name]
    rows = data.draw(config_rows(kernel))
    prof, ok = _profile(kernel, rows)
    problems = []
    for gpu in GPUS:
        # As analyze does: registers beyond the architecture's maximum spill rather than fail.
        regs = np.minimum(prof.registers_per_thread, gpu.limits.max_registers_per_thread)
        p = dataclasses.replace(prof, registers_per_thread=regs)
        problems += [f"{gpu.name}: {v}" for v in violations(model_times_ms(p, gpu), floors_ms(p, gpu), ok)]
    assert not problems, f"{name}: " + "; ".join(problems[:5])


@settings(max_examples=30, deadline=None)
@given(data=st.data(), name=st.sampled_from(sorted(KERNELS)), gpu=st.sampled_from(GPUS))
def test_analyze_never_below_physical_floors(data: st.DataObject, name: str, gpu: GPUSpec) -> None:
    """The same property through the dispatcher users call (constraints, spills, NaN masking)."""
    kernel = KERNELS[name]
    a = analyze(kernel, gpu, data.draw(config_rows(kernel)),
                models=("mwp-cwp", "gpuperf", "scaled-counts", "roofline", "hierarchical"))
    times = {m: a.terms[m]["time_ms"].to_numpy(dtype=np.float64) for m in a.terms}
    assert not violations(times, floors_ms(a.profile, gpu), a.feasible)
    assert all(np.isnan(t[~a.feasible]).all() for t in times.values())


def test_every_descriptor_launches_on_every_gpu() -> None:
    """The checks above are not vacuous: each descriptor's default launch runs on every GPU, except
    where a cc 1.0/1.1 part's 8 K-register file cannot hold one of its blocks."""
    missing = []
    for name, k in KERNELS.items():
        prof, ok = _profile(k, pd.DataFrame({p.name: [float(p.default)] for p in k.sizes + k.config
                                             if p.default is not None}))
        for gpu in GPUS:
            regs = np.minimum(prof.registers_per_thread, gpu.limits.max_registers_per_thread)
            st_ = launch_state(dataclasses.replace(prof, registers_per_thread=regs), gpu)
            small_rf = gpu.limits.registers_per_sm == 8192 and "registers per block" in st_.reason[0]
            if not (ok & st_.launchable).any() and not small_rf:
                missing.append(f"{name} on {gpu.name}: {st_.reason[0]}")
    assert not missing


@settings(max_examples=30, deadline=None)
@given(data=st.data(), name=st.sampled_from(sorted(KERNELS)), gpu=st.sampled_from(GPUS),
       per_thread=st.floats(0.0, 4096.0), traffic=st.floats(0.0, 1e3))
def test_local_memory_never_speeds_a_launch_up(data: st.DataObject, name: str, gpu: GPUSpec,
                                               per_thread: float, traffic: float) -> None:
    """Local arrays added to any shipped descriptor's launches (``per_thread`` bytes allocated per thread, each
    byte accessed ``traffic`` times) cost time and never move traffic off DRAM; twice the allocation with the
    same accesses sends at least as much there."""
    kernel = KERNELS[name]
    prof, ok = _profile(kernel, data.draw(config_rows(kernel)))
    prof = dataclasses.replace(prof, registers_per_thread=np.minimum(prof.registers_per_thread,
                                                                     gpu.limits.max_registers_per_thread))
    bytes_ = traffic * per_thread * prof.total_threads
    runs = [hierarchy(dataclasses.replace(prof, local_bytes_per_thread=np.full(len(prof), b),
                                          local_traffic_bytes=t), gpu)
            for b, t in ((0.0, np.zeros_like(bytes_)), (per_thread, bytes_), (2 * per_thread, bytes_))]
    live = ok & np.isfinite(runs[0].time_ms)
    for before, after in zip(runs, runs[1:]):
        assert (after.time_ms[live] >= before.time_ms[live] * (1 - REL)).all()
        assert (after.dram_traffic_bytes[live] >= before.dram_traffic_bytes[live] * (1 - REL)).all()
