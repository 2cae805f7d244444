"""A GPU with no runs, predicted by a model trained on one other GPU (issue 11, S6 with one training GPU).

For every dataset with runs of the same kernels on two or more GPUs, each ordered pair (A, B): the product's
model (the hybrid of ``evaluate``, make_model(), seed 0, no intervals) is trained on A's runs alone and predicts
B's. This is what a user with one GPU does to ask how another would run the same sweep. Beside the hybrid: the
hierarchical roofline alone, uncalibrated and with A's per-kernel scale (``calibrated:hierarchical``).

The previous code is measured by the same script with PYTHONPATH at its checkout (``--tag main``: writes
one_gpu_transfer_main.csv, which the report of this checkout shows beside its own).

    .venv/bin/python experiments/one_gpu_transfer.py                 # results/one_gpu_transfer.md, .csv
    PYTHONPATH=<main checkout> .venv/bin/python experiments/one_gpu_transfer.py --tag main
    .venv/bin/python experiments/one_gpu_transfer.py --report      # the .md again from the CSVs
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, git_commit, header, md_table  # noqa: E402

from hybridperf.datasets import load_dataset  # noqa: E402
from hybridperf.evaluation.evaluate import ape_metrics  # noqa: E402
from hybridperf.hardware import gpu_names  # noqa: E402
from hybridperf.learn.baseline import baseline_column  # noqa: E402
from hybridperf.learn.estimator import default_booster  # noqa: E402
from hybridperf.learn.features import analytical_features  # noqa: E402
from hybridperf.learn.model import make_model, size_bands  # noqa: E402
from hybridperf.sweep import training_rows  # noqa: E402

# kt-pnpoly is left out: two of its three GPUs' times are ~100x below the third's (datasets/kt-pnpoly/README.md).
DATASETS = {"kt-convolution": ["kt-convolution"], "kt-gemm-rtx": ["kt-gemm-rtx"],
            "kt-dedispersion": ["kt-dedispersion"], "neusight-gemm": ["neusight-gemm"],
            "recorded (H200, H100)": ["h200-cuda-bench", "h100-cuda-bench"]}


def _rows(names: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    rows = pd.concat([training_rows(load_dataset(n)) for n in names], ignore_index=True)
    rows = rows[rows.gpu.isin(set(gpu_names()))].reset_index(drop=True)
    return rows, analytical_features(rows)


def pairs(label: str, names: list[str]) -> list[dict]:
    rows, feats = _rows(names)
    y = rows["time_ms"].to_numpy(dtype=np.float64)
    ok = feats["feasible"].to_numpy() > 0
    hier = feats[baseline_column("hierarchical")].to_numpy()
    kernels = rows["kernel"].astype(str).to_numpy()
    out = []
    for a in sorted(rows.gpu.unique()):
        tr = np.flatnonzero((rows.gpu == a).to_numpy() & ok)
        t0 = time.perf_counter()
        pipe = make_model(regressor=default_booster(0), coverage=None, random_state=0)
        pipe.fit(rows.iloc[tr], y[tr], features__features=feats.iloc[tr], hybrid__groups=size_bands(rows.iloc[tr]))
        fit_s = time.perf_counter() - t0
        scale = {k: float(np.mean(np.log(y[tr][kernels[tr] == k]) - hier[tr][kernels[tr] == k]))
                 for k in np.unique(kernels[tr])}
        for b in sorted(rows.gpu.unique()):
            te = np.flatnonzero((rows.gpu == b).to_numpy() & ok & np.isin(kernels, list(scale)))
            if b == a or not len(te):
                continue
            X = pipe.named_steps["features"].transform(rows.iloc[te], features=feats.iloc[te])
            pred = pipe.named_steps["hybrid"].predict(X)
            cal = np.exp(hier[te] + np.array([scale[k] for k in kernels[te]]))
            row = {"dataset": label, "trained": a, "predicted": b, "n_train": len(tr), "n": len(te),
                   "hybrid": ape_metrics(pred, y[te])["mape"],
                   "calibrated:hierarchical": ape_metrics(cal, y[te])["mape"],
                   "analytical:hierarchical": ape_metrics(np.exp(hier[te]), y[te])["mape"], "fit_s": fit_s}
            out.append(row)
            print(f"  {label}: {a} -> {b}: hybrid MAPE {row['hybrid']:.1f} "
                  f"(calibrated hierarchical {row['calibrated:hierarchical']:.1f})", flush=True)
    return out


def _code() -> str:
    """The commit of the hybridperf checkout measured (PYTHONPATH may point at another than this script's)."""
    import hybridperf

    return git_commit(Path(hybridperf.__file__).resolve().parent)


def _summary(res: pd.DataFrame, by: object) -> pd.DataFrame:
    """Median and mean MAPE per dataset and, against the previous code, the pairs better / worse by over 1 point."""
    out = pd.concat([by.median().add_suffix(" median"), by.mean().add_suffix(" mean")], axis=1)  # type: ignore[attr-defined]
    if "hybrid main" in res:
        diff = (res["hybrid"] - res["hybrid main"]).groupby(res["dataset"], sort=False)
        out["pairs better"] = diff.apply(lambda d: int((d < -1).sum()))
        out["pairs worse"] = diff.apply(lambda d: int((d > 1).sum()))
    return out.reset_index()


def main(argv: list[str]) -> None:
    tag = argv[argv.index("--tag") + 1] if "--tag" in argv else ""
    if "--report" in argv:  # the report again from the CSVs, without refitting
        res = pd.read_csv(RESULTS / "one_gpu_transfer.csv")
    else:
        res = pd.DataFrame([r for label, names in DATASETS.items() for r in pairs(label, names)]).assign(code=_code())
        res.to_csv(RESULTS / f"one_gpu_transfer{'_' + tag if tag else ''}.csv", index=False)
    if tag:
        return
    keys = ["dataset", "trained", "predicted"]
    prev_path = RESULTS / "one_gpu_transfer_main.csv"
    prev_code = "none"
    if prev_path.exists():
        prev = pd.read_csv(prev_path)
        prev_code = str(prev["code"].iloc[0]) if "code" in prev else "unknown"
        res = res.merge(prev[keys + ["hybrid"]].rename(columns={"hybrid": "hybrid main"}), on=keys, how="left")
    cols = keys + ["n", "hybrid"] + (["hybrid main"] if "hybrid main" in res else []) + [
        "calibrated:hierarchical", "analytical:hierarchical"]
    methods = [c for c in cols if c.startswith(("hybrid", "calibrated", "analytical"))]
    summary = res.groupby("dataset", sort=False)[methods]
    text = [header("A GPU with no runs, predicted from one other GPU's runs",
                   ".venv/bin/python experiments/one_gpu_transfer.py").replace(
                       "(commit", f"(hybrid: commit {res['code'].iloc[0]}; report: commit"),
            __doc__.split("\n\n")[1].replace("\n", " ") + "\n",
            f"MAPE (%) of each ordered pair; `hybrid main`: the previous code (commit {prev_code}, "
            "one_gpu_transfer_main.csv). Per dataset, the median and mean over its pairs:\n",
            md_table(_summary(res, summary)),
            "\n## Every pair\n", md_table(res[cols])]
    (RESULTS / "one_gpu_transfer.md").write_text("\n".join(text) + "\n")
    print((RESULTS / "one_gpu_transfer.md").read_text())


if __name__ == "__main__":
    main(sys.argv[1:])
