"""The hostile-input suite: each case exits 2 with one error line, writes nothing and stays bounded."""
from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from hybridperf.learn.model import train_model
from tests.hostile.cases import all_cases
from tests.hostile.checks import CHECKS
from tests.hostile.models import variant_names, write_variants
from tests.hostile.workspace import build
from tests.paths import REPO, TITANV_SWEEP

CASES = all_cases(variant_names())
SHARDS = 2  # one runner process per core
PEAK_BYTES = 1 << 30
MAX_SECONDS = 10.0
TABLE_ENV = "HYBRIDPERF_HOSTILE_TABLE"


def _run_shards(base: Path, model: Path) -> dict[str, tuple[dict[str, Any], Path]]:
    procs, outputs = [], []
    for shard in range(SHARDS):
        w = base / f"w{shard}"
        w.mkdir()
        build(w)
        write_variants(model, w)
        cases_file, results = base / f"cases{shard}.json", base / f"results{shard}.jsonl"
        cases_file.write_text(json.dumps(CASES[shard::SHARDS]))
        env = {**os.environ, "MALLOC_ARENA_MAX": "2", "PYTHONPATH": str(REPO)}
        env.pop("HYBRIDPERF_MODEL_KEY", None)
        procs.append(subprocess.Popen([sys.executable, "-m", "tests.hostile.runner", str(w), str(cases_file),
                                       str(results)], cwd=REPO, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT))
        outputs.append((results, w))
    logs = [p.communicate(timeout=900)[0].decode(errors="replace") for p in procs]
    found: dict[str, tuple[dict[str, Any], Path]] = {}
    for (results, w), proc, log in zip(outputs, procs, logs):
        lines = [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []
        for rec in lines:
            if "started" not in rec:
                found[rec["id"]] = (rec, w)
        started = [rec["started"] for rec in lines if "started" in rec]
        if proc.returncode != 0 and started and started[-1] not in found:
            found[started[-1]] = ({"id": started[-1], "rc": f"runner died ({proc.returncode}): {log[-500:]}"}, w)
    return found


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, tuple[dict[str, Any], Path]]:
    base = tmp_path_factory.mktemp("hostile")
    model = base / "model.json"
    train_model(pd.read_csv(TITANV_SWEEP), booster_params={"n_estimators": 60}).save(model)  # small: fast to load
    found = _run_shards(base, model)
    _write_table(found, base)
    return found


def _outcome(case: dict[str, Any], rec: dict[str, Any]) -> str:
    if case["expect"] == "ok":
        return "valid: ran, output checked" if rec.get("rc") == 0 else f"valid: FAILED ({rec.get('rc')})"
    if rec.get("rc") == 2:
        return "refused: exit 2, one error line"
    return f"NOT REFUSED CLEANLY ({str(rec.get('rc'))[:40]})"


def _write_table(found: dict[str, tuple[dict[str, Any], Path]], base: Path) -> None:
    table: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    peak, slow = 0, 0.0
    for case in CASES:
        rec = found.get(case["id"], ({"rc": "not run"}, base))[0]
        table[case["category"].split(":")[0] if case["category"].startswith("import") else case["category"]][
            _outcome(case, rec)] += 1
        peak, slow = max(peak, rec.get("peak_rss", 0)), max(slow, rec.get("seconds", 0.0))
    lines = ["| category | cases | outcomes |", "| --- | ---: | --- |"]
    for cat, counts in table.items():
        lines.append(f"| {cat} | {sum(counts.values())} | " + "; ".join(f"{k}: {v}" for k, v in counts.items()) + " |")
    lines.append(f"| all | {len(CASES)} | peak RSS {peak / 2**20:.0f} MiB, slowest case {slow:.1f} s |")
    text = "\n".join(lines) + "\n"
    (base / "table.md").write_text(text)
    if os.environ.get(TABLE_ENV):  # the table, and each case's exit code, time and peak memory beside it
        Path(os.environ[TABLE_ENV]).write_text(text)
        per_case = {c["id"]: {k: found.get(c["id"], ({}, base))[0].get(k) for k in ("rc", "seconds", "peak_rss")}
                    for c in CASES}
        Path(os.environ[TABLE_ENV] + ".json").write_text(json.dumps(per_case, indent=1))


def test_enough_cases() -> None:
    assert sum(c["expect"] == "error" for c in CASES) >= 300
    assert {c["category"].split(":")[0] for c in CASES} >= {"options", "set", "gpu-spec", "descriptor", "import",
                                                          "sweep-files", "model-files", "output-paths"}


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case(case: dict[str, Any], results) -> None:
    assert case["id"] in results, "the case did not run (the runner died or hung before it)"
    rec, w = results[case["id"]]
    err = rec.get("stderr", "")
    lines = err.splitlines()
    warned = [ln for ln in lines if ln.startswith("hybridperf: warning: ")]
    if case["expect"] == "error":
        assert rec["rc"] == 2, f"exit {rec['rc']}; stderr: {err[-600:]}"
        assert err.endswith("\n") and lines[-1].startswith("hybridperf: error: "), err[-600:]
        assert len(lines) == 1 + len(warned), f"one error line (after one-line warnings) expected: {err[-600:]}"
        assert rec["changes"] == [], f"files changed: {rec['changes']}"
    else:
        assert rec["rc"] == 0, f"exit {rec['rc']}; stderr: {err[-600:]}"
        assert len(lines) == len(warned), err[-600:]
        assert set(rec["changes"]) <= set(case.get("outputs", [])), rec["changes"]
        CHECKS[case["check"]](case, rec, w)
    assert "Traceback" not in err
    assert rec["seconds"] < MAX_SECONDS, f"took {rec['seconds']:.1f} s"
    assert rec["peak_rss"] < PEAK_BYTES, f"peak RSS {rec['peak_rss'] / 2**20:.0f} MiB"
