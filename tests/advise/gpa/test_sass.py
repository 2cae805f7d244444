"""SASS parsing: operands, predicates, scoreboard barriers, memory spaces, branches, errors."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridperf.advise.gpa import GPAInputError, Predicate, SASSSyntaxError, parse_sass
from hybridperf.advise.gpa.sass import latency_class


@pytest.mark.parametrize(("text", "opcode", "mods", "dests", "srcs"), [
    ("LDG.E.SYS R2, [R4]", "LDG", ("E", "SYS"), {"R2"}, {"R4"}),
    ("LDG.E.64 R2, [R4.64+0x10]", "LDG", ("E", "64"), {"R2", "R3"}, {"R4", "R5"}),
    ("LDS.U.128 R4, [R0]", "LDS", ("U", "128"), {"R4", "R5", "R6", "R7"}, {"R0"}),
    ("STG.E.SYS [R2.64], R4", "STG", ("E", "SYS"), set(), {"R2", "R3", "R4"}),
    ("ISETP.GE.AND P0, PT, R0, c[0x0][0x160], PT", "ISETP", ("GE", "AND"), {"P0"}, {"R0"}),
    ("IADD3 R4, P0, R2, R3, RZ", "IADD3", (), {"R4", "P0"}, {"R2", "R3"}),
    ("IADD3.X R5, RZ, R7, RZ, P0, !PT", "IADD3", ("X",), {"R5"}, {"R7", "P0"}),
    ("IMAD.WIDE.U32 R2, R0, 0x4, R2", "IMAD", ("WIDE", "U32"), {"R2", "R3"}, {"R0", "R2", "R3"}),
    ("DFMA R2, R4, R6, R2", "DFMA", (), {"R2", "R3"}, {"R2", "R3", "R4", "R5", "R6", "R7"}),
    ("F2F.F64.F32 R2, R0", "F2F", ("F64", "F32"), {"R2", "R3"}, {"R0"}),
    ("F2F.F32.F64 R0, R2", "F2F", ("F32", "F64"), {"R0"}, {"R2", "R3"}),
    ("FSEL R0, R2, -|R3|, !P1", "FSEL", (), {"R0"}, {"R2", "R3", "P1"}),
    ("SHFL.BFLY PT, R5, R4, 0x1, 0x1f", "SHFL", ("BFLY",), {"R5"}, {"R4"}),
    ("VOTE.ANY R0, PT, P0", "VOTE", ("ANY",), {"R0"}, {"P0"}),
    ("PLOP3.LUT P0, PT, P1, P2, PT, 0x80, 0x0", "PLOP3", ("LUT",), {"P0"}, {"P1", "P2"}),
    ("R2P PR, R0, 0x7f", "R2P", (), {f"P{i}" for i in range(7)}, {"R0"}),
    ("LDG.E R2, desc[UR4][R2.64]", "LDG", ("E",), {"R2"}, {"R2", "R3", "UR4", "UR5"}),
    ("S2R R0, SR_TID.X", "S2R", (), {"R0"}, set()),
    ("FFMA R1, R2.reuse, R3, R4", "FFMA", (), {"R1"}, {"R2", "R3", "R4"}),
    ("MOV R1, c[0x0][0x28]", "MOV", (), {"R1"}, set()),
    ("EXIT", "EXIT", (), set(), set()),
    ("NOP", "NOP", (), set(), set()),
])
def test_operands(text, opcode, mods, dests, srcs):
    inst = parse_sass(text)
    assert (inst.opcode, inst.modifiers) == (opcode, mods)
    assert set(inst.destinations) == dests
    assert set(inst.sources) == srcs


def test_guard_predicates():
    assert parse_sass("@P0 LDG.E R0, [R2]").guard == Predicate("P0", False)
    inst = parse_sass("@!P1 BRA 0x40")
    assert inst.guard == Predicate("P1", True) and "P1" in inst.sources
    assert parse_sass("@PT MOV R0, R1").guard is None
    assert str(Predicate("P1", True)) == "!P1"


def test_nvdisasm_control_annotations():
    inst = parse_sass("/*0070*/  @P0 LDG.E.64 R2, [R4.64] &req={0,3} &wr=0x1 &rd=0x2 ?trans1 ;  /* 0x00 */")
    assert inst.wait_barriers == {0, 3}
    assert (inst.write_barrier, inst.read_barrier, inst.stall_cycles) == (1, 2, 1)
    assert parse_sass("IADD3 R0, R1, R2, RZ ?WAIT4_END_GROUP;").stall_cycles == 4


def test_cuassembler_and_maxas_control():
    inst = parse_sass("[B01----:R2:W3:Y:S04] FFMA R1, R2, R3, R4")
    assert (set(inst.wait_barriers), inst.read_barrier, inst.write_barrier, inst.stall_cycles) == ({0, 1}, 2, 3, 4)
    inst = parse_sass("03:-:1:Y:4 LDS.U.128 R4, [R0]")
    assert (set(inst.wait_barriers), inst.read_barrier, inst.write_barrier) == ({0, 1}, None, 1)
    assert parse_sass("--:-:-:-:6 MOV R0, R1").wait_barriers == frozenset()


@pytest.mark.parametrize(("text", "waits"), [
    ("DEPBAR.LE SB0, 0x0", {0}),
    ("DEPBAR.LE SB0, 0x1, {5,4}", {0, 4, 5}),
    ("DEPBAR {B1,B2}", {1, 2}),
])
def test_depbar_forms(text, waits):
    assert set(parse_sass(text).wait_barriers) == waits


@pytest.mark.parametrize(("text", "space"), [
    ("LDG.E R0, [R2]", "GLOBAL"), ("STG.E [R2], R0", "GLOBAL"), ("ATOMG.E.ADD R0, [R2], R4", "GLOBAL"),
    ("LDS R0, [R2]", "SHARED"), ("STS [R2], R0", "SHARED"), ("LDL R0, [R1+0x8]", "LOCAL"),
    ("STL [R1+0x8], R0", "LOCAL"), ("LDC R0, c[0x0][0x160]", "CONSTANT"), ("LD.E R0, [R2]", "GENERIC"),
    ("TEX.SCR.LL R0, R2, R4, 0x0, 0x5a, 2D, 0x1", "TEXTURE"), ("FADD R0, R1, R2", None),
])
def test_memory_space(text, space):
    assert parse_sass(text).memory_space == space


def test_constant_bank_operand_and_classes():
    assert parse_sass("FMUL R0, R1, c[0x0][0x160]").reads_constant_bank
    assert not parse_sass("FMUL R0, R1, R2").reads_constant_bank
    assert latency_class(parse_sass("MUFU.RCP R0, R1")) == "mufu"
    assert latency_class(parse_sass("F2I.FTZ.U32.TRUNC R0, R1")) == "convert"
    assert latency_class(parse_sass("POPC R0, R1")) == "bitcount"
    assert latency_class(parse_sass("LDS R0, [R1]")) == "shared"
    assert latency_class(parse_sass("LDG.E R0, [R2]")) == "memory"
    assert latency_class(parse_sass("DADD R0, R2, R4")) == "fp64"
    assert latency_class(parse_sass("FFMA R0, R1, R2, R3")) == "arith"


def test_branches_and_sync():
    bra = parse_sass("@P0 BRA 0x1f0")
    assert bra.branch_target == 0x1F0 and bra.is_branch and bra.ends_block and bra.falls_through
    assert not parse_sass("BRA 0x40").falls_through
    assert parse_sass("BRA !P2, 0x40").falls_through
    assert parse_sass("BRA `(.L_x_3)").branch_label == ".L_x_3"
    assert not parse_sass("EXIT").falls_through
    assert parse_sass("CALL.REL.NOINC 0x120").call_target == "0x120"
    assert parse_sass("CALL.ABS.NOINC `(_Z3foov)").call_target == "_Z3foov"
    assert parse_sass("BAR.SYNC 0x0").is_sync
    assert parse_sass("BAR.SYNC.DEFER_BLOCKING 0x0").is_sync
    assert not parse_sass("BSYNC B0").is_sync


@pytest.mark.parametrize("text", [
    "", "   ;", "ldg.e r2, [r4]", "@Q1 MOV R0, R1", "@P0", "MOV R0, [R1", "MOV R0, R1]",
    "MOV R0, R1 &foo=0x1", "MOV R0, R1 &req={7}", "LDG R0, [R2] &wr=0x9", "DEPBAR.LE SB7, 0x0",
    "MOV R0, , R1", "1234",
])
def test_unparseable_sass(text):
    with pytest.raises(SASSSyntaxError, match="SASS") as err:
        parse_sass(text)
    assert isinstance(err.value, GPAInputError) and isinstance(err.value, ValueError)
    assert "\n" not in str(err.value)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="@!PRUZT0123456789 .,[]{}()&?=xX-+|ABCDEFGLMNOSW;/*", max_size=40))
def test_parser_never_fails_unexpectedly(text):
    try:
        inst = parse_sass(text)
    except SASSSyntaxError:
        return
    assert inst.opcode and all(r not in ("RZ", "PT", "URZ", "UPT") for r in inst.sources | inst.destinations)
