"""docs/own-kernel.md: every command and the Python block run, in order, on the Kernel Tuner hub caches it names."""
from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import shutil
from pathlib import Path

import pandas as pd
import pytest

from hybridperf.cli import main
from hybridperf.kernel import unregister_kernel
from tests.paths import raw

DOC = Path(__file__).resolve().parents[2] / "docs" / "own-kernel.md"


def steps(text: str) -> list[tuple[str, str]]:
    """The doc's runnable blocks in order: ('bash', command line) for each `hybridperf` line (an env
    assignment may lead), ('toml', text) for the descriptor, ('python', code)."""
    out: list[tuple[str, str]] = []
    for lang, body in re.findall(r"```(bash|toml|python)\n(.*?)```", text, flags=re.S):
        if lang != "bash":
            out.append((lang, body))
            continue
        joined = re.sub(r"\\\n\s*", " ", body)
        out += [("bash", line.strip()) for line in joined.splitlines() if "hybridperf " in line]
    return out


def run(line: str, monkeypatch) -> str:
    words = shlex.split(line)
    with monkeypatch.context() as m:
        while "=" in words[0]:
            key, _, value = words.pop(0).partition("=")
            m.setenv(key, value)
        assert words[0] == "hybridperf"
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(words[1:])
    assert code == 0, line
    return out.getvalue()


def test_the_doc_covers_each_step() -> None:
    kinds = [k for k, _ in steps(DOC.read_text())]
    lines = [t for k, t in steps(DOC.read_text()) if k == "bash"]
    assert kinds.count("toml") == 1 and kinds.count("python") == 1
    for word in ("import", "kernels new", "kernels check", "train", "predict", "evaluate", "rank"):
        assert any(f"hybridperf {word}" in line for line in lines), word


@pytest.mark.slow
def test_every_step_runs(tmp_path, monkeypatch) -> None:
    for gpu in ("A4000", "A100"):
        shutil.copy(raw("kt-benchmark-hub", "cachefiles", "convolution_milo", f"{gpu}.json.gz"), tmp_path)
    monkeypatch.chdir(tmp_path)
    outputs = {}
    try:
        for kind, body in steps(DOC.read_text()):
            if kind == "toml":
                scaffold = (tmp_path / "my-conv2d.toml").read_text()
                assert "block_size_x = { values = [16, 32, 48" in scaffold  # written from the runs
                (tmp_path / "my-conv2d.toml").write_text(body)
            elif kind == "python":
                out = io.StringIO()
                with contextlib.redirect_stdout(out):
                    exec(compile(body, str(DOC), "exec"), {})  # noqa: S102 - the doc's own example
                outputs["python"] = out.getvalue()
            else:
                outputs[body.split()[1] if not body.startswith("HYBRID") else "train-both"] = run(body, monkeypatch)
    finally:
        unregister_kernel("my-conv2d")
    assert "8,724 runs compared" in outputs["kernels"]
    assert "wrote conv-a4000.json" in outputs["train"]
    doc = json.loads((tmp_path / "conv-a4000.json").read_text())
    assert "my-conv2d" in doc["body"]["features"]["descriptors_"]
    assert "size 2x beyond the trained range" in outputs["predict"]
    assert "split S4" in outputs["evaluate"]
    assert re.search(r"\n\s+1\s+32\s+4\s+1\s+3\s+1\s+0\s+1\s", outputs["rank"])  # the measured fastest A100 config
    assert "time_ms" in outputs["python"]
    assert pd.read_parquet(tmp_path / "a100.parquet")["kernel"].eq("my-conv2d").all()
