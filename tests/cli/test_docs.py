"""Docs that cannot drift: every `hybridperf ...` line of README.md and docs/*.md runs, and every --help example parses.

A command line is a line of a fenced ``sh``/``bash``/``shell``/``console`` block that starts with ``hybridperf ``
(backslash continuations joined, ``# comments`` dropped). A line whose comment says ``needs-gpu`` is only
parsed (it needs CuPy and an NVIDIA GPU); every other line runs, in order, in one folder per document,
where the files the document uses but does not make are laid out first (:data:`SETUPS`).
"""
from __future__ import annotations

import gzip
import json
import re
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from hybridperf.cli import COMMON_OPTIONS, build_parser, main
from hybridperf.datasets import load_dataset
from hybridperf.importers import export_kernel_tuner
from hybridperf.learn.model import train_model
from hybridperf.sweepfile import write_sweep
from tests.paths import GPA_FIXTURES, SWEEP_FIXTURES, raw

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELLS = ("sh", "bash", "shell", "console")
GPU_MARK = "needs-gpu"


@dataclass(frozen=True)
class DocCommand:
    doc: str
    line: int
    argv: tuple[str, ...]
    needs_gpu: bool

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}: hybridperf {shlex.join(self.argv)}"


def doc_commands(path: Path) -> list[DocCommand]:
    """The `hybridperf` command lines of a Markdown file's shell blocks, with their line numbers."""
    text = path.read_text()
    out = []
    for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, flags=re.S | re.M):
        if m.group(1) not in SHELLS:
            continue
        first = text.count("\n", 0, m.start(2)) + 1
        lines = m.group(2).split("\n")
        i = 0
        while i < len(lines):
            start, line = i, lines[i]
            while line.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line.rstrip()[:-1] + " " + lines[i].strip()
            i += 1
            words = line.strip().removeprefix("$ ")
            if not words.startswith("hybridperf "):
                continue
            code, _, comment = words.partition(" #")
            out.append(DocCommand(path.name, first + start, tuple(shlex.split(code)[1:]), GPU_MARK in comment))
    return out


ALL = [c for d in DOCS for c in doc_commands(d)]


# -- what each document's commands need that they do not make themselves ----------------------------------

CONV_SPACE = {"block_size_x": [16, 32, 64, 128], "block_size_y": [1, 2, 4, 8], "tile_size_x": [1, 2, 4],
              "tile_size_y": [1, 2, 4]}


def _readme(d: Path) -> None:
    shutil.copy(SWEEP_FIXTURES / "kt_convolution_a100.json", d / "cache.json")
    shutil.copy(GPA_FIXTURES / "loop" / "samples.csv", d / "sass_samples.csv")


def _conv_a4000() -> pd.DataFrame:
    conv = load_dataset("kt-convolution")
    return conv[conv["gpu"] == "rtx-a4000"]


def _ranking(d: Path) -> None:
    """The files docs/ranking.md names, made from the shipped Kernel Tuner convolution sweep."""
    conv = load_dataset("kt-convolution")
    in_space = pd.concat([conv[f"config.{k}"].isin(v) for k, v in CONV_SPACE.items()], axis=1).all(axis=1)
    here = conv[(conv["gpu"] == "rtx-a4000") & in_space]
    write_sweep(conv[conv["gpu"] != "rtx-a4000"].sample(1500, random_state=0), d / "old-gpus.csv")
    write_sweep(pd.concat([here[here["status"] == "ok"].head(5), here[here["status"] != "ok"].head(1)]),
                d / "runs.csv")
    here.drop(columns=[c for c in here.columns if not c.startswith(("kernel", "gpu", "size.", "config."))]) \
        .head(200).to_csv(d / "candidates.csv", index=False)
    train_model(conv[conv["status"] == "ok"].sample(300, random_state=0),
                booster_params={"n_estimators": 20, "n_jobs": 1}, coverage=None).save(d / "model.json")


def _interop(d: Path) -> None:
    """docs/kernel-tuner-interop.md: a 12-entry cache standing in for a partial tuning run, the other GPUs'
    runs, and the recorded space."""
    conv = load_dataset("kt-convolution")
    here = _conv_a4000()
    export_kernel_tuner(here[here["status"] == "ok"].head(12), d / "partial-cache.json")
    write_sweep(conv[conv["gpu"] != "rtx-a4000"].sample(1500, random_state=0), d / "old-gpus.parquet")
    here[[c for c in here.columns if c.startswith(("kernel", "gpu", "size.", "config."))]].head(300) \
        .to_csv(d / "space.csv", index=False)


def _own_kernel(d: Path) -> None:
    """docs/own-kernel.md: the benchmark hub's convolution caches it imports, and the finished descriptor it
    shows (the page's toml block; the user writes it from the template `kernels new` makes)."""
    for gpu in ("A4000", "A100"):  # every 8th configuration of the hub's caches: the same commands, an eighth
        # of the training time (the suite's slowest test otherwise)
        doc = json.loads(gzip.decompress(raw("kt-benchmark-hub", "cachefiles", "convolution_milo",
                                             f"{gpu}.json.gz").read_bytes()))
        doc["cache"] = {k: v for i, (k, v) in enumerate(doc["cache"].items()) if i % 8 == 0}
        (d / f"{gpu}.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    toml = re.search(r"```toml\n(.*?)```", (ROOT / "docs" / "own-kernel.md").read_text(), flags=re.S).group(1)
    (d / "my-conv2d.toml").write_text(toml)


SETUPS: dict[str, Callable[[Path], None]] = {"README.md": _readme, "ranking.md": _ranking,
                                             "kernel-tuner-interop.md": _interop, "own-kernel.md": _own_kernel}


def _after_ranking(d: Path) -> None:
    batch = json.loads((d / "batch.json").read_text())
    assert batch["configurations"] and batch["tune_params_keys"][0] == "block_size_x"
    steps = pd.read_csv(d / "trajectory.csv")
    assert set(steps["seed"]) == {10, 11} and set(steps["strategy"]) == {"model"}
    assert json.loads((d / "trajectory.json").read_text())["steps"]


def _after_readme(d: Path) -> None:
    assert pd.read_parquet(d / "matvec.parquet")["pred_ms"].gt(0).all()
    assert json.loads((d / "replay.json").read_text())["cache"]
    for png in ("matvec.png", "s2.png", "front.png", "benefits.png"):
        assert (d / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png


def _after_own_kernel(d: Path) -> None:
    """The template parsed from the runs; the models keep the descriptor; the imported rows carry its name;
    the page's Python block runs."""
    from hybridperf.kernel import unregister_kernel

    assert "block_size_x = { values = [16, 32, 48" in (d / "my-conv2d.template.toml").read_text()
    for model in ("conv-a4000.json", "conv.json"):
        assert "my-conv2d" in json.loads((d / model).read_text())["body"]["features"]["descriptors_"]
    assert pd.read_parquet(d / "a100.parquet")["kernel"].eq("my-conv2d").all()
    code = re.search(r"```python\n(.*?)```", (ROOT / "docs" / "own-kernel.md").read_text(), flags=re.S).group(1)
    try:
        exec(compile(code, "docs/own-kernel.md", "exec"), {})  # the page's own example
    finally:
        unregister_kernel("my-conv2d")


AFTER: dict[str, Callable[[Path], None]] = {"ranking.md": _after_ranking, "README.md": _after_readme,
                                            "own-kernel.md": _after_own_kernel}


# -- the tests ---------------------------------------------------------------------------------------------

def test_the_docs_have_commands() -> None:
    docs = {c.doc for c in ALL}
    assert {"README.md", "ranking.md", "record.md", "kernel-tuner-interop.md"} <= docs
    assert len(ALL) >= 30 and sum(c.needs_gpu for c in ALL) >= 2
    assert sum(c.argv[0] == "suggest" for c in ALL if c.doc == "ranking.md") >= 3


_FILE = re.compile(r"\.(json|json\.gz|csv|csv\.gz|parquet|toml|zip|db)$")


def _parses(argv: list[str], folder: Path) -> None:
    """Parse ``argv`` in ``folder``, where every file name it mentions exists (the argument types check inputs:
    a descriptor named by --kernel is read, so .toml files hold a valid one)."""
    from hybridperf.kernel import load_kernel
    from hybridperf.registry import registration_scope

    for word in argv:
        for name in word.split("="):
            if _FILE.search(name) and "/" not in name:
                text = Path(load_kernel("seed004-matvec").path).read_text() if name.endswith(".toml") else "{}\n"
                (folder / name).write_text(text)
    with registration_scope():
        build_parser().parse_args(argv)


@pytest.mark.parametrize("cmd", ALL, ids=str)
def test_every_doc_command_parses(cmd: DocCommand, tmp_path: Path, monkeypatch) -> None:
    """Cheap and for every line, GPU-only ones included: the options exist and their values are valid."""
    monkeypatch.chdir(tmp_path)
    _parses(list(cmd.argv), tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("doc", sorted({c.doc for c in ALL if not c.needs_gpu}))
def test_every_doc_command_runs(doc: str, tmp_path: Path, monkeypatch, capsys) -> None:
    SETUPS.get(doc, lambda d: None)(tmp_path)
    monkeypatch.chdir(tmp_path)
    for cmd in [c for c in ALL if c.doc == doc and not c.needs_gpu]:
        assert main(list(cmd.argv)) == 0, f"{cmd}\n{capsys.readouterr().err[-2000:]}"
        out = capsys.readouterr().out
        if "--json" in cmd.argv and "-o" not in cmd.argv:
            json.loads(out)
    AFTER.get(doc, lambda d: None)(tmp_path)


def _subcommands() -> dict[str, object]:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return dict(sub.choices)


@pytest.mark.parametrize("name", sorted(_subcommands()))
def test_every_command_has_help_examples_that_parse(name: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    parser = _subcommands()[name]
    epilog = parser.epilog or ""
    assert epilog.startswith("examples"), f"'hybridperf {name} --help' has no examples"
    examples = [line.strip() for line in epilog.splitlines() if line.strip().startswith("hybridperf ")]
    assert examples, name
    for line in examples:
        code = line.partition(" #")[0]
        _parses(shlex.split(code)[1:], tmp_path)


def test_help_explains_the_splits() -> None:
    text = _subcommands()["evaluate"].format_help()
    for split in ("S1", "S2", "S3", "S4", "S5", "S6"):
        assert re.search(rf"\b{split}\b\s+\S", text), split
    assert "size extrapolation" in text and "zero-shot GPU" in text


def test_every_option_of_suggest_and_replay_is_documented() -> None:
    text = (ROOT / "docs" / "ranking.md").read_text()
    for name in ("suggest", "replay"):
        for action in _subcommands()[name]._actions:
            for opt in action.option_strings:
                if opt not in COMMON_OPTIONS:
                    assert f"`{opt}" in text or f" {opt}" in text, f"{name} {opt} is not in docs/ranking.md"


def test_user_docs_cite_papers_not_internal_names() -> None:
    internal = re.compile(r"\bseed 00\d\b|MODELS\.md|EVALUATION\.md|\bthe lead\b", re.IGNORECASE)
    for doc in DOCS:
        text = doc.read_text()
        if doc.name == "README.md":  # the Results section is the lead's (its rows name the data sets)
            text = re.sub(r"## Results\n.*?(?=\n## )", "", text, flags=re.S)
        hits = [m.group(0) for m in internal.finditer(text)]
        assert not hits, f"{doc.name}: {hits[:5]}"
