"""Fresh GPU runs no model saw: the shipped kernels at sizes the shipped recordings never had.

Data: datasets/h200-cuda-holdout and datasets/h100-cuda-holdout, recorded with
experiments/record_holdout.sh: every kernel's whole configuration space at sizes between the sizes of
datasets/<gpu>-cuda-bench and beyond its largest (x1.5 to x2). Each GPU's hold-out is predicted, side by
side, by:
- the shipped default model (models/default.json: trained on both recordings and NeuSight GEMM);
- a model trained on the same GPU's recording alone (new sizes);
- a model trained on the other GPU's recording alone (this GPU never seen: its spec only);
- the hierarchical roofline alone (the analytical baseline, uncalibrated).
Per kernel and position (between the recorded sizes, or beyond the largest): MAPE, median and P90
APE, coverage of the nominal 90 % and 80 % intervals, their median hi/lo, the share flagged out
of domain, and top-1 (optimum / measured time of the configuration predicted fastest, averaged
over sizes). Writes experiments/results/holdout_check.md and .csv. No GPU needed; about two
minutes on two cores.
"""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, header, md_table

from hybridperf.analytical.run import analyze
from hybridperf.datasets import load_dataset
from hybridperf.learn.model import load_model, train_model
from hybridperf.learn.predict import predict_rows
from hybridperf.sweep import param_columns, param_name

COMMAND = ".venv/bin/python experiments/holdout_check.py"
ROOT = Path(__file__).resolve().parents[1]
# GPU -> (hold-out, the GPU's own recording, the other GPU's recording)
HOLDOUTS = {"h200": ("h200-cuda-holdout", "h200-cuda-bench", "h100-cuda-bench"),
            "h100-sxm": ("h100-cuda-holdout", "h100-cuda-bench", "h200-cuda-bench")}


def _ok(name: str) -> pd.DataFrame:
    d = load_dataset(name)
    return d[d["status"] == "ok"].dropna(axis=1, how="all").reset_index(drop=True)


def _hierarchical(rows: pd.DataFrame) -> np.ndarray:
    out = np.full(len(rows), np.nan)
    for (kernel, gpu), part in rows.groupby(["kernel", "gpu"]):
        cols = [c for c in param_columns(part) if part[c].notna().all()]
        params = part[cols].rename(columns=param_name).reset_index(drop=True)
        a = analyze(str(kernel), str(gpu), params, models=("hierarchical",))
        out[part.index.to_numpy()] = a.terms["hierarchical"]["time_ms"].to_numpy()
    return out


def _predictions(rows: pd.DataFrame, own: str, other: str) -> dict[str, pd.DataFrame]:
    """method -> frame of time_ms, lo90, hi90, lo80, hi80, flagged (NaN where the method has none)."""
    models = {"default model": load_model(ROOT / "models" / "default.json"),
              "trained on this GPU alone": train_model(_ok(own)),
              "trained on the other GPU alone": train_model(_ok(other))}
    out = {}
    for name, model in models.items():
        p90 = predict_rows(model, rows, 0.9)
        p80 = predict_rows(model, rows, 0.8)
        out[name] = pd.DataFrame({"time_ms": p90["time_ms"], "lo90": p90["lo_ms"], "hi90": p90["hi_ms"],
                                  "lo80": p80["lo_ms"], "hi80": p80["hi_ms"],
                                  "flagged": p90["out_of_domain"].astype(float), "gap": p90["ood_size_gap"],
                                  "reason": p90["ood_reason"]})
        print(f"{name}: predicted", flush=True)
    nan = np.full(len(rows), np.nan)
    out["analytical:hierarchical"] = pd.DataFrame({"time_ms": _hierarchical(rows), "lo90": nan, "hi90": nan,
                                                   "lo80": nan, "hi80": nan, "flagged": nan, "gap": nan, "reason": ""})
    return out


def _top1(rows: pd.DataFrame, pred: np.ndarray) -> float:
    scores = []
    for _, g in rows.assign(pred=pred).groupby(["kernel", "size.N"]):
        if len(g) >= 4:
            scores.append(g["time_ms"].min() / g["time_ms"].iloc[int(np.argmin(g["pred"].to_numpy()))])
    return float(np.mean(scores)) if scores else np.nan


def _score(rows: pd.DataFrame, p: pd.DataFrame) -> dict[str, float]:
    meas = rows["time_ms"].to_numpy()
    ape = np.abs(p["time_ms"].to_numpy() / meas - 1) * 100
    cover = {lvl: float(np.mean((meas >= p[f"lo{lvl}"]) & (meas <= p[f"hi{lvl}"])) * 100)
             if p[f"lo{lvl}"].notna().any() else np.nan for lvl in (90, 80)}
    hilo = (p["hi90"] / p["lo90"]).to_numpy()
    return {"n": len(rows), "mape": float(np.mean(ape)), "median_ape": float(np.median(ape)),
            "p90_ape": float(np.percentile(ape, 90)), "cover90": cover[90], "cover80": cover[80],
            "hilo90": float(np.median(hilo)) if np.isfinite(hilo).any() else np.nan,
            "flagged %": float(p["flagged"].mean() * 100), "top1": _top1(rows, p["time_ms"].to_numpy())}


def mb_traffic() -> pd.DataFrame:
    """bench-mb's load traffic as its descriptor counts it (every load from DRAM: N x ITERS x LOADS x 4 B
    coalesced, 32 B uncoalesced) per measured millisecond, on the recordings and the hold-outs, per GPU."""
    d = pd.concat([_ok(n) for names in HOLDOUTS.values() for n in names[:2]], ignore_index=True)
    d = d[(d["kernel"] == "bench-mb") & (d["config.LOADS"] > 0)]
    iters = d["size.ITERS"].fillna(1000) if "size.ITERS" in d else 1000
    gbs = d["size.N"] * iters * d["config.LOADS"] * np.where(d["config.COALESCED"] == 1, 4, 32) / d["time_ms"] / 1e6
    t = d.assign(gbs=gbs).groupby(["gpu", "config.COALESCED", "size.N"])["gbs"].agg(["median", "max"]).reset_index()
    return t.rename(columns={"config.COALESCED": "coalesced", "size.N": "N", "median": "median GB/s",
                             "max": "max GB/s"})


def main() -> None:
    warnings.simplefilter("ignore", category=FutureWarning)
    tables, described = [], []
    for gpu, (holdout, own, other) in HOLDOUTS.items():
        rows = _ok(holdout)
        largest = _ok(own).groupby("kernel")["size.N"].max()
        rows["position"] = np.where(rows["size.N"].to_numpy() > rows["kernel"].map(largest).to_numpy(),
                                    "beyond", "between")
        for method, p in _predictions(rows, own, other).items():
            parts = [("all", "all", np.ones(len(rows), bool))]
            parts += [("all", pos, (rows["position"] == pos).to_numpy()) for pos in ("between", "beyond")]
            parts += [("all but bench-mb", "beyond",
                       ((rows["position"] == "beyond") & (rows["kernel"] != "bench-mb")).to_numpy())]
            if p["gap"].notna().any():
                parts += [("all", "between, gap > 1", (p["gap"] > 1).to_numpy())]
            parts += [(k, "all", (rows["kernel"] == k).to_numpy()) for k in sorted(rows["kernel"].unique())]
            for kernel, pos, m in parts:
                r, q = rows[m].reset_index(drop=True), p[m].reset_index(drop=True)
                tables.append({"gpu": gpu, "method": method, "kernel": kernel, "sizes": pos} | _score(r, q))
        described.append(f"`datasets/{holdout}` ({len(rows)} ok rows: "
                         f"{int((rows['position'] == 'between').sum())} between or below the recorded sizes, "
                         f"{int((rows['position'] == 'beyond').sum())} beyond the largest)")
    table = pd.DataFrame(tables)
    table.to_csv(RESULTS / "holdout_check.csv", index=False)
    sizes = rows.groupby("kernel")["size.N"].unique().map(lambda v: ", ".join(f"{x:.4g}" for x in sorted(v)))
    text = [
        header("Fresh H200 and H100 runs at sizes no model saw", COMMAND),
        "Data: " + " and ".join(described) + ". Sizes per kernel (both GPUs): "
        + "; ".join(f"{k} N = {v}" for k, v in sizes.items()) + ".\n",
        "MAPE, median and P90 APE in %; cover90/80: % of measured times inside the nominal 90 % / 80 % "
        "intervals; hilo90: median hi/lo of the 90 % interval; flagged: % out of domain; top1: optimum / "
        "measured time of the predicted-fastest configuration, mean over (kernel, size) with >= 4 configurations.\n",
        md_table(table, ".3g"),
        "\nRows `between, gap > 1`: the rows whose size no training row of the model had, inside its trained range "
        "(`ood_size_gap` > 1; named a reason from 1.25x, their intervals keep the in-domain width: see "
        "`hybridperf.learn.intervals.ConformalIntervals`).\n",
        "\n## bench-mb beyond 2^20 threads: outside its own design\n",
        "The micro-benchmark's descriptor counts every load from DRAM: its addresses advance by one grid-sized "
        "slice per load and wrap in a 2^26-float buffer (`hybridperf/kernels/cuda/mb.cu`). Uncoalesced (lanes "
        "128 B apart) at N = 2^21 the slice is N x 32 = 2^26 floats, so every load of a thread reads the same "
        "address; coalesced, the slices a wave of resident threads cycles through fit L2. The load traffic the "
        "descriptor counts, per measured ms, exceeds the DRAM peak (H200 4,800 GB/s, H100 3,350 GB/s) from 2^20 "
        "on (below): those "
        "loads hit in cache, which no count of the descriptor says. So the bench-mb rows at 2^21 measure a "
        "different kernel from the one described; the errors above at 2^21 (predicted 1.2-3x too slow) are "
        "the descriptor's, not the extrapolation's.\n",
        md_table(mb_traffic(), ".4g"),
    ]
    (RESULTS / "holdout_check.md").write_text("\n".join(text) + "\n", encoding="utf-8")
    print((RESULTS / "holdout_check.md").read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
