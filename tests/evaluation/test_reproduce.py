"""`hybridperf reproduce` and the foundation commands, run in-process."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from hybridperf.cli import main
from hybridperf.evaluation.reproduce import run_checks
from hybridperf.hardware import list_gpus
from hybridperf.kernel import list_kernels

REQUIRED_IDS = {"mwp-cwp-table2", "ryoo-efficiency", "ryoo-utilization", "occupancy-cc86", "occupancy-8800gtx",
                "scaled-counts-matvec", "scaled-counts-dot", "scaled-counts-vecadd", "scaled-counts-matadd"}


def test_every_check_passes() -> None:
    checks = run_checks()
    assert REQUIRED_IDS <= {c.id for c in checks}
    failed = [(c.id, c.paper, c.computed) for c in checks if not c.ok]
    assert not failed


def test_reproduce_json(capsys) -> None:
    assert main(["reproduce", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    for r in rows:
        assert {"id", "paper", "computed", "rel_error", "ok"} <= set(r)
    assert all(r["ok"] for r in rows)


def test_reproduce_text(capsys) -> None:
    assert main(["reproduce"]) == 0
    out = capsys.readouterr().out
    assert "mwp-cwp-table2" in out and "failed" in out


def test_gpus_lists_every_spec(capsys) -> None:
    assert main(["gpus"]) == 0
    out = capsys.readouterr().out
    assert all(Path(g.path).stem in out for g in list_gpus())
    assert main(["gpus", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {"name", "cc", "sms", "clock_mhz", "dram_gbs"} <= set(rows[0])


@pytest.mark.parametrize("kernel", [k.name for k in list_kernels()])
@pytest.mark.parametrize("gpu", [Path(g.path).stem for g in list_gpus()])
def test_analyze_every_kernel_on_every_gpu(kernel: str, gpu: str, capsys) -> None:
    code = main(["analyze", "--gpu", gpu, "--kernel", kernel, "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    row = out["rows"][0]
    if row["feasible"]:
        for m in ("mwp-cwp", "gpuperf", "scaled-counts", "roofline"):
            assert row["models"][m]["time_ms"] > 0
    else:
        assert row["reason"]


def test_analyze_single_and_table(capsys) -> None:
    assert main(["analyze", "--gpu", "titan-v", "--kernel", "matvec", "--set", "N=4096"]) == 0
    out = capsys.readouterr().out  # the summary: each model's time, the regime, the limiter
    assert "mwp_cwp_ms" in out and "memory-bound" in out and "warps" in out and "b_itilp" not in out
    assert main(["analyze", "--gpu", "titan-v", "--kernel", "matvec", "--set", "N=4096", "--terms"]) == 0
    out = capsys.readouterr().out
    assert "[mwp-cwp]" in out and "departure_delay" in out and "b_itilp" in out
    assert main(["analyze", "--gpu", "titan-v", "--kernel", "matvec", "--set", "N=1024:8192:x2",
                 "--set", "BLOCK=128,256", "--model", "mwp-cwp"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") >= 10 and "mwp_cwp_ms" in out


def test_analyze_reports_infeasible(capsys) -> None:
    assert main(["analyze", "--gpu", "8800-gtx", "--kernel", "tiled-matmul", "--set", "TILE=32",
                 "--set", "N=1024"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the table wraps long cells
    assert "infeasible" in out and "threads per block exceed the limit of 512" in out


@pytest.mark.parametrize("argv, message", [
    (["analyze", "--gpu", "gtx9999", "--kernel", "matvec"], "unknown GPU"),
    (["analyze", "--gpu", "titan-v", "--kernel", "nope"], "unknown kernel"),
    (["analyze", "--gpu", "titan-v", "--kernel", "matvec", "--set", "N"], "NAME=VALUE"),
    (["analyze", "--gpu", "titan-v", "--kernel", "matvec", "--set", "N=abc"], "cannot read value"),
    (["analyze", "--gpu", "titan-v", "--kernel", "matvec", "--set", "Q=1"], "unknown parameter 'Q'"),
    (["analyze", "--gpu", "titan-v"], "required"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_input_exits_2_with_one_line(argv, message, capsys) -> None:
    assert main(argv) == 2  # usage errors too: main returns the code rather than raising SystemExit
    err = capsys.readouterr().err
    assert err.startswith("hybridperf: error:") and message in err and err.count("\n") == 1

