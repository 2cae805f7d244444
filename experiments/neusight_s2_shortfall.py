"""Why NeuSight GEMM S2 misses its target on the P4, T4, P100 and V100: where cuBLAS's throughput falls with size.

Issue 11 asks, where a target is missed, to measure why. S2 trains each GPU on max(M, N, K) <= 512 and tests the
larger shapes (MAPE <= 10 %, P90 <= 25 %). This script splits the runs by the cuBLAS kernel's layout (its name's
``_nn`` / ``_tn`` suffix: NeuSight's ``bmm`` runs NN kernels, its ``linear`` runs TN ones) and by the bytes the
three matrices occupy (4 x B x (MK + NK + MN), float32), and reports

1. the median achieved TFLOP/s of every run longer than 1 ms (so that launch costs do not set it), per GPU, layout
   and footprint band;
2. the hybrid's S2 errors on the test rows of each layout and band (``evaluate``, as ``accuracy.py neusight-s2``),
   beside the largest footprint of each layout among the training rows; per GPU, its MAPE and P90 on each layout
   and without the TN rows beyond 256 MB.

    .venv/bin/python experiments/neusight_s2_shortfall.py    # results/neusight_s2_shortfall.md, .csv
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, header, md_table  # noqa: E402

from hybridperf.datasets import load_dataset  # noqa: E402
from hybridperf.evaluation.evaluate import ape_metrics, evaluate  # noqa: E402
from hybridperf.files import atomic_write_text  # noqa: E402
from hybridperf.hardware import gpu_names  # noqa: E402
from hybridperf.sweep import training_rows  # noqa: E402

BANDS_MB = (0, 16, 256, 1024, np.inf)
LABELS = ("<= 16 MB", "16-256 MB", "256 MB-1 GB", "> 1 GB")
BIG = ("256 MB-1 GB", "> 1 GB")


def annotate(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with their layout, footprint band and achieved TFLOP/s."""
    b = rows["size.B"].fillna(1.0)
    m, n, k = rows["size.M"], rows["size.N"], rows["size.K"]
    mb = 4 * b * (m * k + n * k + m * n) / 2**20
    name = rows["info.library_kernel"].astype(str).str.lower()
    layout = np.where(name.str.endswith("_tn"), "TN", np.where(name.str.endswith("_nn"), "NN", "other"))
    return rows.assign(layout=layout, footprint_mb=mb,
                       band=pd.cut(mb, BANDS_MB, labels=LABELS, right=True).astype(str),
                       tflops=2 * b * m * n * k / rows["time_ms"] / 1e9)


def _errors(g: pd.DataFrame) -> dict[str, float]:
    e = ape_metrics(g["pred"].to_numpy(), g["time_ms"].to_numpy())
    return {"n": e["n"], "mape": e["mape"], "p90_ape": e["p90_ape"],
            "median_pred_over_meas": float(np.median(g["pred"] / g["time_ms"]))}


def main() -> None:
    t0 = time.perf_counter()
    rows = training_rows(load_dataset("neusight-gemm"))
    rows = annotate(rows[rows["gpu"].isin(set(gpu_names()))].reset_index(drop=True))
    long = rows[rows["time_ms"] > 1.0]
    tput = long.pivot_table(index=["layout", "band"], columns="gpu", values="tflops", aggfunc="median",
                            observed=True).round(2)
    count = long.pivot_table(index=["layout", "band"], columns="gpu", values="tflops", aggfunc="size",
                             observed=True).fillna(0).astype(int)
    records, summary = [], []
    for gpu in sorted(rows["gpu"].unique()):
        r = rows[rows["gpu"] == gpu].reset_index(drop=True)
        ev = evaluate(r, "S2", methods=["hybrid"], train_max_size=512)
        test = r.loc[ev.predictions.index].assign(pred=ev.predictions.filter(like="hybrid").iloc[:, 0].to_numpy())
        train = r.drop(index=ev.predictions.index)
        largest = train.groupby("layout")["footprint_mb"].max()
        for (layout, band), g in test.groupby(["layout", "band"]):
            records.append({"gpu": gpu, "layout": layout, "band": band, **_errors(g),
                            "largest_train_mb": float(largest.get(layout, np.nan))})
        rest = test[~((test["layout"] == "TN") & test["band"].isin(BIG))]
        all_, kept = _errors(test), _errors(rest)
        nn, tn = _errors(test[test["layout"] == "NN"]), _errors(test[test["layout"] == "TN"])
        summary.append({"gpu": gpu, "test_rows": all_["n"], "mape": all_["mape"], "p90_ape": all_["p90_ape"],
                        "nn_rows": nn["n"], "nn_mape": nn["mape"], "nn_p90": nn["p90_ape"],
                        "tn_rows": tn["n"], "tn_mape": tn["mape"], "tn_p90": tn["p90_ape"],
                        "largest_train_mb_nn": float(largest.get("NN", np.nan)),
                        "largest_train_mb_tn": float(largest.get("TN", np.nan)),
                        "mape_without_tn_over_256mb": kept["mape"], "p90_without_tn_over_256mb": kept["p90_ape"]})
        print(f"{gpu}: {time.perf_counter() - t0:.0f} s", flush=True)
    table, summ = pd.DataFrame(records), pd.DataFrame(summary)
    table.to_csv(RESULTS / "neusight_s2_shortfall.csv", index=False)
    text = [header("NeuSight GEMM S2: where cuBLAS's throughput falls with size",
                   "python experiments/neusight_s2_shortfall.py"),
            __doc__.split("\n\n")[1].replace("\n", " ") + "\n",
            "## Median achieved TFLOP/s of the runs over 1 ms, by layout and footprint (count below)\n",
            md_table(tput.reset_index()), "", md_table(count.reset_index()),
            "\n## Hybrid S2 errors (MAPE and P90 in %) on the test rows of each layout and footprint\n",
            "`largest_train_mb`: the largest footprint of that layout among the GPU's training rows "
            "(max(M, N, K) <= 512).\n", md_table(table),
            "\n## Hybrid S2 per GPU: each layout, and without the TN rows beyond 256 MB\n", md_table(summ),
            f"\n({time.perf_counter() - t0:.0f} s on this machine)"]
    atomic_write_text(RESULTS / "neusight_s2_shortfall.md", "\n".join(text) + "\n")
    print("\n".join(text))


if __name__ == "__main__":
    main()
