"""Why a Kernel Tuner cache is hard for the measure-next loop (issue 17): what each cache's landscape and prior say.

    .venv/bin/python experiments/loop_shortfall.py    # writes experiments/results/loop_shortfall.md (~1 min)

Per cache (the 10 recorded Kernel Tuner caches of experiments/tuner_vs_kernel_tuner.py), measured from the data:
- how narrow the target is: configurations within 1%, 5%, 15% of the optimum;
- the noise floor: the spread of the recorded repeats (interquartile range / median, from the raw cache's
  ``times``) of the 10 fastest configurations, beside the gap between the optimum and the second fastest;
- how isolated the optimum is: its fastest one-parameter neighbour (the trust region of hybridperf's loop and the
  neighbourhood of Kernel Tuner's local searches), as a multiple of the optimum;
- what the transfer prior (the other GPUs' sweeps, as the loop uses it) makes of it: the optimum's rank, the
  rank of the first configuration within 15%, and the fraction of the optimum among the prior's best 20;
- where the fast configurations lie: the parameter values shared by every configuration within 1.25x of the
  optimum, and how many of the prior's best 20 take those values.
"""
from __future__ import annotations

import gzip
import json
import statistics
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))

from _common import RESULTS, SHARED, header, md_table
from _kt_sim import CACHES

from hybridperf.datasets import load_dataset
from hybridperf.search.local import hamming_neighbours
from hybridperf.search.measure_next import replay_pool, replay_prior


FAST = 1.25  # "fast": within this factor of the optimum


def _repeat_spread(path: Path, configs: list[tuple[float, ...]]) -> float:
    """Median over ``configs`` of the interquartile range of their recorded repeats divided by their median."""
    with gzip.open(path, "rt") as fh:
        data = json.load(fh)
    out = []
    for key, entry in data["cache"].items():
        vals = tuple(float(v) for v in key.split(","))
        if vals in configs and entry.get("times"):
            q = np.percentile(entry["times"], [25, 75])
            out.append(float((q[1] - q[0]) / statistics.median(entry["times"])))
    return float(np.median(out)) if out else float("nan")


def _shared_values(rows: pd.DataFrame, mask: np.ndarray, cols: list[str]) -> dict[str, float]:
    """Config parameters that take one value on every row of ``mask`` (and vary over the space)."""
    return {c: float(rows.loc[mask, c].iloc[0]) for c in cols
            if rows.loc[mask, c].nunique() == 1 and rows[c].nunique() > 1}


def cache_row(sweep: pd.DataFrame, dataset: str, gpu: str, raw: Path) -> dict[str, object]:
    kernel = str(sweep.loc[sweep["gpu"] == gpu, "kernel"].iloc[0])
    pool = replay_pool(sweep, kernel, gpu)
    rows = pool.rows
    t = np.where(rows["status"].astype(str).eq("ok"), pd.to_numeric(rows["time_ms"], errors="coerce"), np.nan)
    rel = t / np.nanmin(t)
    best = int(np.nanargmin(t))
    cand = np.flatnonzero(np.isfinite(t))
    near = cand[hamming_neighbours(pool.coords, best, cand)]
    prior = replay_prior(sweep, pool, "transfer")
    score = np.where(np.isfinite(prior.log_time) & np.isfinite(t), prior.log_time, np.inf)
    order = np.argsort(score, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(1, len(order) + 1)
    cols = [c for c in rows.columns if c.startswith("config.")]
    top10 = np.argsort(np.where(np.isfinite(t), t, np.inf))[:10]
    names = json.loads(gzip.open(raw, "rt").read())["tune_params_keys"]
    keys = [tuple(float(rows.loc[i, f"config.{n}"]) if f"config.{n}" in rows.columns else float("nan")
                  for n in names) for i in top10]
    fast = rel <= FAST
    shared = _shared_values(rows, fast, cols)
    prior_top = order[:20]
    agree = float(np.mean([all(rows.loc[i, c] == v for c, v in shared.items()) for i in prior_top])) if shared \
        else float("nan")
    second = np.sort(t[np.isfinite(t)])[1] / np.nanmin(t)
    return {"cache": f"{dataset}/{gpu}", "configs ran": int(np.isfinite(t).sum()),
            "within 1% / 5% / 15%": f"{int((rel <= 1.01).sum())} / {int((rel <= 1.05).sum())} / "
                                    f"{int((rel <= 1.15).sum())}",
            "2nd fastest / optimum": f"{second:.4f}",
            "repeat IQR / median (top 10)": round(_repeat_spread(raw, keys), 4),
            "best neighbour / optimum": round(float(np.nanmin(rel[near])), 3) if near.size else float("nan"),
            "prior rank of optimum": int(rank[best]),
            "prior rank of first within 15%": int(rank[rel <= 1.15].min()),
            "fraction among prior's best 20": round(float(1 / np.nanmin(rel[prior_top])), 3),
            f"shared by all within {FAST}x": ", ".join(f"{c[7:]}={v:g}" for c, v in shared.items()) or "-",
            "prior's best 20 with those values": round(agree, 2) if np.isfinite(agree) else "-"}


def main() -> int:
    sweeps = {ds: load_dataset(ds) for ds in dict.fromkeys(c[0] for c in CACHES)}
    table = pd.DataFrame([cache_row(sweeps[ds], ds, gpu, SHARED / rel) for ds, gpu, rel in CACHES])
    text = header("Why a cache is hard for the measure-next loop", "python experiments/loop_shortfall.py")
    text += ("\nData: the 10 Kernel Tuner caches of `experiments/tuner_vs_kernel_tuner.py` (hybridperf datasets, "
             "time = median of the recorded repeats; repeats from the raw caches under shared/data/raw). The "
             "prior is the loop's transfer prior (`replay_prior(sweep, pool, 'transfer')`: the kernel's sweeps "
             "on the other GPUs, never the cache's own). Ranks count from 1 over the configurations that ran. "
             "'best neighbour': the fastest configuration one parameter away from the optimum (any value), "
             f"as a multiple of the optimum. 'shared by all within {FAST}x': parameter values every "
             f"configuration within {FAST}x of the optimum has; the last column is the share of the prior's best "
             "20 that have them all.\n\n" + md_table(table) + "\n")
    (RESULTS / "loop_shortfall.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
