"""Accuracy targets of EVALUATION.md on the shipped real data, every baseline side by side.

Cases (each one `hybridperf.evaluation.evaluate.evaluate` run; the baselines share its features and split):
  neusight-s2   NeuSight GEMM/bmm per GPU: train max(M,N,K) <= 512, test larger (MAPE <= 10%, P90 <= 25%,
                hybrid <= 0.5 x the better of calibrated-analytical and boosting-only)
  aiwc-s2       AIWC/OpenDwarfs, NVIDIA GPUs with a spec: train tiny+small, test medium
  uci-s5        UCI SGEMM (GTX 680), 1% of configs measured, rank the rest (top-1 >= 0.97, top-5 >= 0.99,
                Spearman >= 0.95)
  clblast-s4    CLBlast Xgemm (kt-gemm-rtx): leave one RTX GPU out, 50 calibration runs of it in training
                (top-5 >= 0.97)
  intervals     coverage of nominal 80/90% intervals on S1 and S2 (target 85-95% for 90%)
Usage: python experiments/accuracy.py [case ...]   (default: all; results/accuracy_<case>.csv + accuracy.md)
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, error_vs_size_plot, header, md_table, scatter_plot  # noqa: E402

from hybridperf.datasets import load_dataset  # noqa: E402
from hybridperf.evaluation.evaluate import evaluate  # noqa: E402
from hybridperf.hardware import gpu_names  # noqa: E402

SPECS = set(gpu_names())


def _with_spec(df: pd.DataFrame) -> pd.DataFrame:
    return df[df.gpu.isin(SPECS)]


def neusight_s2() -> list[dict]:
    out = []
    data = _with_spec(load_dataset("neusight-gemm"))
    for gpu, df in data.groupby("gpu"):
        ev = evaluate(df, "S2", train_max_size=512)
        out += [{"case": "neusight-s2", "subset": gpu, "n_train": ev.n_train, **r} for r in ev.table.to_dict("records")]
        hyb = [c for c in ev.predictions.columns if c.startswith("hybrid")][0]
        p = ev.predictions.join(df.reset_index(drop=True)[["size.M", "size.N", "size.K"]])
        if gpu == "a100-pcie-40gb":
            scatter_plot(p["measured_ms"].to_numpy(), {"hybrid": p[hyb].to_numpy(), "boosting": p["boosting"].to_numpy()},
                         RESULTS / "neusight_a100_pred_vs_meas.png", "NeuSight GEMM/bmm, A100, S2 test (max dim > 512)")
            size = p[["size.M", "size.N", "size.K"]].max(axis=1).to_numpy()
            error_vs_size_plot(size, p["measured_ms"].to_numpy(), {"hybrid": p[hyb].to_numpy(),
                               "boosting": p["boosting"].to_numpy(), "calibrated roofline": p["calibrated:roofline"].to_numpy()},
                               512, RESULTS / "neusight_a100_error_vs_size.png", "NeuSight GEMM/bmm on A100: APE vs max(M,N,K)")
    return out


def aiwc_s2() -> list[dict]:
    data = _with_spec(load_dataset("aiwc-opendwarfs"))
    ev = evaluate(data, "S2", train_max_size=2)  # size.class: 1 tiny, 2 small, 3 medium
    return [{"case": "aiwc-s2", "subset": f"{data.gpu.nunique()} NVIDIA GPUs", "n_train": ev.n_train, **r}
            for r in ev.table.to_dict("records")]


def uci_s5() -> list[dict]:
    data = load_dataset("uci-sgemm-gtx680")
    ev = evaluate(data, "S5", budget_fraction=0.01, methods=["calibrated:roofline", "calibrated:mwp-cwp",
                                                               "boosting", "boosting+features", "hybrid"])
    return [{"case": "uci-s5", "subset": "1% measured", "n_train": ev.n_train, **r} for r in ev.table.to_dict("records")]


def clblast_s4() -> list[dict]:
    data = load_dataset("kt-gemm-rtx")
    out = []
    for gpu in sorted(data.gpu.unique()):
        ev = evaluate(data, "S4", holdout=gpu, calibration_runs=50,
                      methods=["calibrated:roofline", "calibrated:mwp-cwp", "boosting", "hybrid"])
        out += [{"case": "clblast-s4", "subset": f"held out {gpu}", "n_train": ev.n_train, **r}
                for r in ev.table.to_dict("records")]
    return out


def intervals() -> list[dict]:
    out = []
    data = _with_spec(load_dataset("neusight-gemm"))
    df = data[data.gpu == "tesla-t4"]
    for split, opts in (("S1", {}), ("S2", {"train_max_size": 512})):
        ev = evaluate(df, split, methods=["boosting", "hybrid"], **opts)
        out += [{"case": "intervals", "subset": f"neusight T4 {split}", "n_train": ev.n_train, **r}
                for r in ev.table.to_dict("records")]
    return out


CASES = {"neusight-s2": neusight_s2, "aiwc-s2": aiwc_s2, "uci-s5": uci_s5, "clblast-s4": clblast_s4,
         "intervals": intervals}


def main(argv: list[str]) -> None:
    names = argv or list(CASES)
    for name in names:
        t0 = time.perf_counter()
        rows = pd.DataFrame(CASES[name]())
        rows.to_csv(RESULTS / f"accuracy_{name}.csv", index=False)
        print(f"{name}: {time.perf_counter() - t0:.0f} s")
        print(rows[["subset", "method", "n", "mape", "median_ape", "p90_ape", "spearman", "top1", "top5"]
                   + [c for c in ("cover90",) if c in rows]].round(3).to_string())
    parts = [header("Accuracy on real recorded runs", "python experiments/accuracy.py"), __doc__ or ""]
    for name in CASES:
        path = RESULTS / f"accuracy_{name}.csv"
        if path.exists():
            t = pd.read_csv(path)
            cols = [c for c in ["subset", "method", "n_train", "n", "mape", "median_ape", "p90_ape", "spearman", "top1",
                                "top5", "cover80", "cover90", "seconds"] if c in t.columns]
            parts += [f"\n## {name}\n", md_table(t[cols])]
    (RESULTS / "accuracy.md").write_text("\n".join(parts) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
