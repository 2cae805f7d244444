"""Nsight Compute collection: command lines, CSV parsing, retries and stall export with a fake ncu."""
from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from hybridperf.record import record_sweep
from hybridperf.record.ncu import (
    NCU_METRICS,
    child_command,
    collect_ncu,
    metrics_command,
    parse_metrics_csv,
)
from hybridperf.sweepfile import read_sweep

from .test_record import FakeRunner

RAW = """==PROF== Connected to process 4242 (/usr/bin/python3.11)
==PROF== Profiling "vecadd" - 0: 0%....50%....100% - 9 passes
==PROF== Disconnected from process 4242
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device",\
"CC","dram__bytes_read.sum","gpu__time_duration.sum","launch__registers_per_thread",\
"sm__warps_active.avg.pct_of_peak_sustained_active"
"","","","","","","","","","","","byte","nsecond","register/thread","%"
"0","4242","python3.11","127.0.0.1","vecadd","1","13","(256, 1, 1)","(3907, 1, 1)","0","9.0","12,009,472",\
"9,344","16","81.25"
"""

FAKE_NCU = r'''#!{python}
import json, sys
args = sys.argv[1:]
log = open({log!r}, "a")
log.write(json.dumps(args) + "\n")
if "--metrics" in args:
    metrics = args[args.index("--metrics") + 1].split(",")
    if "bogus__metric.sum" in metrics:
        print("==ERROR== Failed to find metric bogus__metric.sum")
        sys.exit(1)
    print("==PROF== Connected to process 1")
    print(",".join('"%s"' % h for h in ["ID", "Kernel Name"] + metrics))
    print(",".join('""' for _ in range(len(metrics) + 2)))
    print(",".join(['"0"', '"vecadd"'] + ['"%d"' % (i + 1) for i in range(len(metrics))]))
elif "--export" in args:
    open(args[args.index("--export") + 1] + ".ncu-rep", "w").write("report")
elif "--import" in args:
    print('"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)"')
    print('"0x0","LDG.E R2, [R2.64]","12","9"')
'''


@pytest.fixture
def fake_ncu(tmp_path: Path) -> tuple[str, Path]:
    log = tmp_path / "ncu-calls.jsonl"
    exe = tmp_path / "bin" / "ncu"
    exe.parent.mkdir()
    exe.write_text(FAKE_NCU.format(python=sys.executable, log=str(log)))
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return str(exe), log


def test_parse_raw_csv() -> None:
    got = parse_metrics_csv(RAW, ["dram__bytes_read.sum", "gpu__time_duration.sum", "launch__registers_per_thread",
                                  "sm__warps_active.avg.pct_of_peak_sustained_active", "not__there.sum"])
    assert got == {"dram__bytes_read.sum": 12009472.0, "gpu__time_duration.sum": 9344.0,
                   "launch__registers_per_thread": 16.0, "sm__warps_active.avg.pct_of_peak_sustained_active": 81.25}
    assert parse_metrics_csv("==PROF== nothing profiled\n", ["x"]) == {}


def test_command_lines() -> None:
    child = child_command("seed004-vecadd", "/b.toml", {"N": 1024.0, "BLOCK": 256.0})
    assert child[:3] == [sys.executable, "-m", "hybridperf.record.child"]
    assert json.loads(child[3]) == {"bench": "/b.toml", "device": 0, "kernel": "seed004-vecadd",
                                    "params": {"BLOCK": 256.0, "N": 1024.0}}
    cmd = metrics_command("ncu", "vecadd", NCU_METRICS[:2], child)
    assert cmd[:7] == ["ncu", "--csv", "--page", "raw", "--print-units", "base", "--metrics"]
    assert cmd[7] == "gpu__time_duration.sum,sm__cycles_elapsed.avg"
    assert cmd[8:14] == ["--kernel-name", "regex:^vecadd$", "--launch-count", "1", "--target-processes", "all"]
    assert cmd[14:] == child


def test_collect_drops_unknown_metrics_and_exports_stalls(fake_ncu: tuple[str, Path], tmp_path: Path) -> None:
    exe, log = fake_ncu
    stall = tmp_path / "out" / "stalls.csv"
    res = collect_ncu(exe, "vecadd", "seed004-vecadd", "/b.toml", {"N": 1024.0, "BLOCK": 256.0},
                      stall_csv=stall, metrics=["gpu__time_duration.sum", "bogus__metric.sum"])
    assert res.error == "" and res.counters == {"gpu__time_duration.sum": 1.0}
    assert res.stall_csv == stall and "LDG.E" in stall.read_text()
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(calls) == 4  # metrics (refused), metrics (retried without the unknown one), profile, export
    assert calls[2][:4] == ["--section", "SourceCounters", "--section", "WarpStateStats"]
    assert calls[3][:2] == ["--import", calls[2][calls[2].index("--export") + 1] + ".ncu-rep"]


def test_ncu_failure_is_reported_not_raised(tmp_path: Path) -> None:
    exe = tmp_path / "ncu"
    exe.write_text(f"#!{sys.executable}\nprint('==ERROR== ERR_NVGPUCTRPERM - The user does not have permission')\n"
                   "raise SystemExit(1)\n")
    exe.chmod(0o755)
    res = collect_ncu(str(exe), "vecadd", "seed004-vecadd", "/b.toml", {"N": 1.0})
    assert res.counters == {} and res.error.startswith("ncu failed (1): ==ERROR== ERR_NVGPUCTRPERM")


def test_record_with_ncu(fake_ncu: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exe, _ = fake_ncu
    monkeypatch.setenv("PATH", str(Path(exe).parent) + os.pathsep + os.environ["PATH"])
    out = tmp_path / "sweep.csv"
    s = record_sweep("seed004-vecadd", {"N": [1e6]}, {"BLOCK": [256]}, out, gpu="h100-sxm", runner=FakeRunner(),
                     ncu=True, progress=False)
    assert s.ok == 1
    df = read_sweep(out)
    assert (df.loc[0, "counter.gpu__time_duration.sum"] == 1
            and df.loc[0, f"counter.{NCU_METRICS[-1]}"] == len(NCU_METRICS))
    assert df.loc[0, "info.ncu"] == "ok"
    rel = df.loc[0, "info.stall_samples"]
    assert rel == "sweep.csv.stalls/seed004-vecadd__h100-sxm__N=1000000__BLOCK=256.csv"
    assert (tmp_path / rel).is_file()


def test_record_refuses_ncu_when_absent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    from hybridperf.errors import RecordError

    with pytest.raises(RecordError, match="ncu \\(Nsight Compute\\) is not on PATH"):
        record_sweep("seed004-vecadd", {"N": [1e6]}, None, tmp_path / "s.csv", gpu="h100-sxm", runner=FakeRunner(),
                     ncu=True, progress=False)
