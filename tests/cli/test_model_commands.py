"""train / predict / evaluate / calibrate / advise, run in-process."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from hybridperf.cli import main
from tests.paths import GPA_FIXTURES, TITANV_SWEEP

SWEEP = str(TITANV_SWEEP)


@pytest.fixture(scope="module")
def model_path(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("cli") / "model.json")
    assert main(["train", SWEEP, "-o", path, "--quiet"]) == 0
    return path


def test_train_writes_model_and_reports(model_path: str, capsys) -> None:
    doc = json.loads(Path(model_path).read_text())
    assert "train" in doc["body"]["metadata"]["command"]


def test_predict_table_json_csv(model_path: str, capsys) -> None:
    assert main(["predict", "-m", model_path, "--kernel", "matvec", "--set", "N=2048,65536", "--wide"]) == 0
    out = capsys.readouterr().out
    assert "pred_ms" in out and "outside the trained range" in out
    assert "BLOCK=256 (default)" in out  # the descriptor default the prediction used, above the table (one value)
    assert "90% conformal interval" in out
    assert main(["predict", "-m", model_path, "--kernel", "matvec", "--set", "N=2048", "--coverage", "0.995"]) == 0
    assert "99.5% conformal interval" in capsys.readouterr().out  # not rounded to "100%"
    # An infeasible row (9410 is no multiple of the tile) has no time; the table says so and where to see why.
    assert main(["predict", "-m", model_path, "--kernel", "tiled-matmul", "--set", "TILE=16", "--set",
                 "N=8192,9410"]) == 0
    assert "1 row(s) infeasible (no time)" in capsys.readouterr().out
    assert main(["predict", "-m", model_path, "--kernel", "matvec", "--set", "N=2048", "--set", "BLOCK=128,256"]) == 0
    out = capsys.readouterr().out  # a parameter that varies keeps its column; the fixed ones are listed above
    assert "for kernel=seed004-matvec, gpu=titan-v, N=2048" in out and "BLOCK" in out.split("pred_ms")[0]
    assert main(["predict", "-m", model_path, "--kernel", "matvec", "--set", "N=2048", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = doc["rows"]
    assert rows[0]["pred_ms"] > 0 and rows[0]["pred_lo_ms"] < rows[0]["pred_ms"] < rows[0]["pred_hi_ms"]
    assert doc["defaults"] == {"BLOCK": 256} and rows[0]["config.BLOCK"] == 256 and "time_ms" not in rows[0]
    assert main(["predict", "-m", model_path, "--kernel", "dot", "--set", "N=1e9", "--csv"]) == 0
    assert capsys.readouterr().out.startswith("kernel,gpu,size.N")


def test_predict_rows_file(model_path: str, tmp_path: Path, capsys) -> None:
    rows = tmp_path / "rows.csv"
    rows.write_text("kernel,gpu,size.N,time_ms\nseed004-vecadd,titan-v,5e7,3.25\nseed004-matadd,titan-v,30000,\n")
    assert main(["predict", "-m", model_path, "--rows", str(rows), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["rows"]
    assert len(out) == 2
    # the measured time keeps its name, the prediction has its own
    assert out[0]["time_ms"] == 3.25 and out[1]["time_ms"] is None and all(r["pred_ms"] > 0 for r in out)


@pytest.mark.parametrize("text, message", [
    ("kernel,gpu,config.BLOCK\nseed004-matvec,titan-v,64\n", "no column size.N (a size of seed004-matvec)"),
    ("kernel,gpu,N,BLOCK\nseed004-matvec,titan-v,16384,64\nseed004-matvec,titan-v,32768,64\n",
     "column 'N' needs its prefix: size.N"),
    ("kernel,gpu,size.N,config.BLOK\nseed004-matvec,titan-v,16384,64\n", "column 'config.BLOK' is no parameter of "
     "seed004-matvec (did you mean config.BLOCK?)"),
    ("kernel,gpu,size.N,config.BLOCK\nseed004-matvec,titan-v,4096.5,256\n", "N is not a whole number"),
    ("kernel,gpu,size.N,config.block\nseed004-matvec,titan-v,4096,64\n", "(did you mean config.BLOCK?)"),
])
def test_predict_rows_refuses_what_it_would_guess(model_path: str, tmp_path: Path, capsys, text: str,
                                                  message: str) -> None:
    """A size left out, a parameter without its prefix or misspelt, a fractional size: one line, exit 2 (each was
    predicted before, with the descriptor's default in place of what the user meant, or ended in a traceback)."""
    rows = tmp_path / "rows.csv"
    rows.write_text(text)
    assert main(["predict", "-m", model_path, "--rows", str(rows)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_predict_rows_resolve_aliases_and_refuse_other_inputs(model_path: str, tmp_path: Path, capsys) -> None:
    """Aliases in a file of rows name what --kernel and --gpu would (a 'matvec' row was a kernel never trained);
    --rows with --kernel or --set is refused, as is --plot over several kernels, before any output is written."""
    alias, canonical = tmp_path / "alias.csv", tmp_path / "canonical.csv"
    alias.write_text("kernel,gpu,size.N,config.BLOCK\nmatvec,titanv,4096,256\n")
    canonical.write_text("kernel,gpu,size.N,config.BLOCK\nseed004-matvec,titan-v,4096,256\n")
    docs = []
    for path in (alias, canonical):
        assert main(["predict", "-m", model_path, "--rows", str(path), "--json"]) == 0
        docs.append(json.loads(capsys.readouterr().out)["rows"][0])
    assert docs[0] == docs[1] and "never trained" not in docs[0]["ood_reason"]
    assert main(["predict", "-m", model_path, "--rows", str(canonical), "--kernel", "matvec", "--set", "N=2"]) == 2
    assert "drop --kernel, --set, or drop --rows" in capsys.readouterr().err
    two = tmp_path / "two.csv"
    two.write_text("kernel,gpu,size.N\nseed004-vecadd,titan-v,5e7\nseed004-matadd,titan-v,30000\n")
    out = tmp_path / "out.csv"
    plot = str(tmp_path / "p.png")
    assert main(["predict", "-m", model_path, "--rows", str(two), "--plot", plot, "-o", str(out)]) == 2
    assert "--plot draws one kernel on one GPU; the rows hold 2 (kernel, GPU) pairs" in capsys.readouterr().err
    assert not out.exists()
    # A kernel the model never trained keeps its importer's defaults for the sizes its rows do not give (a Kernel
    # Tuner cache records none): the shipped dedispersion sweep has no size.channels, and predicts.
    from hybridperf.datasets import load_dataset

    kt = tmp_path / "kt.parquet"
    load_dataset("kt-dedispersion").head(3).to_parquet(kt)
    assert main(["predict", "-m", model_path, "--rows", str(kt), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert len(rows) == 3 and all("never trained" in r["ood_reason"] for r in rows)


def test_predict_rows_of_two_kernels_in_one_file(model_path: str, tmp_path: Path, capsys) -> None:
    """Rows of kernels with other parameters share a file, each leaving the others' columns empty (refused as 'nan'
    in a column before); an empty config cell of a row's own kernel takes the default and says so where the model
    trained on given values (the shipped model's H200 matvec runs set BLOCK; the TITAN V runs do not); an empty
    size cell of its own is still refused (--strict) or dropped."""
    from tests.paths import REPO

    default_model = str(REPO / "models" / "default.json")
    mixed = tmp_path / "mixed.csv"
    mixed.write_text("kernel,gpu,size.N,config.BLOCK,config.TILE\n"
                     "seed004-matvec,h200,4096,256,\nseed002-tiled-matmul,h200,2048,,16\n"
                     "seed004-matvec,h200,8192,,\n")
    assert main(["predict", "-m", default_model, "--rows", str(mixed), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [r["kernel"] for r in rows] == ["seed004-matvec", "seed002-tiled-matmul", "seed004-matvec"]
    assert all(r["pred_ms"] > 0 for r in rows)
    assert "defaulted" not in rows[0]["ood_reason"] and "config BLOCK defaulted" in rows[2]["ood_reason"]
    mixed.write_text("kernel,gpu,size.N,config.BLOCK\nseed004-matvec,titan-v,4096,256\nseed004-matvec,titan-v,,256\n")
    assert main(["predict", "-m", model_path, "--rows", str(mixed), "--strict"]) == 2
    assert "size.N (a size of seed004-matvec) is empty in data row 2" in capsys.readouterr().err
    mixed.write_text("kernel,gpu,size.N,config.BLOCK\nseed004-matvec,titan-v,4096,inf\n")
    assert main(["predict", "-m", model_path, "--rows", str(mixed)]) == 2
    assert "column 'config.BLOCK' has 'inf' in data row 1" in capsys.readouterr().err


def test_evaluate_side_by_side(capsys) -> None:
    assert main(["evaluate", SWEEP, "--split", "S2", "--kernel", "seed004-matadd", "--json"]) == 0
    table = json.loads(capsys.readouterr().out)["table"]
    methods = [r["method"] for r in table]
    assert any(m.startswith("hybrid") for m in methods) and "boosting" in methods
    assert any(m.startswith("calibrated:") for m in methods) and any(m.startswith("analytical:") for m in methods)


def test_calibrate_writes_loadable_spec(tmp_path: Path, capsys) -> None:
    out = tmp_path / "tv.toml"
    assert main(["calibrate", SWEEP, "--gpu", "titan-v", "--model", "mwp-cwp", "--param", "dram_latency_cycles",
                 "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "log RMSE" in text
    assert main(["analyze", "--gpu", str(out), "--kernel", "matvec", "--set", "N=4096", "--json"]) == 0


def test_advise_and_chart(tmp_path: Path, capsys) -> None:
    png = tmp_path / "chart.png"
    assert main(["advise", "--gpu", "a100", "--kernel", "matvec", "--set", "N=1024,16384", "--chart", str(png)]) == 0
    out = capsys.readouterr().out
    assert "b_memlp" in out and "memory-bound" in out and "bottleneck across the rows" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("argv, message", [
    (["predict", "-m", "missing.json", "--set", "N=1"], "no such file"),
    (["train", "nope.csv", "-o", "x.json"], "nope.csv"),
    (["evaluate", SWEEP, "--split", "S3", "--holdout", "nokernel"], "S3 needs --holdout"),
    (["calibrate", SWEEP, "--gpu", "a100"], "need at least 2 ok runs"),
])
def test_errors_exit_2(argv, message, capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_advise_with_gpa_samples(capsys) -> None:
    samples = GPA_FIXTURES / "loop" / "samples.csv"
    assert main(["advise", "--gpu", "v100", "--kernel", "matvec", "--set", "N=4096", "--samples", str(samples)]) == 0
    out = capsys.readouterr().out
    assert "GPA" in out and "Loop Unrolling" in out and "estimated speedup" in out
    assert main(["advise", "--gpu", "v100", "--kernel", "matvec", "--set", "N=4096", "--samples", str(samples),
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["gpa"] and doc["gpuperf"]


def test_rank_and_suggest(model_path: str, tmp_path: Path, capsys) -> None:
    assert main(["rank", "--kernel", "tiled-matmul", "--gpu", "gtx280", "--set", "N=2048"]) == 0
    out = capsys.readouterr().out
    assert "Pareto survivors" in out and "infeasible" in out  # TILE=32 exceeds 512 threads per block on cc 1.3
    # Without a model nothing has an interval or a model's top-k: no column says "no" of every row, the note says why.
    header = next(line for line in out.splitlines() if line.startswith("rank "))
    assert "hierarchical_ms" in header and not {"tie_with_best", "in_top_k", "out_of_domain"} & set(header.split())
    assert "no model: ordered by the hierarchical roofline's time" in out and "tie_with_best:" not in out
    assert out.startswith("problem: N=2048\n")  # the size ranked for; one left to its default says so
    assert main(["rank", "--kernel", "matvec", "--gpu", "titan-v"]) == 0
    assert capsys.readouterr().out.startswith("problem: N=4096 (default)\n")
    cands = tmp_path / "cands.csv"  # sizes from the candidates' rows are no default
    cands.write_text("kernel,gpu,size.N,config.BLOCK\nseed004-matvec,titan-v,8192,64\nseed004-matvec,titan-v,8192,128\n")
    assert main(["rank", "--kernel", "matvec", "--gpu", "titan-v", "--candidates", str(cands), "--prune", "ryoo"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("problem: N=8192\n") and "ordered by Ryoo's efficiency, then utilization" in out
    assert main(["rank", "-m", model_path, "--kernel", "matvec", "--gpu", "titan-v", "--set", "N=4096",
                 "--no-pareto", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["table"]) == 6 and doc["table"][0]["pred_ms"] <= doc["table"][-1]["pred_ms"]
    measured = tmp_path / "measured.csv"
    measured.write_text("kernel,gpu,size.N,config.BLOCK,time_ms,status,reason\nseed004-matvec,titan-v,4096,256,21.0,ok,\n")
    assert main(["suggest", "-m", model_path, "--kernel", "matvec", "--gpu", "titan-v", "--set", "N=4096",
                 "--measured", str(measured), "--batch", "2", "--start", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["batch"]) == 2 and all(r["config.BLOCK"] != 256 for r in doc["batch"])
    assert main(["rank", "--kernel", "matvec", "--gpu", "titan-v", "--set", "N=1,2"]) == 2


def test_train_weighting_is_recorded_and_checked(model_path: str, tmp_path, capsys) -> None:
    """The default weights runs by throughput; --weighting uniform is recorded as such; a bad value is one line."""
    params = lambda p: json.loads(Path(p).read_text())["body"]["estimator"]["params"]  # noqa: E731
    assert params(model_path)["weighting"] == "throughput"
    path = str(tmp_path / "uniform.json")
    capsys.readouterr()
    assert main(["train", SWEEP, "-o", path, "--weighting", "uniform"]) == 0
    assert params(path)["weighting"] == "uniform" and "weighted" not in capsys.readouterr().out
    assert main(["train", SWEEP, "-o", path]) == 0
    assert "runs weighted by throughput" in capsys.readouterr().out
    assert main(["train", SWEEP, "-o", str(tmp_path / "x.json"), "--weighting", "fast"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'fast'" in err and err.count("\n") == 1 and not (tmp_path / "x.json").exists()


def test_analyze_names_the_baseline_a_gpu_without_runs_is_predicted_from(model_path: str, capsys) -> None:
    from hybridperf.learn.model import load_model

    own = load_model(model_path).features.baselines_["seed004-matvec"]
    assert own != "hierarchical"  # the case this checks: a kernel whose own baseline is another model
    args = ["analyze", "-m", model_path, "--kernel", "matvec", "--set", "N=4096", "--gpu"]
    assert main([*args, "titan-v"]) == 0  # the GPU it was trained on
    captured = capsys.readouterr()
    assert f"corrects the {own} time for seed004-matvec" in " ".join((captured.out + captured.err).split())
    assert main([*args, "h100-sxm"]) == 0  # no runs there: the transfer fit, from the hierarchical roofline
    captured = capsys.readouterr()
    assert (f"has no runs of seed004-matvec on h100-sxm, so it corrects the hierarchical time (the {own} time on "
            "the GPUs it trained seed004-matvec on)") in " ".join((captured.out + captured.err).split())


def test_a_plot_it_cannot_draw_leaves_the_output_file_alone(model_path: str, tmp_path: Path, capsys) -> None:
    """The -o file was replaced before --plot found no range of a parameter to draw."""
    out = tmp_path / "keep.csv"
    out.write_text("precious")
    assert main(["predict", "-m", model_path, "--kernel", "matvec", "--set", "N=2048", "-o", str(out),
                 "--plot", str(tmp_path / "p.png")]) == 2
    assert "needs a range of one parameter" in capsys.readouterr().err
    assert out.read_text() == "precious" and not (tmp_path / "p.png").exists()


def test_train_names_the_two_files_that_hold_one_configuration(tmp_path: Path, capsys) -> None:
    """One row per configuration: the same runs in two files are refused naming both files (the joined table's row
    numbers said nothing of where they came from), before any model file is written."""
    import pandas as pd

    rows = pd.read_csv(SWEEP)
    a, b, out = tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "m.json"
    rows.iloc[:40].to_csv(a, index=False)
    rows.iloc[30:60].to_csv(b, index=False)
    assert main(["train", str(a), str(b), "-o", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{a} and {b} hold the same configuration" in err and "10 configurations" in err and not out.exists()
    rows.iloc[40:60].to_csv(b, index=False)  # apart: trains
    assert main(["train", str(a), str(b), "-o", str(out), "--quiet"]) == 0
