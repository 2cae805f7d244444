"""A GPU with few runs (S4: 50 of its runs beside every run of the other GPUs), with and without donor stacks.

Issue 11 (S4 top-5 >= 0.97 on each held-out GPU) and issue 12 (its intervals 85-95 % at 90 %). The product's model
(``fit_model`` with its intervals, as ``hybridperf train`` fits it) on each S4 split of the Kernel Tuner sweeps with
three or more configurations per GPU (CLBlast Xgemm, convolution, dedispersion), each GPU held out in turn, seeds
as given. ``stacked`` is the model as shipped: the held-out GPU's predictions combined with its kernel's other GPUs'
(:mod:`hybridperf.learn.donors`); ``own`` the same fitted model with its stacks removed (the model's own prediction
for that GPU, as before them: the same booster; its interval columns are left out, the bins being the stacks').
The intervals before the stacks are those of ``experiments/intervals.py`` (S4, CLBlast only) or of this script run
on the code before them (``--tag``).

    .venv/bin/python experiments/donor_stacks.py                 # seed 0, every sweep and GPU
    .venv/bin/python experiments/donor_stacks.py --seeds 0 1 2   # more draws of the 50 runs
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, header, md_table  # noqa: E402

from hybridperf.datasets import load_dataset  # noqa: E402
from hybridperf.evaluation.evaluate import ape_metrics, topk_scores  # noqa: E402
from hybridperf.evaluation.splits import split_indices  # noqa: E402
from hybridperf.files import atomic_write_text  # noqa: E402
from hybridperf.hardware import gpu_names  # noqa: E402
from hybridperf.learn.estimator import default_booster  # noqa: E402
from hybridperf.learn.features import analytical_features  # noqa: E402
from hybridperf.learn.model import TrainedModel, fit_model, make_model, predict_rows, size_bands  # noqa: E402
from hybridperf.sweep import training_rows  # noqa: E402

SWEEPS = ("kt-gemm-rtx", "kt-convolution", "kt-dedispersion")
RUNS = 50


def _metrics(pred: pd.DataFrame, y: np.ndarray, keys: np.ndarray, intervals: bool) -> dict[str, float]:
    t = pred["time_ms"].to_numpy()
    out = {"mape": ape_metrics(t, y)["mape"], "p90_ape": ape_metrics(t, y)["p90_ape"], **topk_scores(keys, t, y)}
    if intervals:
        out["cover90"] = float(np.mean((y >= pred["lo_ms"]) & (y <= pred["hi_ms"])) * 100)
        out["hilo90"] = float(np.median(pred["hi_ms"] / pred["lo_ms"]))
    return out


def case(rows: pd.DataFrame, feats: pd.DataFrame, gpu: str, seed: int) -> list[dict]:
    y = rows["time_ms"].to_numpy(dtype=np.float64)
    tr, te = split_indices(rows, "S4", seed=seed, holdout=gpu, calibration_runs=RUNS)
    ok = feats["feasible"].to_numpy() > 0
    tr, te = tr[ok[tr]], te[ok[te]]
    t0 = time.perf_counter()
    model = fit_model(make_model(regressor=default_booster(seed), random_state=seed), rows.iloc[tr], y[tr],
                      features=feats.iloc[tr], groups=size_bands(rows.iloc[tr]), random_state=seed)
    fit_s = time.perf_counter() - t0
    keys = rows.iloc[te][["kernel", "gpu"]].astype(str).agg("|".join, axis=1).to_numpy()
    stacks = getattr(model.intervals, "donor_stacks", {})  # none before them (--tag main)
    stack = next(iter(stacks.values()), None)
    own = model if not stacks else TrainedModel(pipeline=model.pipeline, metadata=model.metadata,
                                                intervals=dataclasses.replace(model.intervals, donor_stacks={}))
    out = []
    for label, m in (("stacked", model), ("own", own)):
        t1 = time.perf_counter()
        pred = predict_rows(m, rows.iloc[te], 0.9, features=feats.iloc[te], check=False)
        out.append({"gpu": gpu, "seed": seed, "method": label, "n_train": len(tr), "n": len(te),
                    **_metrics(pred, y[te], keys, label == "stacked"),
                    "weights": "" if stack is None or label == "own" else
                    " ".join(f"{w:.2f}" for w in stack.weights),
                    "donors": "" if stack is None or label == "own" else " ".join(stack.donors),
                    "fit_s": fit_s, "predict_s": time.perf_counter() - t1})
    return out


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--sweeps", nargs="+", default=list(SWEEPS))
    parser.add_argument("--tag", default="", help="suffix of the result files (e.g. 'main' for the code before)")
    args = parser.parse_args(argv)
    records = []
    t0 = time.perf_counter()
    for name in args.sweeps:
        rows = training_rows(load_dataset(name))
        rows = rows[rows["gpu"].isin(set(gpu_names()))].reset_index(drop=True)
        feats = analytical_features(rows)
        for seed in args.seeds:
            for gpu in sorted(rows["gpu"].unique()):
                records += [{"sweep": name, **r} for r in case(rows, feats, gpu, seed)]
                print(f"{name} seed {seed} {gpu}: {time.perf_counter() - t0:.0f} s", flush=True)
    table = pd.DataFrame(records)
    tag = f"_{args.tag}" if args.tag else ""
    table.to_csv(RESULTS / f"donor_stacks{tag}.csv", index=False)
    summary = (table.groupby(["sweep", "gpu", "method"], sort=False)[["mape", "top1", "top5"]].mean().unstack("method"))
    summary.columns = [f"{m}_{k}" for k, m in summary.columns]
    met = table.assign(top5_ok=table["top5"] >= 0.97).groupby("method")["top5_ok"].sum()
    text = [header("Donor stacks: a GPU with few runs predicted through its kernel's well-trained GPUs",
                   "python experiments/donor_stacks.py " + " ".join(argv)),
            f"S4, {RUNS} runs of the held-out GPU in training, seeds {' '.join(map(str, args.seeds))}: the product's "
            "model (`stacked`) and the same fit without its donor stacks (`own`). Top-5 >= 0.97 (issue 11): "
            + ", ".join(f"{m} {int(n)} of {int((table['method'] == m).sum())}" for m, n in met.items()) + ".\n",
            "## Mean over seeds\n", md_table(summary.reset_index()),
            "\n## Every case\n", md_table(table.drop(columns=["n_train"]))]
    atomic_write_text(RESULTS / f"donor_stacks{tag}.md", "\n".join(text) + "\n")
    print("\n".join(text))


if __name__ == "__main__":
    main(sys.argv[1:])
