"""End-to-end advice on the fixtures, the formatted report, and the public API."""
from __future__ import annotations

import importlib
import json

import pytest

from hybridperf.advise import gpa
from hybridperf.advise.gpa import (
    GPAInputError,
    GPAParameterError,
    GPAReport,
    advise,
    advise_from_samples,
    format_report,
    read_samples,
    report_to_dict,
)

from .helpers import PLAIN_CASES, fixture, make_table

LAUNCH = {"threads_per_block": 256, "blocks": 40, "active_warps_per_sm": 16}


@pytest.mark.parametrize("case", PLAIN_CASES + ("ncu_loop",))
def test_advise_every_fixture(case):
    rep = advise_from_samples(fixture(case), **LAUNCH)
    assert isinstance(rep, GPAReport)
    assert rep.total_samples == rep.active_samples + rep.latency_samples
    assert [s.speedup for s in rep.suggestions] == sorted((s.speedup for s in rep.suggestions), reverse=True)
    assert all(s.speedup >= 1.0 for s in rep.suggestions)
    assert all(s.speedup <= 2.0 + 1e-9 for s in rep.suggestions if s.category == "latency hiding")
    assert sum(a for _, a, _ in rep.label_totals) == pytest.approx(rep.total_samples)
    text = format_report(rep)
    assert text.startswith("GPA advice for kernel ") and text.endswith("\n")
    json.dumps(report_to_dict(rep))


def test_sync_report_ranks_warp_balance_first():
    rep = advise_from_samples(fixture("sync"), threads_per_block=256, blocks=160, active_warps_per_sm=64)
    top = rep.applicable[0]
    assert top.optimizer == "Warp Balance" and top.speedup == pytest.approx(100 / 30)
    text = format_report(rep)
    assert "1. Warp Balance (stall elimination): estimated speedup 3.33x" in text
    assert "70.0%" in text
    assert "BAR.SYNC 0x0  ->  0x30 LDS.U.32 R4, [R0+0x4] (line 6" in text


def test_loop_report_lists_hot_instructions_with_lines():
    rep = advise_from_samples(fixture("loop"), **LAUNCH)
    text = format_report(rep)
    assert "Loop Unrolling (latency hiding): estimated speedup 1.61x" in text
    assert "scope loop at 0x80 in _Z8loop_sumPKfPfi, lines 7-9: matched 119.0, active 87.0" in text
    row = next(line for line in text.splitlines() if "LDG.E.SYS R4, [R2]  ->" in line)
    assert row.split()[:4] == ["0x80", "8", "100.0", "GMEM_GMEM"]
    assert "Not applicable:" in text and "Warp Balance (no synchronisation stalls)" in text
    assert rep.kernel == "_Z8loop_sumPKfPfi"


def test_ncu_and_plain_loop_reports_agree():
    plain = advise_from_samples(fixture("loop"), **LAUNCH)
    ncu = advise_from_samples(fixture("ncu_loop"), **LAUNCH)
    assert ncu.kernel == "loop_sum(const float *, float *, int)"
    assert [(s.optimizer, round(s.speedup, 12)) for s in plain.suggestions] == \
           [(s.optimizer, round(s.speedup, 12)) for s in ncu.suggestions]


def test_report_with_top_and_nothing_applicable():
    rep = advise_from_samples(fixture("war"), threads_per_block=256, blocks=160, active_warps_per_sm=64)
    text = format_report(rep, top=1)
    assert "\n1. " in text and "\n2. " not in text
    assert rep.issued_samples == 15
    quiet = make_table([("FADD R0, R1, R2", 5, {}), ("EXIT", 1, {})])
    text = format_report(advise(quiet, threads_per_block=256, blocks=160, active_warps_per_sm=64))
    assert "No optimizer matched" in text


def test_report_to_dict_round_trips_to_json():
    d = json.loads(json.dumps(report_to_dict(advise_from_samples(fixture("loop"), **LAUNCH))))
    assert d["total_samples"] == 229 and d["arch"]["name"] == "V100"
    assert d["suggestions"][0]["optimizer"] == d["applicable"][0]
    assert {"optimizer", "speedup", "matched_samples", "hotspots", "scopes"} <= set(d["suggestions"][0])


def test_bad_inputs(tmp_path):
    with pytest.raises(GPAInputError, match="cannot read file"):
        advise_from_samples(tmp_path / "missing.csv", **LAUNCH)
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(GPAInputError, match="empty"):
        advise_from_samples(empty, **LAUNCH)
    with pytest.raises(GPAParameterError, match="exceeds V100's 64 warps per SM"):
        advise_from_samples(fixture("loop"), threads_per_block=256, blocks=40, active_warps_per_sm=80)
    with pytest.raises(GPAParameterError, match="threads_per_block"):
        advise_from_samples(fixture("loop"), threads_per_block=0, blocks=40, active_warps_per_sm=8)
    with pytest.raises(GPAParameterError, match="arch must be a GPAArch"):
        advise(read_samples(fixture("loop")), arch="V100", **LAUNCH)


@pytest.mark.parametrize("name", ["", ".arch", ".blame", ".cfg", ".errors", ".estimators", ".ncu",
                                  ".optimizers", ".reasons", ".report", ".samples", ".sass"])
def test_public_api_is_sorted_and_complete(name):
    mod = importlib.import_module("hybridperf.advise.gpa" + name)
    # isort style (ruff RUF022), as tests/test_public_api.py: CONSTANTS, Classes, functions
    assert list(mod.__all__) == sorted(
        mod.__all__, key=lambda n: (0 if n.isupper() else 1 if n[0].isupper() else 2, n))
    assert all(hasattr(mod, n) for n in mod.__all__)
    for err in (gpa.GPAInputError, gpa.GPAParameterError, gpa.SASSSyntaxError):
        assert issubclass(err, ValueError)
