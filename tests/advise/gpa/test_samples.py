"""Sample-table readers: the plain CSV format, the ncu source-page export, and bad input."""
from __future__ import annotations

import warnings

import pytest

from hybridperf.advise.gpa import (
    REASONS,
    GPAInputError,
    GPAInputWarning,
    InstructionSamples,
    SampleTable,
    read_ncu_source_csv,
    read_plain_csv,
    read_samples,
)
from hybridperf.advise.gpa.reasons import NSIGHT_REASON_MAP, nsight_reason_class

from .helpers import PLAIN_CASES, fixture

HEADER = "function,pc,sass,line,issued,stall_GMEM,latency_GMEM\n"


def write(tmp_path, text, name="s.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("case", PLAIN_CASES)
def test_plain_fixtures_read(case):
    t = read_plain_csv(fixture(case))
    assert t.total_samples == t.active_samples + t.latency_samples
    assert all(r.line is not None for r in t.instructions)
    assert [r.pc for r in t.instructions] == [16 * i for i in range(len(t.instructions))]


def test_plain_counts_and_totals():
    t = read_samples(fixture("loop"))
    ffma = next(r for r in t.instructions if r.pc == 0xA0)
    assert (ffma.samples("GMEM"), ffma.latency("GMEM"), ffma.samples("PIPE"), ffma.issued) == (120, 100, 4, 6)
    assert ffma.sass == "FFMA R6, R4, R5, R6" and ffma.line == 9
    assert (t.total_samples, t.latency_samples, t.issued_samples) == (229, 119, 68)
    assert t.reason_totals()["GMEM"] == (120, 100)
    frame = t.to_frame()
    assert len(frame) == len(t.instructions) and frame["stall_GMEM"].sum() == 120


def test_decimal_pc_and_optional_columns(tmp_path):
    p = write(tmp_path, "function,pc,sass,issued,inlined_from,file\nk,32,MOV R0, R1,3,,a.cu\n"
              .replace("MOV R0, R1", '"MOV R0, R1"'))
    r = read_plain_csv(p).instructions[0]
    assert (r.pc, r.issued, r.line, r.file, r.inlined_from) == (32, 3, None, "a.cu", None)


def test_ncu_fixture_matches_plain_loop():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ncu = read_samples(fixture("ncu_loop"))
    plain = read_samples(fixture("loop"))
    assert ncu.kernel == "loop_sum(const float *, float *, int)"
    assert ncu.functions == (ncu.kernel,)
    assert [r.sass.split(" 0x")[0] for r in ncu.instructions] == [r.sass.split(" 0x")[0] for r in plain.instructions]
    assert [r.all_samples for r in ncu.instructions] == [r.all_samples for r in plain.instructions]
    assert [r.latency_samples for r in ncu.instructions] == [r.latency_samples for r in plain.instructions]
    assert ncu.instructions[0].pc == 0x7F3A1C000A00


def test_nsight_reason_mapping():
    assert nsight_reason_class("stall_long_sb") == "GMEM"
    assert nsight_reason_class("smsp__pcsamp_warps_issue_stalled_long_scoreboard") == "GMEM"
    assert nsight_reason_class("stall_selected") == "NONE"
    assert nsight_reason_class("stall_barrier") == "SYNC"
    assert nsight_reason_class("stall_short_sb") == "IDEP"
    assert nsight_reason_class("stall_mio") == "MTHR"
    assert nsight_reason_class("stall_no_inst") == "IFET"
    assert nsight_reason_class("stall_gmma") is None
    assert set(NSIGHT_REASON_MAP.values()) <= set(REASONS)


NCU_HEAD = ('"Kernel Name","{k}"\n"Address","Source","Warp Stall Sampling (All Samples)",'
            '"stall_selected","stall_long_sb","stall_gmma","stall_selected (Not Issued)",'
            '"stall_long_sb (Not Issued)","stall_gmma (Not Issued)"\n')


def ncu_text(kernel="k1", rows=(('0x100', 'LDG.E R0, [R2]', 5, 3, 2, 0, 0, 0, 0),
                                ('0x110', 'FADD R1, R0, R0', 30, 2, 28, 0, 0, 20, 0))):
    out = NCU_HEAD.format(k=kernel)
    for r in rows:
        out += ",".join(f'"{v}"' for v in r) + "\n"
    return out


def test_ncu_two_kernels_need_selection(tmp_path):
    p = write(tmp_path, ncu_text("first") + ncu_text("second"))
    with pytest.raises(GPAInputError, match="2 kernel tables .*pass kernel=NAME"):
        read_samples(p)
    with pytest.warns(GPAInputWarning, match="stall_gmma"):
        t = read_samples(p, kernel="second")
    assert t.kernel == "second" and t.total_samples == 35
    with pytest.raises(GPAInputError, match="no kernel table"):
        read_ncu_source_csv(p, kernel="third")


def test_ncu_unknown_reason_and_clipping_warn(tmp_path):
    rows = (('0x100', 'LDG.E R0, [R2]', "1,005", 3, 1000, 2, 0, 1200, 0),)
    p = write(tmp_path, ncu_text(rows=rows))
    with pytest.warns(GPAInputWarning) as rec:
        t = read_ncu_source_csv(p)
    msgs = " ".join(str(w.message) for w in rec)
    assert "stall_gmma" in msgs and "clipped" in msgs
    r = t.instructions[0]
    assert (r.samples("GMEM"), r.latency("GMEM"), r.samples("OTHR"), r.issued) == (1000, 1000, 2, 3)
    assert len(t.notes) == 2


def test_ncu_cuda_sass_view_gives_lines(tmp_path):
    text = ('"Kernel Name","k"\n"Line No","Source","Address","Source","stall_selected",'
            '"stall_wait","stall_selected (Not Issued)","stall_wait (Not Issued)"\n'
            '"12","  x = a[i];","-","-","",""," ",""\n'
            '"","","0x10","LDG.E R0, [R2]","4","0","0","0"\n'
            '"13","  y = x + 1;","-","-","","","",""\n'
            '"","","0x20","FADD R1, R0, 1","2","6","0","5"\n')
    t = read_ncu_source_csv(write(tmp_path, text))
    assert [(r.pc, r.line) for r in t.instructions] == [(0x10, 12), (0x20, 13)]
    assert t.instructions[1].latency("IDEP") == 5


@pytest.mark.parametrize(("text", "match"), [
    ("", "file is empty"),
    ("  \n\n", "file is empty"),
    ("function,pc,issued\nk,0x0,1\n", "missing column.*sass"),
    (HEADER.replace("stall_GMEM", "stall_GMEN"), "unknown column 'stall_gmen'"),
    ("function,pc,sass,issued,latency_IDEP\nk,0,NOP,1,0\n", "needs a matching 'stall_idep'"),
    (HEADER, "header but no instruction rows"),
    (HEADER + "k,0x0,NOP,1,1,-3,0\n", r"line 2 column 'stall_gmem'.*not a count"),
    (HEADER + "k,0x0,NOP,1,1,2.5,0\n", r"line 2 column 'stall_gmem'.*whole"),
    (HEADER + "k,0x0,NOP,1,1,abc,0\n", r"line 2 column 'stall_gmem'.*not a number"),
    (HEADER + "k,0x0,NOP,1,1,2,3\n", r"line 2 column 'latency_GMEM'.*exceeds"),
    (HEADER + "k,0x0,NOP,1,1,2,0\nk,0x10,ldg r0,1,1,0,0\n", r"line 3 column 'sass'.*cannot parse SASS"),
    (HEADER + "k,zz,NOP,1,1,0,0\n", r"line 2 column 'pc'"),
    (HEADER + ",0x0,NOP,1,1,0,0\n", r"line 2 column 'function'"),
    (HEADER + "k,0x0,NOP,1,1\n", r"line 2: 5 fields"),
    (HEADER + "k,0x0,NOP,1,1,0,0\nk,0x0,NOP,1,1,0,0\n", "lists pc 0x0 twice"),
    (HEADER + "k,0x0,NOP,1,0,0,0\n", "every sample count is 0"),
    (HEADER + "k,0x0,BRA 0x40,1,1,0,0\n", r"line 2: branch target 0x40 is not a pc"),
    (HEADER + "k,0x0,BRA `(.L_x_1),1,1,0,0\n", r"line 2: branch target label"),
    ("x,y,z\n1,2,3\n", "unrecognised sample table"),
    ('"Kernel Name","k"\n"Address","Source","stall_selected"\n"0x10","NOP","1"\n', "Not Issued"),
    ('"Kernel Name","k"\n"Address","Source","stall_wait","stall_wait (Not Issued)"\n"0x10","NOP","1","0"\n',
     "stall_selected"),
    ('"Kernel Name","k"\n"Address","Source","Instructions Executed"\n"0x10","NOP","1"\n', "per-reason"),
    ('"Kernel Name","k"\n"Something","Else"\n', 'no header row starting with "Address"'),
])
def test_bad_input_errors(tmp_path, text, match):
    p = write(tmp_path, text)
    with pytest.raises(GPAInputError, match=match) as err:
        read_samples(p)
    msg = str(err.value)
    assert "\n" not in msg and str(p) in msg


def test_ncu_bad_count_names_line_and_column(tmp_path):
    rows = (('0x100', 'LDG.E R0, [R2]', 5, 3, "x", 0, 0, 0, 0),)
    with pytest.raises(GPAInputError, match=r"line 3 column 'stall_long_sb'"):
        read_ncu_source_csv(write(tmp_path, ncu_text(rows=rows)))


def test_missing_file():
    with pytest.raises(GPAInputError, match="cannot read file"):
        read_samples("/nonexistent/samples.csv")


def test_instruction_samples_validation():
    with pytest.raises(GPAInputError, match="unknown stall reason 'GMEN'"):
        InstructionSamples.from_counts("k", 0, "NOP", stalls={"GMEN": 1})
    with pytest.raises(GPAInputError, match="latency samples .* exceed"):
        InstructionSamples.from_counts("k", 0, "NOP", stalls={"GMEM": 1}, latency={"GMEM": 2})
    with pytest.raises(GPAInputError, match="must be an integer >= 0"):
        InstructionSamples.from_counts("k", 0, "NOP", issued=-1)
    with pytest.raises(GPAInputError, match="no instructions"):
        SampleTable(())
