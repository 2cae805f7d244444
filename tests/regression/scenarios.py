"""Fixed end-to-end scenarios whose outputs must not change under behaviour-preserving refactors.

``reference.json.gz`` holds their outputs as computed by the code at a known commit (see README.md);
``test_reference.py`` recomputes them and compares bit for bit. Regenerate it only when a change is
meant to change numbers (``python -m tests.regression.make_reference``), and say so in the commit.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from tests.paths import REPO

ROOT = REPO
DEFAULT_MODEL = ROOT / "models" / "default.json"


def _cols(df: pd.DataFrame, cols: list[str]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for c in cols:
        v = df[c].to_numpy()
        if v.dtype.kind in "fiub":
            out[c] = [None if not np.isfinite(x) else float(x) for x in v.astype(np.float64)]
        else:
            out[c] = [str(x) for x in v]
    return out


_PRED = ["time_ms", "lo_ms", "hi_ms", "regime", "limiter", "feasible", "out_of_domain", "ood_reason"]


def default_model_predictions() -> dict[str, Any]:
    from hybridperf.datasets import load_dataset
    from hybridperf.learn.model import load_model, predict_rows

    model = load_model(DEFAULT_MODEL)
    gemm = load_dataset("neusight-gemm")
    rows = pd.concat([gemm.iloc[::97], load_dataset("titanv-seed004")], ignore_index=True)
    return _cols(predict_rows(model, rows), _PRED)


def trained_titanv() -> dict[str, Any]:
    from hybridperf.datasets import load_dataset
    from hybridperf.grid import parameter_grid
    from hybridperf.learn.model import predict_rows, train_model

    model = train_model(load_dataset("titanv-seed004"))
    grid = parameter_grid({"N": [1024.0 * 2**i for i in range(8)]})
    rows = pd.DataFrame({"kernel": "seed004-matvec", "gpu": "titan-v", "size.N": grid["N"]})
    out = _cols(predict_rows(model, rows), _PRED)
    out["baselines"] = sorted(model.features.baselines_.items())
    out["training_log_rmse"] = model.metadata["training_log_rmse"]
    out["domain"] = model.features.domain_
    return out


def evaluate_titanv(split: str) -> dict[str, Any]:
    from hybridperf.datasets import load_dataset
    from hybridperf.evaluation.evaluate import evaluate

    ev = evaluate(load_dataset("titanv-seed004"), split)
    table = ev.table.drop(columns=["seconds"])
    return {"table": _cols(table, list(table.columns)), "n_train": ev.n_train, "n_test": ev.n_test}


def rank_default() -> dict[str, Any]:
    from hybridperf.learn.model import load_model
    from hybridperf.search.rank import rank_configs

    res = rank_configs(load_model(DEFAULT_MODEL), "neusight-gemm", "t4", {"B": 1, "M": 2048, "N": 2048, "K": 2048})
    cols = [c for c in res.candidates.columns]
    return {"candidates": _cols(res.candidates, cols), "counts": _cols(res.counts(), ["stage", "configs"])}


def rank_ryoo() -> dict[str, Any]:
    from hybridperf.search.rank import rank_configs

    res = rank_configs(None, "clblast-xgemm", "gtx680", {"M": 2048, "N": 2048, "K": 2048}, top=50, prune="ryoo")
    return {"candidates": _cols(res.candidates, list(res.candidates.columns))}


def replay_dedispersion() -> dict[str, Any]:
    from hybridperf.datasets import load_dataset
    from hybridperf.search.measure_next import replay

    data = load_dataset("kt-dedispersion")
    tr = replay(data, "kt-dedispersion", "rtx-a4000", budget=40, seed=1)
    return {"steps": _cols(tr.steps, list(tr.steps.columns)), "stopped_at": tr.stopped_at}


def suggest_bag() -> dict[str, Any]:
    from hybridperf.datasets import load_dataset
    from hybridperf.search.measure_next import suggest_next

    data = load_dataset("kt-dedispersion")
    data = data[data["gpu"] == "rtx-a4000"].reset_index(drop=True)
    measured, cands = data.iloc[::200], data.drop(columns=["time_ms"]).iloc[::7]
    sug = suggest_next(None, cands, measured, batch=6, start=8, seed=3)
    cols = [c for c in sug.table.columns]
    return {"table": _cols(sug.table, cols), "p_better": sug.stop.p_better, "gain": sug.stop.expected_gain,
            "stop": sug.stop.stop, "prior": sug.prior}


def tuned_titanv() -> dict[str, Any]:
    from hybridperf.datasets import load_dataset
    from hybridperf.learn.model import predict_rows, train_model

    data = load_dataset("titanv-seed004")
    model = train_model(data, tune_trials=3)
    out = _cols(predict_rows(model, data), ["time_ms", "lo_ms", "hi_ms"])
    out["tuning"] = model.metadata["tuning"]
    out["booster"] = sorted(model.metadata["booster_params"].items())
    return out


def calibrate_titanv() -> dict[str, Any]:
    from hybridperf.datasets import load_dataset
    from hybridperf.learn.calibrate import calibrate_gpu

    cal = calibrate_gpu(load_dataset("titanv-seed004"), "titan-v", model="mwp-cwp", max_rows=60)
    return {"fitted": dict(cal.fitted), "after": cal.log_rmse_after}


SCENARIOS: dict[str, Callable[[], dict[str, Any]]] = {
    "default_model_predictions": default_model_predictions,
    "trained_titanv": trained_titanv,
    "evaluate_titanv_S2": lambda: evaluate_titanv("S2"),
    "evaluate_titanv_S1": lambda: evaluate_titanv("S1"),
    "rank_default": rank_default,
    "rank_ryoo": rank_ryoo,
    "replay_dedispersion": replay_dedispersion,
    "suggest_bag": suggest_bag,
    "tuned_titanv": tuned_titanv,
    "calibrate_titanv": calibrate_titanv,
}
