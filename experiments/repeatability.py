"""How well a recorded time repeats: the same configurations timed again, and what that means for intervals.

Data: datasets/h200-cuda-repeat (recorded 2026-11-30 on an H200 of this workplace: `sweep.parquet` = pass 1 of
experiments/record_gpu.sh (NCU=0) and of experiments/record_holdout.sh (BEYOND=0); `pass2.parquet` =
record_gpu.sh again on the same machine minutes later), against datasets/h200-cuda-bench (the same
configurations, an earlier H200 of this workplace) and datasets/h200-cuda-holdout (another H200, 2026-11-27).

1. Agreement of each pair of recordings on the configurations both hold: median ratio, median and P90
   |log ratio|, shares off by over 5 % and 10 %, per time band (with the median difference in microseconds).
2. Whether a row's own spread (the recorder's time_std_ms / time_ms over its launches) says how well it repeats.
3. The shipped default model (trained on h200-cuda-bench) against fresh measurements of the configurations it
   was trained on, and of the hold-out's: coverage of its nominal 90 % / 80 % intervals and MAPE, per time band;
   and the floor: the MAPE of pass 1 taken as the prediction of pass 2.
Writes experiments/results/repeatability.md and .csv. No GPU needed; about a minute on two cores.
"""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, ROOT, header, md_table

from hybridperf.datasets import load_dataset
from hybridperf.learn.model import load_model
from hybridperf.learn.predict import predict_rows
from hybridperf.sweep import configuration_key
from hybridperf.sweepfile import read_sweep

COMMAND = ".venv/bin/python experiments/repeatability.py"
BANDS = [0, 0.02, 0.05, 0.1, 0.3, 1, 10, np.inf]  # ms


def _ok(d: pd.DataFrame) -> pd.DataFrame:
    return d[d["status"] == "ok"].dropna(axis=1, how="all").reset_index(drop=True)


def _keyed(d: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    x = d.reindex(columns=cols + ["time_ms", "time_std_ms"]).assign(row=np.arange(len(d)))
    for c in cols[2:]:
        x[c] = pd.to_numeric(x[c], errors="coerce").fillna(-1.0)
    return x


def _pairs(first: pd.DataFrame, second: pd.DataFrame) -> pd.DataFrame:
    """The configurations both recordings hold: time_ms_x (first), time_ms_y (second), the first's spread, and
    row_x / row_y (each row's position in its recording)."""
    cols = configuration_key(pd.concat([first.iloc[:0], second.iloc[:0]]))
    return _keyed(first, cols).merge(_keyed(second, cols), on=cols, suffixes=("_x", "_y"))


def _band(t: pd.Series) -> pd.Series:
    labels = [f"{lo:g}-{hi:g}" if np.isfinite(hi) else f"> {lo:g}" for lo, hi in zip(BANDS[:-1], BANDS[1:])]
    return pd.cut(t, BANDS, right=True, labels=labels)


def agreement(name: str, m: pd.DataFrame) -> pd.DataFrame:
    lr = np.log(m["time_ms_y"] / m["time_ms_x"])
    d = pd.DataFrame({"band": _band(m["time_ms_x"]), "lr": lr, "us": (m["time_ms_y"] - m["time_ms_x"]) * 1e3})
    out = []
    for band, g in [("all", d)] + list(d.groupby("band", observed=True)):
        a = g["lr"].abs()
        out.append({"pair": name, "time band (ms)": band, "n": len(g), "median ratio": float(np.exp(g["lr"].median())),
                    "median diff (us)": float(g["us"].median()), "median |log|": float(a.median()),
                    "P90 |log|": float(a.quantile(0.9)), "> 5 %": float((a > np.log(1.05)).mean() * 100),
                    "> 10 %": float((a > np.log(1.10)).mean() * 100)})
    return pd.DataFrame(out)


def spread_says(m: pd.DataFrame) -> pd.DataFrame:
    cv = m["time_std_ms_x"] / m["time_ms_x"]
    a = np.abs(np.log(m["time_ms_y"] / m["time_ms_x"]))
    q = pd.qcut(cv, 5)
    g = pd.DataFrame({"q": q, "cv": cv, "a": a}).groupby("q", observed=True)
    return pd.DataFrame({"own spread (CV) quintile": [f"{i.left:.4f}-{i.right:.4f}" for i in g.groups],
                         "n": g.size().to_numpy(), "median |log| to the repeat": g["a"].median().to_numpy(),
                         "P90 |log|": g["a"].quantile(0.9).to_numpy()})


def coverage(name: str, rows: pd.DataFrame, model) -> pd.DataFrame:
    p90, p80 = predict_rows(model, rows, 0.9), predict_rows(model, rows, 0.8)
    t = rows["time_ms"].to_numpy()
    d = pd.DataFrame({"band": _band(rows["time_ms"]), "ape": np.abs(p90["time_ms"].to_numpy() / t - 1) * 100,
                      "c90": (t >= p90["lo_ms"].to_numpy()) & (t <= p90["hi_ms"].to_numpy()),
                      "c80": (t >= p80["lo_ms"].to_numpy()) & (t <= p80["hi_ms"].to_numpy()),
                      "hilo": p90["hi_ms"].to_numpy() / p90["lo_ms"].to_numpy()})
    out = []
    for band, g in [("all", d)] + list(d.groupby("band", observed=True)):
        out.append({"measured": name, "time band (ms)": band, "n": len(g), "MAPE": g["ape"].mean(),
                    "cover90": g["c90"].mean() * 100, "cover80": g["c80"].mean() * 100,
                    "median hi/lo 90": g["hilo"].median()})
    return pd.DataFrame(out)


def main() -> None:
    warnings.simplefilter("ignore", category=FutureWarning)
    bench = _ok(load_dataset("h200-cuda-bench"))
    holdout = _ok(load_dataset("h200-cuda-holdout"))
    repeat = _ok(load_dataset("h200-cuda-repeat"))
    pass2 = _ok(read_sweep(ROOT / "datasets" / "h200-cuda-repeat" / "pass2.parquet"))
    largest = bench.groupby("kernel")["size.N"].max()
    between = repeat["size.N"].to_numpy() <= repeat["kernel"].map(largest).to_numpy()
    pairs = {"h200-cuda-bench -> pass 1 (another machine, days apart)": _pairs(bench, repeat),
             "pass 1 -> pass 2 (same machine, minutes apart)": _pairs(repeat, pass2),
             "h200-cuda-holdout -> pass 1 (another machine, 3 days apart)": _pairs(holdout, repeat)}
    agree = pd.concat([agreement(k, m) for k, m in pairs.items()], ignore_index=True)
    spread = spread_says(pairs["pass 1 -> pass 2 (same machine, minutes apart)"])
    model = load_model(ROOT / "models" / "default.json")
    seen = np.isin(np.arange(len(repeat)), _pairs(repeat, bench)["row_x"])
    same_configs = repeat[seen].reset_index(drop=True)
    holdout_between = holdout[holdout["size.N"].to_numpy() <= holdout["kernel"].map(largest).to_numpy()]
    cover = pd.concat([
        coverage("h200-cuda-bench (its training rows)", bench, model),
        coverage("pass 1, the training configurations", same_configs, model),
        coverage("pass 2, the training configurations", pass2, model),
        coverage("h200-cuda-holdout, between or below the trained sizes", holdout_between.reset_index(drop=True),
                 model),
        coverage("pass 1, the hold-out's configurations between or below",
                 repeat[between & ~seen].reset_index(drop=True), model)], ignore_index=True)
    m = pairs["pass 1 -> pass 2 (same machine, minutes apart)"]
    floor = float(np.mean(np.abs(m["time_ms_x"] / m["time_ms_y"] - 1)) * 100)
    floor_a = float(np.mean(np.abs(pairs["h200-cuda-bench -> pass 1 (another machine, days apart)"].eval(
        "time_ms_x / time_ms_y") - 1)) * 100)
    agree.assign(table="agreement").to_csv(RESULTS / "repeatability.csv", index=False)
    text = [
        header("How well a recorded time repeats (H200)", COMMAND),
        f"Data: `datasets/h200-cuda-repeat` ({len(repeat)} ok rows in pass 1, {len(pass2)} in pass 2), "
        f"`datasets/h200-cuda-bench` ({len(bench)}), `datasets/h200-cuda-holdout` ({len(holdout)}). Each row is the "
        "median of 5-50 timed launches (CV target 0.02, 10 s cap): docs/record.md.\n",
        "## 1. Agreement of two recordings of the same configurations\n",
        "ratio = second / first; |log| = |log(second / first)|; diff = second - first in microseconds.\n",
        md_table(agree, ".3g"),
        "\n## 2. Does a row's own spread say how well it repeats? (pass 1 -> pass 2)\n",
        md_table(spread, ".3g"),
        "\n## 3. The default model's intervals against fresh measurements\n",
        "`models/default.json` (trained on h200-cuda-bench, h100-cuda-bench and NeuSight GEMM). The floor: pass 1 "
        f"taken as the prediction of pass 2 has a MAPE of {floor:.2f} %; h200-cuda-bench as the prediction of pass "
        f"1, {floor_a:.2f} %.\n",
        md_table(cover, ".3g"),
    ]
    (RESULTS / "repeatability.md").write_text("\n".join(text) + "\n", encoding="utf-8")
    print((RESULTS / "repeatability.md").read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
