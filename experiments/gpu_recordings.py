"""The product on the project's own GPU recordings (datasets/h200-cuda-bench, datasets/h100-cuda-bench).

Writes experiments/results/gpu_recordings.md and gpu_recordings_*.csv:
1. what was recorded, and the bandwidth the streaming kernels reached against the spec's peak;
2. each analytical model alone: median predicted/measured and the Spearman rank correlation over the
   configurations of each size (groups of at least 4 configurations), per kernel and GPU;
3. every baseline and the hybrid side by side on S1, S2 (each GPU) and S6 (each GPU held out, no runs);
4. a model trained on the seed-004 TITAN V times (as `make demo` does, and as the default model did
   until these recordings) predicting the recorded seed-004 rows: GPUs it never saw.

No GPU needed; about two minutes on two cores.
"""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import ConstantInputWarning, spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, header, md_table

from hybridperf.analytical.run import analyze
from hybridperf.datasets import load_dataset
from hybridperf.evaluation import evaluate
from hybridperf.hardware import load_gpu
from hybridperf.learn.model import train_model
from hybridperf.learn.predict import predict_rows
from hybridperf.sweep import param_columns, param_name, row_keys

COMMAND = ".venv/bin/python experiments/gpu_recordings.py"
RECORDED = {"h200": "h200-cuda-bench", "h100-sxm": "h100-cuda-bench"}
MODELS = ("mwp-cwp", "gpuperf", "roofline", "hierarchical")
SHOWN = ("analytical:hierarchical", "calibrated:hierarchical", "boosting", "boosting+features", "hybrid")


def _ok(gpu: str) -> pd.DataFrame:
    d = load_dataset(RECORDED[gpu])
    return d[d["status"] == "ok"].reset_index(drop=True)


def _analyze(gpu: str, part: pd.DataFrame) -> dict[str, np.ndarray]:
    cols = [c for c in param_columns(part) if part[c].notna().all()]
    params = part[cols].rename(columns=param_name).reset_index(drop=True)
    a = analyze(str(part["kernel"].iloc[0]), gpu, params, models=MODELS)
    return {m: a.terms[m]["time_ms"].to_numpy() for m in MODELS} | {
        "dram_ms": a.terms["hierarchical"]["dram_ms"].to_numpy(),
        "l2_hit": a.terms["hierarchical"]["l2_hit_ratio"].to_numpy()}


def recorded_summary() -> pd.DataFrame:
    rows = []
    for gpu, name in RECORDED.items():
        d = load_dataset(name)
        ok = d[d["status"] == "ok"].reset_index(drop=True)
        peak = load_gpu(gpu).dram_bandwidth_gbs
        for kernel in ("seed004-vecadd", "bench-reduction"):
            part = ok[ok["kernel"] == kernel].reset_index(drop=True)
            a = _analyze(gpu, part)
            big = a["l2_hit"] < 0.05
            achieved = a["dram_ms"][big] / part["time_ms"].to_numpy()[big] * peak
            rows.append({"gpu": gpu, "kernel": kernel, "rows ok": len(part),
                         "rows beyond L2": int(big.sum()), "spec peak GB/s": peak,
                         "best achieved GB/s": float(achieved.max()), "share of peak": float(achieved.max() / peak)})
    return pd.DataFrame(rows)


def analytical_alone() -> pd.DataFrame:
    rows = []
    for gpu in RECORDED:
        ok = _ok(gpu)
        for kernel, part in ok.groupby("kernel", sort=True):
            part = part.reset_index(drop=True)
            a = _analyze(gpu, part)
            meas = part["time_ms"].to_numpy()
            keys = row_keys(part, param_columns(part, "size."))
            row: dict[str, object] = {"gpu": gpu, "kernel": kernel, "rows": len(part)}
            groups = [keys == k for k in np.unique(keys) if (keys == k).sum() >= 4]
            row["config groups"] = len(groups)
            for m in MODELS:
                row[f"ratio {m}"] = float(np.median(a[m] / meas))
                rhos = [spearmanr(a[m][g], meas[g]).statistic for g in groups]
                row[f"rho {m}"] = float(np.nanmean(rhos)) if rhos else np.nan
            rows.append(row)
    return pd.DataFrame(rows)


def splits() -> pd.DataFrame:
    both = pd.concat([_ok(g) for g in RECORDED], ignore_index=True)
    runs = [("S6", g, both, {"holdout": g}) for g in RECORDED]
    runs += [(s, g, _ok(g), {}) for s in ("S1", "S2") for g in RECORDED]
    out = []
    for split, gpu, data, opts in runs:
        ev = evaluate(data, split, **opts)
        t = ev.table[ev.table["method"].str.split(" ").str[0].isin(SHOWN)].copy()
        t["method"] = t["method"].str.split(" ").str[0]
        t.insert(0, "split", f"{split} {'held out ' if split == 'S6' else ''}{gpu}")
        t["n_train"] = ev.n_train
        out.append(t)
        print(f"{split} {gpu}: {ev.n_train} train, {ev.n_test} test", flush=True)
    return pd.concat(out, ignore_index=True)


def titanv_model() -> pd.DataFrame:
    model = train_model(load_dataset("titanv-seed004"))  # what `make demo` trains; the default model did too
    rows = []
    for gpu in RECORDED:
        ok = _ok(gpu)
        part = ok[ok["kernel"].str.startswith("seed004-")].dropna(axis=1, how="all").reset_index(drop=True)
        pred = predict_rows(model, part)
        p, lo, hi = (pred[c].to_numpy() for c in ("time_ms", "lo_ms", "hi_ms"))
        meas = part["time_ms"].to_numpy()
        inside = (meas >= lo) & (meas <= hi)
        for kernel in sorted(part["kernel"].unique()):
            m = (part["kernel"] == kernel).to_numpy()
            rows.append({"gpu": gpu, "kernel": kernel, "rows": int(m.sum()),
                         "mape %": float(np.mean(np.abs(p[m] / meas[m] - 1)) * 100),
                         "median pred/meas": float(np.median(p[m] / meas[m])),
                         "cover90 %": float(inside[m].mean() * 100),
                         "median hi/lo": float(np.median(hi[m] / lo[m])),
                         "flagged %": float(pred["out_of_domain"].to_numpy()[m].mean() * 100),
                         "reason (first row)": str(pred["ood_reason"].iloc[np.flatnonzero(m)[0]])})
    return pd.DataFrame(rows)


def main() -> None:
    warnings.simplefilter("ignore", category=FutureWarning)
    warnings.simplefilter("ignore", category=ConstantInputWarning)  # a model that ties a group: rho NaN
    rec = recorded_summary()
    alone = analytical_alone()
    sp = splits()
    dm = titanv_model()
    for name, df in (("summary", rec), ("analytical", alone), ("splits", sp), ("titanv_model", dm)):
        df.to_csv(RESULTS / f"gpu_recordings_{name}.csv", index=False)
    hier_ok = alone.dropna(subset=["rho hierarchical"])
    text = [
        header("The product on its own GPU recordings (H200, H100 SXM)", COMMAND),
        "Data: `datasets/h200-cuda-bench` and `datasets/h100-cuda-bench`, recorded with "
        "`experiments/record_gpu.sh` (931 ok rows per GPU, eight kernels). No model was fitted to them "
        "before this run.\n",
        "## 1. Streaming bandwidth reached, against the spec's peak\n",
        md_table(rec, ".4g"),
        "\n## 2. Each analytical model alone (uncalibrated)\n",
        "ratio: median predicted/measured over all ok rows; rho: mean over sizes of the Spearman correlation "
        "across that size's configurations (sizes with at least 4). Target (issue 11): the best model >= 0.6 "
        f"on each sweep. The hierarchical roofline reaches it on {int((hier_ok['rho hierarchical'] >= 0.6).sum())}"
        f" of {len(hier_ok)} (kernel, GPU) sweeps with configuration groups.\n",
        md_table(alone, ".3g"),
        "\n## 3. Baselines and the hybrid on the recorded data\n",
        "S1: random held-out configurations; S2: sizes above a quarter of the largest held out; S6: one GPU "
        "held out with no runs on it (trained on the other alone). MAPE and P90 in %; cover90/80: % inside "
        "the nominal intervals (hybrid and boosting).\n",
        md_table(sp[["split", "method", "n", "n_train", "mape", "p90_ape", "median_ape", "spearman", "top1",
                     "cover90", "cover80", "hilo90"]], ".3g"),
        "\n## 4. A model trained on the seed-004 TITAN V times, on GPUs it never saw\n",
        "`hybridperf train titanv-seed004` (what `make demo` does; the default model also learned the seed-004 "
        "kernels from these times until it was retrained on the recordings). The TITAN V times lead to "
        f"predictions {dm['median pred/meas'].min():.0f}-{dm['median pred/meas'].max():.0f}x longer (medians per "
        "kernel and GPU) than a kernel-only time on these GPUs (see the table; 19-660x before a GPU with no runs "
        "was predicted from the hierarchical roofline), which a "
        "TITAN V's 653 GB/s cannot explain (vecadd of 1e7 floats moves 120 MB: 0.18 ms at peak, the report "
        "gives 24.5 ms), so they most likely include host-device copies. Every row is flagged out of domain "
        "(a GPU never trained for the kernel). Trained on one GPU, the model has no measure of a GPU shift, so "
        "its interval is unbounded (hi/lo shown as -); it was a 1.36 hi/lo band that covered none of these "
        "rows before. Likewise the hybrid's S6 intervals above (one training GPU): unbounded, where the "
        "widest training bin gave 75.9 % (H200) and 84.1 % (H100) at hi/lo 1.8.\n",
        md_table(dm, ".3g"),
    ]
    (RESULTS / "gpu_recordings.md").write_text("\n".join(text) + "\n", encoding="utf-8")
    print((RESULTS / "gpu_recordings.md").read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
