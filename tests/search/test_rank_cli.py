"""`hybridperf rank`: --prune, --top-k, the --no-pareto alias, and what pruning reports (in-process)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from hybridperf.cli import main

from .conftest import DESCRIPTOR, GPU

SPACE = ["--space", "BX=4,16,64,256", "--space", "BY=1,4,16,64", "--space", "TX=1,2,4,8", "--space", "TY=1,2,4,8",
         "--space", "U=1,2,4", "--space", "V=1,2,3", "--space", "PAD=0,1"]
BASE = ["rank", "--kernel", str(DESCRIPTOR), "--gpu", GPU, "--set", "N=4096", *SPACE]


@pytest.fixture(scope="module")
def model_path(model, tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("rank-cli") / "model.json"
    model.save(path)
    return str(path)


def _json(capsys, argv) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_default_is_the_union_and_json_reports_the_pruning(model_path, capsys) -> None:
    doc = _json(capsys, [*BASE, "-m", model_path, "--top-k", "12", "--json"])
    p = doc["pruning"]
    assert p["prune"] == "union" and p["top_k"] == 12 and p["in_top_k"] == 12
    assert p["objectives"] == ["efficiency", "utilization", "time_ms"]
    assert p["pruned"] > 0 and p["best_pruned_ms"] >= doc["table"][0]["pred_ms"]
    stages = {r["stage"]: r for r in doc["counts"]}
    assert stages["pruned"]["configs"] == p["pruned"] and stages["pruned"]["best_ms"] == p["best_pruned_ms"]
    assert "on_front" in doc["table"][0] and "in_top_k" in doc["table"][0]
    assert p["contenders_dropped"] >= 0
    # 12 of ~4,000 is finer than the model's 300 training runs resolve: no chance, and the reason.
    assert p["p_fastest_kept"] is None and "finer than the model's held-out runs" in p["odds_note"]
    wide = _json(capsys, [*BASE, "-m", model_path, "--top-k", "0.05", "--top", "60", "--json"])["pruning"]
    assert 0 < wide["p_fastest_in_table"] <= wide["p_fastest_kept"] <= 1 and "held-out runs" in wide["odds_note"]


def test_prune_modes_and_alias(model_path, capsys) -> None:
    ryoo = _json(capsys, [*BASE, "-m", model_path, "--prune", "ryoo", "--json"])["pruning"]
    assert ryoo["prune"] == "ryoo" and ryoo["top_k"] is None and ryoo["in_top_k"] is None
    none = _json(capsys, [*BASE, "-m", model_path, "--prune", "none", "--top", "3", "--json"])
    alias = _json(capsys, [*BASE, "-m", model_path, "--no-pareto", "--top", "3", "--json"])
    assert none == alias and none["pruning"]["prune"] == "none" and len(none["table"]) == 3
    share = _json(capsys, [*BASE, "-m", model_path, "--top-k", "0.1", "--json"])["pruning"]
    assert share["top_k"] == share["in_top_k"] > 12


def test_table_says_how_it_pruned(model_path, capsys) -> None:
    assert main([*BASE, "-m", model_path, "--top-k", "5"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # lines are wrapped to the terminal
    assert "prune: union (Pareto front over efficiency, utilization, time_ms, plus the model's 5 fastest" in out
    assert "model top-k (k=5)" in out and "pruned" in out and "best_ms" in out
    assert "chance the fastest is kept: unknown (a shortlist of" in out
    assert main([*BASE, "-m", model_path, "--top-k", "0.05"]) == 0
    assert "chance the fastest configuration is among the" in " ".join(capsys.readouterr().out.split())
    assert main([*BASE]) == 0  # no model: the note says what was done instead
    assert "note: no model" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--top-k", "0"], "expected a whole number >= 1, got '0'"),
    (["--top-k", "1.5"], "share of the space in (0, 1)"),
    (["--top-k", "1.0"], "share of the space in (0, 1)"),
    (["--prune", "none"], "needs a model"),
])
def test_bad_options_exit_2(argv, message, capsys) -> None:
    assert main([*BASE, *argv]) == 2
    assert message in capsys.readouterr().err


def test_top_k_that_is_no_number_is_refused(capsys) -> None:
    assert main([*BASE, "--top-k", "many"]) == 2
    assert "neither a count" in capsys.readouterr().err


def test_set_fixes_a_config_parameter_and_picks_are_written(model_path, tmp_path, capsys) -> None:
    from hybridperf.search.kernel_tuner_strategy import PicksStrategy
    from hybridperf.sweepfile import read_rows, read_sweep

    space = [a for a in SPACE if a != "BX=4,16,64,256"][1:]  # every --space but BX's
    argv = ["rank", "--kernel", str(DESCRIPTOR), "--gpu", GPU, "--set", "N=4096", *space, "--set", "BX=64", "-m",
            model_path, "--top", "4"]
    assert main([*argv, "-o", str(tmp_path / "picks.csv")]) == 0
    cap = capsys.readouterr()
    assert "fixed (not searched): BX=64" in cap.out and f"wrote {tmp_path / 'picks.csv'}" in cap.err
    picks = read_rows(tmp_path / "picks.csv")  # rows to measure: what predict --rows and --candidates read
    assert len(picks) == 4 and (picks["config.BX"] == 64).all() and {"kernel", "gpu", "size.N"} <= set(picks)
    assert picks["info.rank"].tolist() == [1, 2, 3, 4] and "time_ms" not in picks
    measured = picks.assign(time_ms=picks["info.pred_ms"] * 1.2, status="ok")
    measured.to_csv(tmp_path / "measured.csv", index=False)
    # measured picks are a sweep (that train and export accept); the CLI registered the descriptor file for the
    # run, so its rows carry the descriptor's name (kernel_key), as recorded sweeps of an own kernel do
    assert (picks["kernel"] == "synthetic-10m").all()
    assert len(read_sweep(tmp_path / "measured.csv", known_kernels=["synthetic-10m"])) == 4
    assert main([*argv, "-o", str(tmp_path / "picks.json")]) == 0
    capsys.readouterr()
    strategy = PicksStrategy.from_file(tmp_path / "picks.json")
    assert [c["BX"] for c in strategy.configurations] == [64] * 4
    assert main([*argv, "-o", str(tmp_path / "picks.txt")]) == 2  # refused before ranking
    assert "name a picks file ending in .csv, .parquet, .json" in capsys.readouterr().err
    # The picks, given back as candidates, rank to the same order.
    doc = _json(capsys, ["rank", "--kernel", str(DESCRIPTOR), "--gpu", GPU, "-m", model_path, "--candidates",
                         str(tmp_path / "picks.csv"), "--no-pareto", "--top", "4", "--json"])
    assert [r["pred_ms"] for r in doc["table"]] == pytest.approx(picks["info.pred_ms"].tolist())


def test_suggest_takes_a_recorded_sweep_of_several_gpus_as_candidates(tmp_path, capsys) -> None:
    from hybridperf.datasets import load_dataset

    sweep = load_dataset("kt-dedispersion")  # two GPUs
    sweep.iloc[::50].to_csv(tmp_path / "recorded.csv", index=False)
    doc = _json(capsys, ["suggest", "--kernel", "kt-dedispersion", "--gpu", "rtx-a4000", "--candidates",
                         str(tmp_path / "recorded.csv"), "--prior", "analytical", "--batch", "3", "--start", "3",
                         "--json"])
    assert len(doc["batch"]) == 3 and all(r["gpu"] == "rtx-a4000" for r in doc["batch"])
    ranked = _json(capsys, ["rank", "--kernel", "kt-dedispersion", "--gpu", "rtx-a4000", "--candidates",
                            str(tmp_path / "recorded.csv"), "--json"])
    distinct = sweep.iloc[::50][[c for c in sweep.columns if c.startswith("config.")]].drop_duplicates()
    assert {r["stage"]: r["configs"] for r in ranked["counts"]}["space"] == doc["n_candidates"] == len(distinct)


def test_dask_addresses(capsys) -> None:
    from hybridperf.errors import UsageError
    from hybridperf.search.cluster import dask_client, parse_dask_address

    assert parse_dask_address("local") == ("local", None) and parse_dask_address("local:3") == ("local", 3)
    assert parse_dask_address("tcp://10.0.0.1:8786") == ("tcp://10.0.0.1:8786", None)
    for bad in ("local:x", "local:0", " "):
        with pytest.raises(UsageError, match="--dask"):
            parse_dask_address(bad)
    pytest.importorskip("distributed")
    with pytest.raises(UsageError, match=r"cannot reach a Dask scheduler .*check the address"):
        with dask_client("tcp://127.0.0.1:9", timeout_s=1):
            pass
    assert main([*BASE, "--dask", "tcp://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert "cannot reach a Dask scheduler" in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
@pytest.mark.parametrize("prune", [["--top-k", "9"], ["--no-pareto"]])
def test_dask_local_cluster_gives_the_serial_result(model_path, capsys, prune) -> None:
    pytest.importorskip("distributed")
    argv = [*BASE, "-m", model_path, *prune, "--json", "--chunk-rows", "500"]
    serial = _json(capsys, argv)
    local = _json(capsys, [*argv, "--dask", "local:2"])
    threads = _json(capsys, [*argv, "--jobs", "2"])
    assert serial == local == threads


def test_no_odds_skips_the_contenders(model_path, capsys) -> None:
    from hybridperf.search.rank import ODDS_MAX_CONFIGS

    on = _json(capsys, [*BASE, "-m", model_path, "--no-pareto", "--top", "3", "--json"])
    off = _json(capsys, [*BASE, "-m", model_path, "--no-pareto", "--top", "3", "--no-odds", "--json"])
    assert [r["index"] for r in on["table"]] == [r["index"] for r in off["table"]]
    assert on["pruning"]["odds_computed"] and not off["pruning"]["odds_computed"]
    assert off["pruning"]["p_fastest_kept"] is None and off["pruning"]["contenders_dropped"] is None
    forced = _json(capsys, [*BASE, "-m", model_path, "--no-pareto", "--top", "3", "--odds", "--json"])
    assert forced["pruning"] == on["pruning"]  # a small space: the odds are computed by default
    assert main([*BASE, "-m", model_path, "--no-pareto", "--top", "3", "--no-odds"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "chance the fastest is kept: unknown" in out and "could be the fastest" not in out
    assert main(["rank", "--help"]) == 0
    assert f"{ODDS_MAX_CONFIGS:,}" in " ".join(capsys.readouterr().out.split())  # the help names the real threshold


def test_table_leads_with_the_time_it_is_ordered_by(model_path, capsys, monkeypatch) -> None:
    """Rank, then the predicted time and interval (or without a model the hierarchical roofline's), then the
    searched parameters; a parameter fixed by --set is in the note, not a column."""
    monkeypatch.setenv("COLUMNS", "100")
    assert BASE[-2:] == ["--space", "PAD=0,1"]
    base = BASE[:-2]  # PAD fixed below instead of searched
    for argv, first in (([*base, "-m", model_path], ["rank", "pred_ms", "pred_lo_ms", "pred_hi_ms"]),
                        ([*base], ["rank", "hierarchical_ms"])):
        assert main([*argv, "--set", "PAD=1"]) == 0
        lines = capsys.readouterr().out.splitlines()
        header = next(line.split() for line in lines if line.startswith("rank "))
        assert header[:len(first)] == first and "PAD" not in header and "BX" in header
        assert any(line.startswith("fixed (not searched): ") and "PAD=1" in line for line in lines)


def test_a_model_trained_on_rows_naming_the_descriptor_file_knows_it_by_path_and_by_name(model_path, capsys) -> None:
    """The fixture's training rows name the kernel by its file's path; the command line registers a --kernel
    path under the descriptor's name. Both must reach the model's training, not a 'kernel never trained'."""
    table = _json(capsys, [*BASE, "-m", model_path, "--top-k", "0.05", "--top", "5", "--json"])["table"]
    assert not any(r["out_of_domain"] for r in table) and all(np.isfinite(r["pred_hi_ms"]) for r in table)
    config = ["--set", "BX=16", "--set", "BY=4", "--set", "TX=2", "--set", "TY=2", "--set", "U=2", "--set", "V=1",
              "--set", "PAD=0"]
    for kernel in (str(DESCRIPTOR), DESCRIPTOR.stem):
        rows = _json(capsys, ["predict", "-m", model_path, "--kernel", kernel, "--gpu", GPU, "--set", "N=4096",
                              *config, "--json"])["rows"]
        assert len(rows) == 1 and not rows[0]["out_of_domain"] and np.isfinite(rows[0]["pred_hi_ms"])
