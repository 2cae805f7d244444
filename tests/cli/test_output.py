"""What people see: tables fitted to 100 columns, number formats, gpus show, -o files, plots, progress, permissions."""
from __future__ import annotations

import io
import json
import math
import os
import re
import tomllib
from importlib.metadata import version
from pathlib import Path

import pandas as pd
import pytest

from hybridperf.cli import main
from hybridperf.cli.render import format_column
from hybridperf.progress import reporting, task, track
from hybridperf.references import cite
from tests.paths import TITANV_SWEEP
from tests.recorder import Recorder

SWEEP = str(TITANV_SWEEP)


@pytest.fixture(scope="module")
def model_path(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("out") / "model.json")
    assert main(["train", SWEEP, "-o", path, "-q"]) == 0
    return path


@pytest.fixture
def columns(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")


def _sig(text: str) -> int:
    """Significant figures of a formatted number."""
    digits = re.sub(r"e[+-]\d+$", "", text).replace("-", "").replace(".", "").lstrip("0")
    return len(digits)


def test_numbers_share_one_style_per_column() -> None:
    assert format_column([1.348, 20.11, 320.2, 5121.7]) == ["1.348", "20.11", "320.2", "5122"]
    assert all(_sig(s) == 4 for s in format_column([0.0123456, 0.5, 7.25, 99.999]))
    sci = format_column([8.086e-20, 15.31, 4.999e21])  # one value outside [1e-3, 1e6): the column is scientific
    assert sci == ["8.086e-20", "1.531e+01", "4.999e+21"]
    assert format_column([256.0, 1024, 65536.0]) == ["256", "1024", "65536"]  # whole numbers stay whole
    assert format_column([float("nan"), None, True, "x", 2.5]) == ["-", "-", "yes", "x", "2.500"]
    for text, value in zip(format_column([3.14159e-5, 2.0e7, 1.5]), [3.14159e-5, 2.0e7, 1.5]):
        assert math.isclose(float(text), value, rel_tol=5e-4)


@pytest.mark.parametrize("argv", [
    ["gpus"], ["kernels"], ["datasets"], ["reproduce"], ["gpus", "show", "a100"],
    ["analyze", "--gpu", "titan-v", "--kernel", "tiled-matmul", "--set", "N=512:4096:x2", "--set", "TILE=8,16,32"],
    ["analyze", "--gpu", "a100", "--kernel", "matvec", "--set", "N=4096", "--terms"],
    ["rank", "--kernel", "clblast-xgemm", "--gpu", "gtx680", "--set", "M=256", "--set", "N=256", "--set", "K=256",
     "--space", "MWG=32,64", "--space", "NWG=32,64"],
])
def test_tables_fit_100_columns(argv, columns, capsys) -> None:
    assert main(argv) in (0, 1)
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 100, max(out.splitlines(), key=len)


def test_wide_keeps_every_column(columns, capsys) -> None:
    assert main(["gpus"]) == 0
    narrow = capsys.readouterr().out
    assert main(["gpus", "--wide"]) == 0
    wide = capsys.readouterr().out
    header = wide.splitlines()[0].split()
    assert header == ["name", "gpu", "cc", "sms", "clock_mhz", "dram_gbs", "fp32_gflops", "aliases"]
    a100 = next(line for line in wide.splitlines() if line.startswith("a100-pcie-40gb "))
    assert "NVIDIA A100 PCIe 40GB" in a100 and "a100, a100-40gb, a100-pcie, a100-pcie-40gb" in a100
    assert max(len(line) for line in narrow.splitlines()) <= 100 < max(len(line) for line in wide.splitlines())


def test_version_and_common_options(capsys) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"hybridperf {version('hybridperf')}"
    assert main(["-q", "--wide", "kernels", "-v"]) == 0  # before or after the command


def test_gpus_show_every_value_and_its_source(capsys) -> None:
    from hybridperf.hardware import load_gpu

    doc = tomllib.loads(Path(load_gpu("a100").path).read_text())
    assert main(["gpus", "show", "a100", "--json"]) == 0
    shown = {(v["section"], v["name"]): v for v in json.loads(capsys.readouterr().out)["values"]}
    for section in ("spec", "model"):
        for key, entry in doc[section].items():
            assert shown[(section, key)]["value"] == entry["value"]
            assert shown[(section, key)]["source"] == cite(entry["source"])
    assert any(s == "limits" for s, _ in shown)
    assert main(["gpus", "show", "titan-v", "--wide"]) == 0
    out = capsys.readouterr().out
    assert "Hong & Kim (ISCA 2009)" in out and "seed 00" not in out  # sources cite papers
    assert main(["gpus", "titan-v"]) == 2 and "gpus show titan-v" in capsys.readouterr().err


def test_o_writes_csv_and_parquet_with_what_json_prints(model_path: str, tmp_path: Path, capsys) -> None:
    base = ["predict", "-m", model_path, "--kernel", "matvec", "--set", "N=1024:16384:x2"]
    assert main([*base, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert main([*base, "-o", str(tmp_path / "p.parquet")]) == 0
    assert main([*base, "-o", str(tmp_path / "p.csv")]) == 0
    for frame in (pd.read_parquet(tmp_path / "p.parquet"), pd.read_csv(tmp_path / "p.csv")):
        assert frame["pred_ms"].tolist() == pytest.approx([r["pred_ms"] for r in rows], rel=1e-12)
        assert frame["config.BLOCK"].tolist() == [256] * 5 and "time_ms" not in frame.columns
    assert main(["rank", "-m", model_path, "--kernel", "matvec", "--gpu", "titan-v", "--set", "N=4096", "-o",
                 str(tmp_path / "r.csv")]) == 0
    ranked = pd.read_csv(tmp_path / "r.csv")  # rows to measure: kernel, gpu, size.*, config.*, predictions as info.*
    assert list(ranked.columns[:4]) == ["kernel", "gpu", "size.N", "config.BLOCK"] and "info.rank" in ranked.columns
    assert ranked["info.pred_ms"].is_monotonic_increasing
    assert main(["analyze", "--gpu", "titan-v", "--kernel", "matvec", "--set", "N=1024,4096", "-o",
                 str(tmp_path / "a.parquet"), "--terms"]) == 0
    assert {"N", "mwp-cwp.mwp", "gpuperf.b_itilp"} <= set(pd.read_parquet(tmp_path / "a.parquet").columns)
    assert main(["evaluate", SWEEP, "--split", "S2", "--kernel", "seed004-matadd", "-o", str(tmp_path / "e.csv")]) == 0
    assert any(m.startswith("hybrid") for m in pd.read_csv(tmp_path / "e.csv")["method"])
    capsys.readouterr()
    assert main([*base, "-o", str(tmp_path / "p.xlsx")]) == 2
    assert "name a table file ending in .csv, .csv.gz, .parquet" in capsys.readouterr().err


def test_plots_are_written_and_labelled(model_path: str, tmp_path: Path) -> None:
    import matplotlib.image

    png = tmp_path / "curve.png"
    assert main(["predict", "-m", model_path, "--kernel", "matvec", "--set", "N=1024:65536:x2", "--plot",
                 str(png)]) == 0
    assert matplotlib.image.imread(png).shape[:2] == (552, 840)  # 7.0 x 4.6 in at 120 dpi
    svg = tmp_path / "curve.svg"
    rows = tmp_path / "rows.csv"
    rows.write_text("kernel,gpu,size.N,time_ms\n" + "".join(f"seed004-matvec,titan-v,{n},{n * n / 8e5}\n"
                                                           for n in (2048, 4096, 8192)))
    assert main(["predict", "-m", model_path, "--rows", str(rows), "--plot", str(svg)]) == 0
    text = svg.read_text()
    assert "time (ms)" in text and "measured" in text
    for argv, name in ((["rank", "-m", model_path, "--kernel", "matvec", "--gpu", "titan-v", "--set", "N=4096"],
                        "front.svg"),
                       (["evaluate", SWEEP, "--split", "S2", "--kernel", "seed004-matadd"], "eval.svg"),
                       (["advise", "--gpu", "a100", "--kernel", "matvec", "--set", "N=1024,16384"], "adv.svg")):
        flag = "--chart" if argv[0] == "advise" else "--plot"
        assert main([*argv, flag, str(tmp_path / name)]) == 0
        assert (tmp_path / name).stat().st_size > 10_000
    assert "Pareto front" in (tmp_path / "front.svg").read_text()
    assert "measured time (ms)" in (tmp_path / "eval.svg").read_text()
    adv = (tmp_path / "adv.svg").read_text()
    assert "N=1024" in adv and "N=16384" in adv  # one panel per row


def test_files_get_the_umask_permissions(model_path: str, tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        outs = [tmp_path / "p.parquet", tmp_path / "p.png"]
        assert main(["predict", "-m", model_path, "--kernel", "matvec", "--set", "N=1024,2048", "-o", str(outs[0]),
                     "--plot", str(outs[1])]) == 0
        for p in [*outs, Path(model_path)]:
            assert oct(p.stat().st_mode & 0o777) == oct(0o644), p
    finally:
        os.umask(old)


def test_library_progress_reaches_a_listener(tmp_path: Path) -> None:
    from hybridperf.evaluation.evaluate import evaluate
    from hybridperf.learn.calibrate import calibrate_gpu
    from hybridperf.sweepfile import read_sweep

    rec = Recorder()
    data = read_sweep(SWEEP)
    with reporting(rec):
        ev = evaluate(data[data["kernel"] == "seed004-matadd"], "S2")
        calibrate_gpu(data, "titan-v", parameters=["dram_latency_cycles"])
    (methods,) = rec.named("evaluate S2: methods")
    assert methods["total"] == methods["done"] == len(ev.table)
    assert rec.named("held-out fits") and all(t["done"] == t["total"] for t in rec.named("held-out fits"))
    (cal,) = rec.named("calibrate mwp-cwp")
    assert 1 <= cal["done"] <= cal["total"] == 40
    assert all(t["stopped"] for t in rec.tasks)
    with task("nobody listens", 3) as t:  # without a listener: nothing happens, nothing fails
        t.advance()
    assert list(track([1, 2], "x")) == [1, 2]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bars_only_on_a_terminal_and_not_with_quiet(model_path: str, tmp_path: Path, monkeypatch, capsys) -> None:
    argv = ["evaluate", SWEEP, "--split", "S2", "--kernel", "seed004-matadd"]
    assert main(argv) == 0
    assert capsys.readouterr().err == ""  # not a terminal: no bars
    term = _Terminal()
    monkeypatch.setattr("sys.stderr", term)
    assert main(argv) == 0
    assert "evaluate S2: methods" in term.getvalue() and "eta" in term.getvalue()
    term2 = _Terminal()
    monkeypatch.setattr("sys.stderr", term2)
    assert main([*argv, "-q"]) == 0
    assert term2.getvalue() == ""
    monkeypatch.undo()
    assert main([*argv, "-v"]) == 0  # -v: one line per finished task, on a terminal or not
    assert re.search(r"hybridperf: evaluate S2: methods: done in \d+\.\d s", capsys.readouterr().err)


def test_analyze_shows_the_varying_parameters_and_every_time_first(columns, capsys) -> None:
    """A grid over one of ten parameters: that parameter and the hierarchical roofline's time lead, the nine
    the rows share go to a note with their values."""
    assert main(["analyze", "--gpu", "rtx-2080-ti", "--kernel", "ktt-coulomb-sum-3d", "--set", "Z_ITERATIONS=32",
                 "--set", "INNER_UNROLL_FACTOR=1,0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[:3] == ["INNER_UNROLL_FACTOR", "hierarchical_ms", "mwp_cwp_ms"]
    assert lines[3].split()[0] == "1" and lines[4].split()[0] == "0"
    note = " ".join(line.strip() for line in lines if line.startswith(("every row:", "    ")))
    assert "Z_ITERATIONS=32," in note and "grid=256," in note
