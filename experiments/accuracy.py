"""Accuracy targets of EVALUATION.md (issue 11 section 4) on the shipped real data, every baseline side by side.

Cases (one split each; every method shares its features and split):
  neusight-s2   NeuSight cuBLAS GEMM per GPU: train max(M,N,K) <= 512, test larger (MAPE <= 10%, P90 <= 25%)
  neusight-s1   NeuSight GEMM on the T4: random 20% of the runs held out (S1 must stay as good as before)
  neusight-s6   NeuSight GEMM, each GPU left out with no runs on it, predicted from its spec (MAPE <= 15%)
  kt-s6         each Kernel Tuner hub GPU left out of its sweep (convolution, CLBlast gemm, dedispersion, pnpoly)
  ktt-s6        KTT CoulombSum3d: each of its two GPUs left out (trained on the other's 210 runs; ranking only: the
                two runs' atom counts are not recorded and seem to differ, so their levels do not transfer)
  uci-s5        UCI SGEMM (GTX 680), 1% of configurations measured, 10 seeds: top-1 >= 0.97, top-5 >= 0.99, and
                the hybrid's top-1 beats the best of the same random runs on >= 9 of 10 seeds
  clblast-s4    CLBlast Xgemm (kt-gemm-rtx): leave one RTX GPU out, 50 calibration runs of it (top-5 >= 0.97)
  aiwc-s2       AIWC/OpenDwarfs, NVIDIA GPUs with a spec: train tiny+small, test medium (MAPE <= 30%)
  ops-s2        NeuSight's elementwise, softmax and layernorm ops (neusight-ops but conv), per GPU: train each op's
                sizes up to a quarter of its largest, test the rest (no target of its own; NeuSight GEMM's: MAPE <= 10%)
  ops-s6        the same ops, each GPU left out with no runs on it, predicted from its spec (NeuSight GEMM's target:
                MAPE <= 15%)
  new-user      the shipped default model (models/default.json) on the NeuSight GEMM rows, in NEUSIGHT_RAW, of GPUs
                absent from its training (MAPE per GPU), as a new user would run it

Methods: analytical:<model> (uncalibrated), calibrated:<model> (one scale per (kernel, GPU) fitted on the training
rows), boosting (xgboost on the parameters and GPU fields only), hybrid (the product's model, make_model()), and on
uci-s5 and clblast-s4 hybrid-uniform (the same with every run weighted alike, the product before throughput weights;
it needs make_model's ``weighting``, which older code lacks).
Point predictions are those of hybridperf.evaluation.evaluate (same pipelines; intervals are not fitted here, they
do not change the point predictions), except where a GPU has few training runs of a kernel (clblast-s4): there the
product's hybrid is fitted with its intervals (fit_model), whose held-out fits set the donor stacks that predict
such a GPU (hybridperf.learn.donors), and hybrid-no-donors is the same fit predicting without them (the hybrid
before them). Apart from hybrid-uniform, the script uses only functions that exist on main
too, so it measures the previous code as well: PYTHONPATH=<checkout of main> python experiments/accuracy.py --tag main
[case ...] (hybrid-uniform is skipped there).
Usage: python experiments/accuracy.py [--tag TAG] [case ...]  (results/accuracy_<case>[_TAG].csv; then
experiments/accuracy_report.py writes results/accuracy.md)
"""
from __future__ import annotations

import argparse
import inspect
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, SHARED, neusight_ops  # noqa: E402

from hybridperf.analytical.run import TIME_MODELS  # noqa: E402
from hybridperf.datasets import load_dataset  # noqa: E402
from hybridperf.evaluation.evaluate import ape_metrics, topk_scores  # noqa: E402
from hybridperf.evaluation.splits import split_indices  # noqa: E402
from hybridperf.hardware import gpu_names  # noqa: E402
from hybridperf.learn.baseline import baseline_column  # noqa: E402
from hybridperf.learn.estimator import default_booster  # noqa: E402
from hybridperf.learn.features import analytical_features  # noqa: E402
from hybridperf.learn.model import make_model, size_bands  # noqa: E402
from hybridperf.sweep import param_columns, training_rows  # noqa: E402

ALL = ([f"analytical:{m}" for m in TIME_MODELS if m != "scaled-counts"] + [f"calibrated:{m}" for m in TIME_MODELS]
       + ["boosting", "hybrid"])
NEUSIGHT_RAW = SHARED / "neusight" / "scripts" / "asplos" / "data" / "dataset"


def _load(name: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    rows = training_rows(load_dataset(name))
    rows = rows[rows.gpu.isin(set(gpu_names()))].reset_index(drop=True)
    return rows, analytical_features(rows)


def _pipeline(method: str, seed: int):
    kind, _, model = method.partition(":")
    if kind == "calibrated":
        return make_model(baseline=model, mode="calibrated", calibration="scale", coverage=None, random_state=seed)
    reg = default_booster(seed)
    if method == "hybrid-uniform":  # the hybrid with every run weighted alike (the product before throughput weights)
        return make_model(regressor=reg, coverage=None, random_state=seed, weighting="uniform")
    if method == "boosting":
        return make_model(baseline="none", regressor=reg, coverage=None, random_state=seed, group_ids=False,
                          columns="params")
    return make_model(regressor=reg, coverage=None, random_state=seed)


def _has_few_runs(rows: pd.DataFrame) -> bool:
    try:
        from hybridperf.learn.donors import few_run_pairs
    except ImportError:  # the code before donor stacks (--tag main)
        return False
    return any(d for *_, d in few_run_pairs(rows["kernel"].astype(str).to_numpy(), rows["gpu"].astype(str).to_numpy()))


_STACKED: dict[tuple, object] = {}  # one fit serves hybrid and hybrid-no-donors


def _predict_stacked(method: str, rows: pd.DataFrame, y: np.ndarray, feats: pd.DataFrame, tr: np.ndarray,
                     te: np.ndarray, seed: int) -> tuple[np.ndarray, str]:
    """The product's hybrid with its intervals and donor stacks (a GPU with few runs), or without the stacks."""
    import dataclasses

    from hybridperf.learn.model import TrainedModel, fit_model, predict_rows

    key = (id(rows), tr.tobytes(), seed)
    if key not in _STACKED:
        _STACKED.clear()
        _STACKED[key] = fit_model(make_model(regressor=default_booster(seed), random_state=seed), rows.iloc[tr], y[tr],
                                  features=feats.iloc[tr], groups=size_bands(rows.iloc[tr]), random_state=seed)
    model = _STACKED[key]
    if method == "hybrid-no-donors":
        model = TrainedModel(pipeline=model.pipeline, intervals=dataclasses.replace(model.intervals, donor_stacks={}))
    pred = predict_rows(model, rows.iloc[te], features=feats.iloc[te], check=False)["time_ms"].to_numpy()
    chosen = sorted(set(model.features.baselines_.values()))
    return pred, method if method == "hybrid-no-donors" else f"hybrid ({','.join(chosen)})"


def _predict(method: str, rows: pd.DataFrame, y: np.ndarray, feats: pd.DataFrame, tr: np.ndarray, te: np.ndarray,
             seed: int) -> tuple[np.ndarray, str]:
    kind, _, model = method.partition(":")
    if kind == "analytical":
        return np.exp(feats[baseline_column(model)].to_numpy()[te]), method
    if method in ("hybrid", "hybrid-no-donors") and _has_few_runs(rows.iloc[tr]):
        return _predict_stacked(method, rows, y, feats, tr, te, seed)
    pipe = _pipeline(method, seed)
    pipe.fit(rows.iloc[tr], y[tr], features__features=feats.iloc[tr], hybrid__groups=size_bands(rows.iloc[tr]))
    X = pipe.named_steps["features"].transform(rows.iloc[te], features=feats.iloc[te])
    pred = pipe.named_steps["hybrid"].predict(X)
    if method == "hybrid":
        chosen = sorted(set(pipe.named_steps["features"].baselines_.values()))
        method = f"hybrid ({','.join(chosen)})"
    return pred, method


def evaluate_split(rows: pd.DataFrame, feats: pd.DataFrame, split: str, methods: list[str], seed: int = 0,
                   **options) -> list[dict]:
    """One row per method: APE metrics, Spearman and the top-k scores over (kernel, GPU, sizes) groups."""
    y = rows["time_ms"].to_numpy(dtype=np.float64)
    tr, te = split_indices(rows, split, seed=seed, **options)
    ok = feats["feasible"].to_numpy() > 0
    tr, te = tr[ok[tr]], te[ok[te]]
    keys = rows.iloc[te][["kernel", "gpu", *param_columns(rows, "size.")]].astype(str).agg("|".join, axis=1)
    out = []
    for method in methods:
        if method == "hybrid-uniform" and "weighting" not in inspect.signature(make_model).parameters:
            continue  # older code: its hybrid weighs every run alike already
        t0 = time.perf_counter()
        pred, label = _predict(method, rows, y, feats, tr, te, seed)
        out.append({"method": label, "n_train": len(tr), **ape_metrics(pred, y[te]),
                    **topk_scores(keys.to_numpy(), pred, y[te]), "seconds": time.perf_counter() - t0})
        print(f"  {label}: MAPE {out[-1]['mape']:.1f} top1 {out[-1]['top1']:.3f} ({out[-1]['seconds']:.0f} s)",
              flush=True)
    return out


def _each_gpu(rows: pd.DataFrame, feats: pd.DataFrame, split: str, **options) -> list[dict]:
    """``split`` fitted and scored on each GPU's rows alone, one result row per (GPU, method)."""
    out = []
    for gpu in sorted(rows.gpu.unique()):
        m = (rows.gpu == gpu).to_numpy()
        r, f = rows[m].reset_index(drop=True), feats[m].reset_index(drop=True)
        out += [{"subset": gpu, **x} for x in evaluate_split(r, f, split, ALL, **options)]
    return out


def _each_held_out(rows: pd.DataFrame, feats: pd.DataFrame) -> list[dict]:
    """S6 with each GPU of ``rows`` left out in turn."""
    return [{"subset": f"held out {gpu}", **x} for gpu in sorted(rows.gpu.unique())
            for x in evaluate_split(rows, feats, "S6", ALL, holdout=gpu)]


def neusight_s2() -> list[dict]:
    return _each_gpu(*_load("neusight-gemm"), "S2", train_max_size=512)


def neusight_s1() -> list[dict]:
    rows, feats = _load("neusight-gemm")
    m = (rows.gpu == "tesla-t4").to_numpy()
    r, f = rows[m].reset_index(drop=True), feats[m].reset_index(drop=True)
    return [{"subset": "tesla-t4", **x} for x in evaluate_split(r, f, "S1", ALL)]


def neusight_s6() -> list[dict]:
    return _each_held_out(*_load("neusight-gemm"))


def kt_s6() -> list[dict]:
    out = []
    for name in ("kt-convolution", "kt-gemm-rtx", "kt-dedispersion", "kt-pnpoly"):
        rows, feats = _load(name)
        for gpu in sorted(rows.gpu.unique()):
            out += [{"subset": f"{name} held out {gpu}", **x}
                    for x in evaluate_split(rows, feats, "S6", ALL, holdout=gpu)]
    return out


def ktt_s6() -> list[dict]:
    rows, feats = _load("ktt-coulomb")
    return [{"subset": f"ktt-coulomb held out {gpu}", **x} for gpu in sorted(rows.gpu.unique())
            for x in evaluate_split(rows, feats, "S6", ALL, holdout=gpu)]


def uci_s5() -> list[dict]:
    rows, feats = _load("uci-sgemm-gtx680")
    y = rows["time_ms"].to_numpy()
    out = []
    for seed in range(10):
        tr, _ = split_indices(rows, "S5", budget_fraction=0.01, seed=seed)
        random_best = float(y.min() / y[tr].min())
        out += [{"subset": f"seed {seed}", "random_best_top1": random_best, **x}
                for x in evaluate_split(rows, feats, "S5", ["calibrated:roofline", "calibrated:mwp-cwp", *(
                    ["calibrated:hierarchical"] if "hierarchical" in TIME_MODELS else []), "boosting", "hybrid",
                    "hybrid-uniform"],
                    seed=seed, budget_fraction=0.01)]
    return out


def clblast_s4() -> list[dict]:
    rows, feats = _load("kt-gemm-rtx")
    return [{"subset": f"held out {gpu}", **x} for gpu in sorted(rows.gpu.unique())
            for x in evaluate_split(rows, feats, "S4", [*ALL, "hybrid-no-donors", "hybrid-uniform"], holdout=gpu,
                                    calibration_runs=50)]


def aiwc_s2() -> list[dict]:
    rows, feats = _load("aiwc-opendwarfs")
    return [{"subset": f"{rows.gpu.nunique()} NVIDIA GPUs", **x}
            for x in evaluate_split(rows, feats, "S2", ALL, train_max_size=2)]  # class 1 tiny, 2 small, 3 medium


def _ops() -> tuple[pd.DataFrame, pd.DataFrame]:
    """NeuSight's ops with a descriptor: all but its conv, whose cuDNN algorithms vary with the shape."""
    rows = training_rows(neusight_ops()).reset_index(drop=True).dropna(axis=1, how="all")  # the conv's sizes
    return rows, analytical_features(rows)


def ops_s2() -> list[dict]:
    return _each_gpu(*_ops(), "S2")


def ops_s6() -> list[dict]:
    return _each_held_out(*_ops())


def new_user() -> list[dict]:
    """The shipped default model on NeuSight GEMM rows of GPUs it was not trained on (none: an empty table)."""
    from hybridperf.importers.neusight import read_neusight
    from hybridperf.learn.model import load_model, predict_rows

    model = load_model(Path(__file__).resolve().parents[1] / "models" / "default.json")
    trained = set(model.features.domain_["neusight-gemm"]["gpus"])  # the GPUs it trained GEMM on
    folder = NEUSIGHT_RAW / "train" / "collect"
    rows = training_rows(read_neusight(folder, ops=["bmm", "linear"], progress=False))
    rows = rows[rows.gpu.isin(set(gpu_names())) & ~rows.gpu.isin(trained)].reset_index(drop=True)
    print(f"  GPUs with NeuSight GEMM rows absent from the default model's training: {sorted(rows.gpu.unique())}")
    out = []
    for gpu, r in rows.groupby("gpu"):
        pred = predict_rows(model, r.reset_index(drop=True))["time_ms"].to_numpy()
        out.append({"subset": gpu, "method": "default model", **ape_metrics(pred, r["time_ms"].to_numpy())})
    return out


CASES = {"neusight-s2": neusight_s2, "neusight-s1": neusight_s1, "neusight-s6": neusight_s6, "kt-s6": kt_s6,
         "ktt-s6": ktt_s6, "uci-s5": uci_s5, "clblast-s4": clblast_s4, "aiwc-s2": aiwc_s2, "ops-s2": ops_s2,
         "ops-s6": ops_s6, "new-user": new_user}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tag", default="", help="suffix of the result files (e.g. 'main' for the previous code)")
    parser.add_argument("cases", nargs="*", help=f"cases to run (default: all): {', '.join(CASES)}")
    args = parser.parse_args(argv)
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        parser.error(f"unknown case {unknown[0]!r}; choose from {', '.join(CASES)}")
    for name in args.cases or list(CASES):
        t0 = time.perf_counter()
        print(f"{name} ({os.environ.get('PYTHONPATH') or 'this checkout'})", flush=True)
        table = pd.DataFrame(CASES[name]())
        table.to_csv(RESULTS / f"accuracy_{name}{'_' + args.tag if args.tag else ''}.csv", index=False)
        print(f"{name}: {time.perf_counter() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
