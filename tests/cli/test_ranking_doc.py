"""docs/ranking.md: every documented `hybridperf suggest/replay` command runs, and every option is documented."""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pandas as pd
import pytest

from hybridperf.cli import COMMON_OPTIONS, build_parser, main
from hybridperf.datasets import load_dataset
from hybridperf.learn.model import train_model
from hybridperf.sweepfile import write_sweep

DOC = Path(__file__).resolve().parents[2] / "docs" / "ranking.md"
SPACE = {"block_size_x": [16, 32, 64, 128], "block_size_y": [1, 2, 4, 8], "tile_size_x": [1, 2, 4],
         "tile_size_y": [1, 2, 4]}


def documented_commands(text: str) -> list[str]:
    """The `hybridperf ...` command lines of the fenced bash blocks (backslash continuations joined)."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        out += [line.strip() for line in joined.splitlines() if line.strip().startswith("hybridperf ")]
    return out


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """The files the documented commands name, made from the shipped Kernel Tuner convolution sweep."""
    d = tmp_path_factory.mktemp("ranking-doc")
    conv = load_dataset("kt-convolution")
    in_space = pd.concat([conv[f"config.{k}"].isin(v) for k, v in SPACE.items()], axis=1).all(axis=1)
    here = conv[(conv["gpu"] == "rtx-a4000") & in_space]
    write_sweep(conv[conv["gpu"] != "rtx-a4000"].sample(1500, random_state=0), d / "old-gpus.csv")
    write_sweep(pd.concat([here[here["status"] == "ok"].head(5), here[here["status"] != "ok"].head(1)]),
                d / "runs.csv")
    here.drop(columns=[c for c in here.columns if not c.startswith(("kernel", "gpu", "size.", "config."))]) \
        .head(200).to_csv(d / "candidates.csv", index=False)
    train_model(conv[conv["status"] == "ok"].sample(300, random_state=0),
                booster_params={"n_estimators": 20, "n_jobs": 1}, coverage=None).save(d / "model.json")
    return d


def test_the_doc_names_the_commands() -> None:
    cmds = documented_commands(DOC.read_text())
    assert sum(c.startswith("hybridperf suggest") for c in cmds) >= 3
    assert sum(c.startswith("hybridperf replay") for c in cmds) >= 4


@pytest.mark.slow
def test_every_documented_command_runs(workdir: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(workdir)
    for cmd in documented_commands(DOC.read_text()):
        assert main(shlex.split(cmd)[1:]) == 0, cmd
        out = capsys.readouterr().out
        if "--json" in cmd and "-o" not in cmd.split():
            json.loads(out)
    batch = json.loads((workdir / "batch.json").read_text())
    assert batch["configurations"] and batch["tune_params_keys"][0] == "block_size_x"
    steps = pd.read_csv(workdir / "trajectory.csv")
    assert set(steps["seed"]) == {10, 11} and set(steps["strategy"]) == {"model"}
    assert json.loads((workdir / "trajectory.json").read_text())["steps"]


def test_every_option_of_suggest_and_replay_is_documented() -> None:
    text = DOC.read_text()
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name in ("suggest", "replay"):
        for action in sub.choices[name]._actions:
            for opt in action.option_strings:
                if opt not in COMMON_OPTIONS:
                    assert f"`{opt}" in text or f" {opt}" in text, f"{name} {opt} is not in docs/ranking.md"
