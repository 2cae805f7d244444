"""GPUPerf (seed 000): the properties MODELS.md section 3 requires, over random valid profiles."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridperf.analytical.gpuperf import gpuperf
from hybridperf.hardware import load_gpu
from hybridperf.profile import KernelProfile

GPUS = ["tesla-c2050", "titan-v", "a100-pcie-40gb", "gtx-280"]


@st.composite
def profiles(draw):
    comp = draw(st.floats(1, 5000))
    return dict(
        threads_per_block=draw(st.sampled_from([32, 64, 128, 256, 512, 1024])),
        blocks=draw(st.integers(1, 5000)),
        registers_per_thread=draw(st.integers(8, 64)),
        smem_per_block_bytes=draw(st.sampled_from([0, 1024, 8192])),
        comp_insts=comp,
        fp_insts=comp * draw(st.floats(0, 1)),
        sfu_insts=draw(st.floats(0, 500)),
        sync_insts=draw(st.floats(0, 20)),
        coal_mem_insts=draw(st.floats(0, 500)),
        uncoal_mem_insts=draw(st.floats(0, 100)),
        uncoal_per_mw=draw(st.floats(1, 32)),
        ilp=draw(st.floats(1, 4)),
        mlp=draw(st.floats(1, 4)),
        miss_ratio=draw(st.floats(0.05, 1)),
        dram_bytes=draw(st.floats(1e3, 1e9)),
    )


@settings(max_examples=200, deadline=None)
@given(values=profiles(), gpu_name=st.sampled_from(GPUS))
def test_properties(values, gpu_name) -> None:
    gpu = load_gpu(gpu_name)
    r = gpuperf(KernelProfile.from_values(**values), gpu).row()
    if not np.isfinite(r["t_exec"]):  # infeasible launch (occupancy 0) is not a profile of interest
        return
    eps = 1e-9 * max(1.0, r["t_comp"] + r["t_mem"])
    assert r["itilp"] <= r["itilp_max"] + 1e-12
    assert r["b_itilp"] >= -eps and r["b_serial"] >= 0 and r["b_memlp"] >= 0
    f_sfu = min(max(values["sfu_insts"] / r["insts"] - gpu.sfu_per_sm / gpu.fp32_lanes_per_sm, 0), 1)
    assert 0 <= f_sfu <= 1
    if values["sfu_insts"] / r["insts"] < gpu.sfu_per_sm / gpu.fp32_lanes_per_sm:
        assert r["o_sfu"] == 0
    assert r["t_overlap"] <= min(r["t_mem"], r["t_comp"]) + eps
    assert max(r["t_comp"], r["t_mem"]) - eps <= r["t_exec"] <= r["t_comp"] + r["t_mem"] + eps
    assert r["b_itilp"] + r["b_serial"] + r["b_fp"] == pytest.approx(r["t_comp"] - r["t_fp"], rel=1e-9, abs=eps)


@settings(max_examples=150, deadline=None)
@given(values=profiles(), gpu_name=st.sampled_from(GPUS), factor=st.floats(1.0, 8.0))
def test_more_ilp_never_slower(values, gpu_name, factor) -> None:
    gpu = load_gpu(gpu_name)
    base = gpuperf(KernelProfile.from_values(**values), gpu).t_exec[0]
    more = gpuperf(KernelProfile.from_values(**{**values, "ilp": values["ilp"] * factor}), gpu).t_exec[0]
    if np.isfinite(base):
        assert more <= base * (1 + 1e-12)


def test_b_fp_may_be_negative_and_is_reported() -> None:
    # FP-heavy kernel with ITILP below ITILP_max: T_fp exceeds W_parallel's share -> B_fp < 0, not clamped.
    gpu = load_gpu("tesla-c2050")
    r = gpuperf(KernelProfile.from_values(threads_per_block=32, blocks=14, registers_per_thread=16,
                                          smem_per_block_bytes=0, comp_insts=1000, fp_insts=1000,
                                          coal_mem_insts=1, uncoal_mem_insts=0), gpu).row()
    assert r["itilp"] < r["itilp_max"]
    assert r["b_fp"] < 0


def test_scalar_and_array_agree() -> None:
    gpu = load_gpu("tesla-c2050")
    blocks = np.array([14.0, 140.0, 1400.0])
    kw = dict(threads_per_block=256, registers_per_thread=20, smem_per_block_bytes=0, comp_insts=200,
              coal_mem_insts=10, uncoal_mem_insts=2, sfu_insts=30, sync_insts=2)
    vec = gpuperf(KernelProfile.from_values(blocks=blocks, **kw), gpu).to_frame()
    for i, b in enumerate(blocks):
        one = gpuperf(KernelProfile.from_values(blocks=b, **kw), gpu).to_frame()
        np.testing.assert_allclose(one.iloc[0].to_numpy(float), vec.iloc[i].to_numpy(float))
