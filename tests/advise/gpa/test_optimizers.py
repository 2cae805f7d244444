"""Optimizer matching (paper Table 2, GPA.md Sec. 5) with hand-computed estimates."""
from __future__ import annotations

import pytest

from hybridperf.advise.gpa import (
    GPAParameterError,
    InstructionSamples,
    LaunchConfig,
    blame_samples,
    read_samples,
    run_optimizers,
)

from .helpers import fixture, make_table

FULL = LaunchConfig(threads_per_block=256, blocks=160, active_warps_per_sm=64)  # no parallel gain


def suggestions(table, launch=FULL):
    return {s.optimizer: s for s in run_optimizers(table, blame_samples(table), launch)}


def test_ranking_is_by_speedup():
    out = run_optimizers(read_samples(fixture("loop")), blame_samples(read_samples(fixture("loop"))),
                         LaunchConfig(256, 40, 16))
    assert [s.speedup for s in out] == sorted((s.speedup for s in out), reverse=True)
    assert len(out) == 11 and len({s.optimizer for s in out}) == 11


def test_warp_balance_on_sync_fixture():
    s = suggestions(read_samples(fixture("sync")))["Warp Balance"]
    assert s.matched_samples == 70 and s.speedup == pytest.approx(100 / 30)
    assert s.category == "stall elimination" and s.sample_share == pytest.approx(0.7)
    assert [(h.src_pc, h.dst_pc) for h in s.hotspots] == [(0x20, 0x30), (0x50, 0x60)]
    assert s.scopes[0].speedup == pytest.approx(100 / 50)


def test_loop_unrolling_and_code_reordering_scopes():
    # T = 229; matched latency M_L = 100 + 7 + 6 + 6 = 119, all in the inner loop whose pairs
    # hold A = 87 active samples (issued 45 + stall pairs' active parts 42): S = 229/(229-87).
    out = suggestions(read_samples(fixture("loop")))
    lu, cr = out["Loop Unrolling"], out["Code Reordering"]
    for s in (lu, cr):
        assert s.category == "latency hiding"
        assert s.matched_samples == 119 and s.speedup == pytest.approx(229 / 142)
        inner = s.scopes[0]
        assert "loop at 0x80" in inner.scope and (inner.matched_samples, inner.active_samples) == (119, 87)
        assert s.hotspots[0].src_pc == 0x80 and s.hotspots[0].dst_pc == 0xA0
        assert s.hotspots[0].samples == 100 and s.speedup <= 2.0


def test_loop_unrolling_needs_a_loop():
    out = suggestions(read_samples(fixture("raw_across_blocks")))
    assert out["Loop Unrolling"].speedup == 1.0 and out["Loop Unrolling"].note
    assert out["Code Reordering"].speedup > 1.0  # code reordering has no loop condition


def test_register_reuse_and_memory_transactions():
    t = make_table([("LDL R0, [R1+0x8]", 2, {}), ("FADD R4, R0, R0", 1, {"GMEM": (20, 15)}),
                    ("STG.E [R2], R4", 1, {"MTHR": (12, 10)}), ("EXIT", 1, {})])
    out = suggestions(t)
    t_total = t.total_samples
    assert out["Register Reuse"].matched_samples == 20
    assert out["Register Reuse"].speedup == pytest.approx(t_total / (t_total - 20))
    assert out["Memory Transaction Reduction"].matched_samples == 12
    assert out["Memory Transaction Reduction"].hotspots[0].src_sass == "STG.E [R2], R4"


def test_strength_reduction_matches_long_latency_arithmetic():
    t = make_table([("F2F.F64.F32 R2, R0", 3, {}), ("DMUL R4, R2, R6", 1, {"IDEP": (10, 8)}),
                    ("MUFU.RCP R8, R9", 2, {}), ("FADD R10, R11, R12", 4, {}), ("EXIT", 1, {})])
    s = suggestions(t)["Strength Reduction"]
    assert s.matched_samples == 3 + 10 + 2  # issued + blamed samples of F2F and MUFU
    assert s.speedup == pytest.approx(21 / 6)


def callee(name, rows, base=0x400, inlined_from=None):
    return tuple(InstructionSamples.from_counts(name, base + 16 * i, sass, issued=iss,
                                                stalls={r: a for r, (a, _) in st.items()},
                                                latency={r: lat for r, (_, lat) in st.items()},
                                                inlined_from=inlined_from)
                 for i, (sass, iss, st) in enumerate(rows))


def test_function_inlining_small_device_function():
    helper = callee("_Z6helperf", [("LDS R0, [R1]", 4, {}), ("FADD R2, R0, R0", 2, {"IDEP": (10, 8)}),
                                   ("RET.REL.NODEC R20 0x0", 2, {})])
    t = make_table([("CALL.REL.NOINC 0x400", 10, {}), ("EXIT", 2, {})], function="kern", extra=helper)
    s = suggestions(t)["Function Inlining"]
    # T = 30, A = 22; helper: M_L = 8, A^f = 4 + 2 + 2 + (10 - 8) = 10 -> S = 30 / (30 - 8)
    assert s.matched_samples == 8 and s.speedup == pytest.approx(30 / 22)
    assert s.scopes[0].scope == "function _Z6helperf" and s.scopes[0].active_samples == 10


def test_inlining_and_fast_math_skip_ifet_bound_kernels():
    math_fn = callee("__cuda_sm3x_div_rn_noftz_f32_slowpath", [("FFMA R0, R1, R2, R3", 3, {}),
                                                                ("RET.REL.NODEC R20 0x0", 1, {})])
    kernel_rows = [("CALL.REL.NOINC 0x400", 2, {}), ("EXIT", 1, {})]
    out = suggestions(make_table(kernel_rows, function="kern", extra=math_fn))
    assert out["Fast Math"].matched_samples == 4 and out["Fast Math"].speedup == pytest.approx(7 / 3)
    ifet = make_table([("CALL.REL.NOINC 0x400", 2, {"IFET": (9, 9)}), ("EXIT", 1, {})], function="kern",
                      extra=math_fn)
    out = suggestions(ifet)
    assert out["Fast Math"].speedup == 1.0 and "IFET" in out["Fast Math"].note
    assert out["Function Inlining"].speedup == 1.0


def test_function_splitting_needs_inlined_code():
    inl = callee("kern", [("FADD R0, R1, R2", 1, {"IFET": (8, 6)}), ("EXIT", 1, {})], base=0x100,
                 inlined_from="_Z5innerv")
    t = make_table([("FADD R3, R4, R5", 2, {"IFET": (5, 5)})], function="kern", extra=inl)
    s = suggestions(t)["Function Splitting"]
    assert s.matched_samples == 8 and s.scopes[0].scope == "inlined _Z5innerv"


def test_parallel_optimizers_use_launch():
    t = read_samples(fixture("loop"))
    i = t.issued_samples / t.total_samples
    out = suggestions(t, LaunchConfig(256, 40, 8))
    bi, ti = out["Block Increase"], out["Thread Increase"]
    r = (4 + 6 + 4) / 229  # PIPE + NSEL samples (no MTHR)
    assert bi.speedup == pytest.approx(i / (1 - (1 - i) ** 2) * 2 / (1 - r))
    assert ti.speedup == pytest.approx((1 - (1 - i) ** 16) / (1 - (1 - i) ** 2))
    assert bi.category == ti.category == "parallel" and ti.matched_samples == 68
    assert out["Block Increase"].hotspots[0].src_pc == 0x80  # most NSEL/PIPE samples
    assert suggestions(t, FULL)["Block Increase"].speedup == 1.0


def test_thread_increase_needs_latency_samples():
    t = make_table([("FADD R0, R1, R2", 5, {"NSEL": (3, 0)})])
    assert suggestions(t, LaunchConfig(256, 40, 8))["Thread Increase"].speedup == 1.0


def test_launch_config_accepts_numpy_numbers():
    np = pytest.importorskip("numpy")
    lc = LaunchConfig(np.int64(256), np.int32(40), np.float32(8.0))
    assert (lc.threads_per_block, lc.blocks, lc.active_warps_per_sm) == (256, 40, 8.0)
    assert type(lc.threads_per_block) is int and type(lc.active_warps_per_sm) is float


def test_launch_config_validation():
    for bad in ((0, 1, 8), (32, 0, 8), (32, 1, 0), (32, 1, float("nan")), (32.5, 1, 8)):
        with pytest.raises(GPAParameterError):
            LaunchConfig(*bad)
