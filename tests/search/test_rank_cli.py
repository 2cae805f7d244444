"""`hybridperf rank`: --prune, --top-k, the --no-pareto alias, and what pruning reports (in-process)."""
from __future__ import annotations

import json

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
    assert 0 < p["p_fastest_in_table"] <= p["p_fastest_kept"] <= 1 and p["contenders_dropped"] >= 0


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
    assert "chance the fastest configuration is among the" in out
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
