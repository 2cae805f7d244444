"""Control-flow graphs, loop nests and kernel/device-function roles."""
from __future__ import annotations

import pytest

from hybridperf.advise.gpa import (
    GPAInputError,
    InstructionSamples,
    SampleTable,
    build_program,
    read_samples,
)

from .helpers import fixture, make_table


def test_blocks_of_raw_across_blocks():
    cfg = build_program(read_samples(fixture("raw_across_blocks"))).functions[0]
    assert cfg.block_starts == (0, 5, 7)
    assert set(cfg.successors[0]) == {1, 2} and cfg.successors[1] == (2,) and cfg.successors[2] == ()
    assert set(cfg.predecessors[2]) == {0, 1}
    assert cfg.loops == () and cfg.is_kernel
    assert cfg.size_bytes == 16 * 12


@pytest.mark.parametrize("case", ["loop", "ncu_loop"])
def test_nested_loops(case):
    cfg = build_program(read_samples(fixture(case))).functions[0]
    base = cfg.records[0].pc
    outer, inner = sorted(cfg.loops, key=lambda lp: lp.depth)
    assert (outer.header_pc - base, inner.header_pc - base) == (0x50, 0x80)
    assert inner.parent == outer.loop_id and outer.parent is None and inner.depth == 2
    assert {pc - base for pc in inner.pcs} == set(range(0x80, 0xE0, 0x10))
    assert {pc - base for pc in outer.pcs} == set(range(0x50, 0x100, 0x10))
    ffma = cfg.index_of(base + 0xA0)
    assert [lp.loop_id for lp in cfg.loop_chain(ffma)] == [inner.loop_id, outer.loop_id]
    assert cfg.innermost_loop[cfg.index_of(base + 0x60)] == outer.loop_id
    assert cfg.innermost_loop[0] is None


def test_kernel_and_device_functions():
    callee = tuple(InstructionSamples.from_counts("_Z6helperf", 0x200 + 16 * i, s, issued=1)
                   for i, s in enumerate(["FADD R0, R0, R1", "RET.REL.NODEC R20 0x0"]))
    t = make_table([("CALL.REL.NOINC 0x200", 1, {}), ("EXIT", 1, {})], function="kern", extra=callee)
    prog = build_program(t)
    assert prog.function("kern").is_kernel and not prog.function("_Z6helperf").is_kernel
    named = make_table([("CALL.ABS.NOINC `(_Z6helperf)", 1, {}), ("EXIT", 1, {})], function="kern",
                       extra=callee)
    assert not build_program(named).function("_Z6helperf").is_kernel
    explicit = SampleTable(t.instructions, kernel="_Z6helperf")
    assert build_program(explicit).function("_Z6helperf").is_kernel


def test_unreachable_code_is_in_no_loop():
    t = make_table([("EXIT", 1, {}), ("FADD R0, R0, R1", 1, {}), ("BRA 0x10", 1, {})])
    cfg = build_program(t).functions[0]
    assert cfg.loops == ()


def test_bad_branch_target_in_memory_table():
    t = make_table([("BRA 0x18", 1, {}), ("EXIT", 1, {})])
    with pytest.raises(GPAInputError, match="branch target 0x18 is not a pc"):
        build_program(t)


def test_offset_branch_targets_resolve():
    recs = tuple(InstructionSamples.from_counts("k", 0x1000 + 16 * i, s, issued=1)
                 for i, s in enumerate(["FADD R0, R0, R1", "@P0 BRA 0x0", "EXIT"]))
    cfg = build_program(SampleTable(recs)).functions[0]
    assert len(cfg.loops) == 1 and cfg.loops[0].header_pc == 0x1000
