"""neusight-<op> (elementwise, softmax, layernorm): the launches NeuSight recorded, compulsory bytes, PTX counts."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from hybridperf.datasets import load_dataset
from hybridperf.kernel import load_kernel

REFERENCE = Path(__file__).resolve().parents[2] / "hybridperf" / "kernels" / "reference" / "neusight-elementwise.cu"
# op -> (-DOP code of the reference, arrays of B*H floats it reads or writes)
ELEMENTWISE = {"add": (0, 3), "mul": (1, 3), "div": (2, 3), "pow": (3, 3), "addu": (4, 2), "mulu": (5, 2),
               "divu": (6, 2), "powu": (7, 2), "relu": (8, 2), "tanh": (9, 2), "gelu": (10, 2)}
OPS = [*ELEMENTWISE, "softmax", "ln"]


@pytest.fixture(scope="module")
def recorded():
    d = load_dataset("neusight-ops")
    return d[d["kernel"] != "neusight-conv"]


@pytest.mark.parametrize("op", OPS)
def test_every_recorded_launch_is_reproduced(recorded, op: str) -> None:
    """Grid and block of every NeuSight launch of the op (all five GPUs) follow from B and H alone."""
    rows = recorded[recorded["kernel"] == f"neusight-{op}"]
    assert len(rows) >= 6000
    prof = load_kernel(f"neusight-{op}").profile({"B": rows["size.B"].to_numpy(float),
                                                  "H": rows["size.H"].to_numpy(float)})
    np.testing.assert_array_equal(prof.blocks, rows["counter.blocks"].to_numpy(float))
    np.testing.assert_array_equal(prof.threads_per_block, rows["counter.threads_per_block"].to_numpy(float))
    assert np.isfinite(prof.to_frame().to_numpy()).all()


@pytest.mark.parametrize("op", ELEMENTWISE)
def test_elementwise_bytes_are_each_array_once(op: str) -> None:
    b, h = np.array([1.0, 77.0, 16372.0]), np.array([3.0, 168.0, 4094.0])
    prof = load_kernel(f"neusight-{op}").profile({"B": b, "H": h})
    np.testing.assert_allclose(prof.dram_bytes, 4.0 * ELEMENTWISE[op][1] * b * h)
    # each thread moves one 16-byte vector per array: the threads' vectors cover the elements, at most one block over
    vectors = prof.total_threads * (prof.global_loads + prof.global_stores)
    assert (vectors * 4 >= ELEMENTWISE[op][1] * b * h).all()
    assert (vectors * 4 < ELEMENTWISE[op][1] * (b * h + 512)).all()


def test_softmax_switches_kernel_at_1024() -> None:
    """H <= 1024: a row per lane group of a 128-thread block; beyond: one block per row; DRAM reads the row once."""
    k = load_kernel("neusight-softmax")
    prof = k.profile({"B": np.array([100.0, 100.0, 100.0]), "H": np.array([3.0, 1024.0, 1025.0])})
    assert list(prof.threads_per_block) == [128.0, 128.0, 128.0]  # H > 1024: min(H // 4, 1024) // 2, to a power of 2
    assert list(prof.blocks) == [2.0, 25.0, 100.0]  # 64 rows of 4 lanes x 2, 4 warps of one row, one per row
    np.testing.assert_allclose(prof.dram_bytes, 8.0 * 100 * np.array([3.0, 1024.0, 1025.0]))


HAVE_NVCC = shutil.which("nvcc") is not None


@pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not on PATH")
@pytest.mark.parametrize("op", ELEMENTWISE)
def test_elementwise_counts_are_the_references_ptx(op: str) -> None:
    """Per-thread counts = the static PTX of the counting reference's full-block path (sm_80)."""
    from hybridperf.record.ptx import compile_ptx, count_ptx, ptxas_resources

    code = ELEMENTWISE[op][0]
    counts = count_ptx(compile_ptx(REFERENCE, {"OP": code}), "neusight_elementwise").region("kernel")
    prof = load_kernel(f"neusight-{op}").profile({"B": 4.0, "H": 512.0})
    assert prof.global_loads[0] == counts["ld_global"] and prof.global_stores[0] == counts["st_global"]
    assert prof.comp_insts[0] + prof.sfu_insts[0] == counts["non_global"]
    assert prof.fp_insts[0] == counts["fp32"]
    assert prof.registers_per_thread[0] == ptxas_resources(REFERENCE, {"OP": code}, "neusight_elementwise").registers
