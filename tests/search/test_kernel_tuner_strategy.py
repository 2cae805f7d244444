"""The loop as a Kernel Tuner strategy object, in Kernel Tuner's simulation mode on a shipped sweep's cache."""
from __future__ import annotations

import contextlib
import io
import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hybridperf.datasets import load_dataset
from hybridperf.errors import HybridperfError
from hybridperf.importers import export_kernel_tuner
from hybridperf.search.kernel_tuner_strategy import HybridperfStrategy, PicksStrategy, space_rows_from_kernel_tuner
from hybridperf.search.loop import LoopOptions

GPU = "rtx-a4000"


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> tuple[Path, dict[str, Any], float]:
    sweep = load_dataset("kt-convolution")
    rows = sweep[sweep["gpu"] == GPU].reset_index(drop=True)
    path = export_kernel_tuner(rows, tmp_path_factory.mktemp("kt") / "conv.json")
    optimum = float(rows.loc[rows["status"] == "ok", "time_ms"].min())
    return path, json.loads(path.read_text()), optimum


def _tune(cache: tuple[Path, dict[str, Any], float], strategy: Any, budget: int) -> list[dict[str, Any]]:
    kt = pytest.importorskip("kernel_tuner")
    path, doc, _ = cache
    names = doc["tune_params_keys"]
    keys = {tuple(e[n] for n in names) for e in doc["cache"].values()}

    def in_cache(p: dict[str, Any]) -> bool:  # the recorded space is sparse: restrict to its keys
        return tuple(p[n] for n in names) in keys

    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        results, _ = kt.tune_kernel(doc["kernel_name"], "/* simulation: never compiled */", doc["problem_size"], [],
                                    doc["tune_params"], restrictions=in_cache, cache=str(path), simulation_mode=True,
                                    strategy=strategy, strategy_options={"max_fevals": budget}, quiet=True)
    return results


def test_the_loop_runs_inside_kernel_tuner(cache) -> None:
    _, doc, optimum = cache
    names = doc["tune_params_keys"]
    strat = HybridperfStrategy("kt-convolution", GPU, sizes={"W": 4096, "H": 4096}, prior="analytical", seed=1,
                               options=LoopOptions(members=3))
    results = _tune(cache, strat, 24)
    configs = [tuple(r[n] for n in names) for r in results]
    assert len(results) == 24 and len(set(configs)) == 24  # Kernel Tuner's budget: distinct configurations
    times = [r["time"] for r in results if "__error__" not in r]
    cached = {k: v["time"] for k, v in doc["cache"].items()}
    assert all(cached[",".join(str(v) for v in c)] == r["time"] for c, r in zip(configs, results)
               if "__error__" not in r)
    assert min(times) >= optimum and min(times) < 1.5 * optimum
    assert strat.prior_.startswith("analytical") and strat.stops_ and all(0 <= s.p_better <= 1 for s in strat.stops_)


def test_the_stop_rule_can_end_the_search(cache) -> None:
    strat = HybridperfStrategy("kt-convolution", GPU, sizes={"W": 4096, "H": 4096}, prior="none", stop=True,
                               options=LoopOptions(members=2, stop_probability=0.999, stop_gain=0.5))
    results = _tune(cache, strat, 40)
    assert strat.stops_[-1].stop and len(results) < 40


def test_non_numeric_parameters_are_refused() -> None:
    with pytest.raises(HybridperfError, match="non-numeric"):
        space_rows_from_kernel_tuner("kt-convolution", GPU, {}, ["block_size_x", "precision"], [(16, "float")])
    rows = space_rows_from_kernel_tuner("kt-convolution", GPU, {"W": 4096, "H": 4096}, ["block_size_x"], [(16,), (32,)])
    assert rows["config.block_size_x"].tolist() == [16, 32] and np.all(rows["size.W"] == 4096)


def test_picks_are_measured_exactly_in_order(cache, tmp_path) -> None:
    _, doc, _ = cache
    names = doc["tune_params_keys"]
    entries = list(doc["cache"].values())[5:9]
    picks = tmp_path / "batch.json"
    picks.write_text(json.dumps({"configurations": [{n: e[n] for n in names} for e in entries]}))
    results = _tune(cache, PicksStrategy.from_file(picks), 100)
    assert [tuple(r[n] for n in names) for r in results] == [tuple(e[n] for n in names) for e in entries]
    with pytest.raises(HybridperfError, match="not a picks file"):
        PicksStrategy.from_file(tmp_path / "missing.json")
