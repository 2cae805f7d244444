"""Streaming memory of `rank` on a 10^7-configuration space (run by experiments/ranking.py --memory).

Each run is a fresh process, so the peaks do not mix.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from hybridperf.analytical.run import analyze
from hybridperf.kernel import load_kernel

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "results"
SYNTHETIC = ROOT / "tests" / "search" / "synthetic-10m.toml"


_CHILD = """
import json, resource, sys, time
sys.path.insert(0, {root!r})
from hybridperf.search.rank import rank_configs
import hybridperf.analytical.run, hybridperf.search.pareto  # imports done before the baseline
from hybridperf.learn.model import load_model
model = load_model({model!r}) if {model!r} else None
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
r = rank_configs(model, {desc!r}, "titan-v", {{"N": 4096}}, space_overrides={space!r}, chunk_rows={chunk},
                 screen_bandwidth=True, prune={prune!r}, top_k={top_k!r})
sec = time.perf_counter() - t
print(json.dumps({{"prune": {prune!r}, "model": model is not None, "top_k": r.top_k, "space": r.space_size,
                  "chunk_rows": {chunk}, "seconds": sec,
                  "rss_growth_mib": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024,
                  "configs_per_s": r.space_size / sec, "front": r.n_pareto, "kept": len(r.candidates),
                  "feasible": r.n_feasible}}))
"""


def _bench_model(path: Path) -> str:
    """A small model of the synthetic kernel (made-up times: MWP-CWP x a smooth factor), for the union runs."""
    from hybridperf.learn.model import train_model
    from hybridperf.search.chunks import config_rows

    k = load_kernel(str(SYNTHETIC))
    rng = np.random.default_rng(0)
    cfg = pd.DataFrame({p.name: rng.choice(np.asarray(p.values, dtype=np.float64), 3000) for p in k.config})
    a = analyze(k, "titan-v", cfg.assign(N=4096.0), models=["mwp-cwp"])
    cfg = cfg.loc[a.feasible].reset_index(drop=True)
    rows = config_rows(str(SYNTHETIC), "titan-v", {"N": 4096.0}, cfg, list(k.config_names))
    t = a.terms["mwp-cwp"]["time_ms"].to_numpy()[a.feasible] * np.exp(0.3 * np.sin(cfg["BX"].to_numpy()))
    rows = rows.assign(time_ms=t, status="ok")
    train_model(rows.head(400), booster_params={"n_estimators": 40, "n_jobs": 1}).save(path)
    return str(path)


def memory_bench() -> pd.DataFrame:
    ten = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    spaces = {"1e5": {"TX": ten[:5], "TY": ten[:5], "U": ten[:5], "V": [1, 2], "PAD": [0, 1, 2, 3]},
              "1e6": {"U": ten[:5], "V": [1, 2], "PAD": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]},
              "1e7": {}}
    recs = []
    with tempfile.TemporaryDirectory() as tmp:
        model = _bench_model(Path(tmp) / "model.json")
        runs = [("ryoo", None, None, label, chunk) for label, chunk in (
            ("1e5", 200_000), ("1e6", 200_000), ("1e7", 200_000), ("1e7", 50_000), ("1e7", 1_000_000))]
        runs += [("union", None, None, "1e6", 200_000), ("union", None, None, "1e7", 200_000),
                 ("union", model, 1000, "1e5", 50_000), ("union", model, 1000, "1e6", 50_000),
                 ("union", model, 1000, "1e6", 200_000), ("union", model, None, "1e6", 200_000)]
        for prune, path, top_k, label, chunk in runs:
            code = _CHILD.format(root=str(ROOT), desc=str(SYNTHETIC), space=spaces[label], chunk=chunk, prune=prune,
                                 model=path, top_k=top_k)
            res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
            recs.append(json.loads(res.stdout.strip().splitlines()[-1]))
            print(f"  memory {prune} {label} chunk {chunk}: {recs[-1]}", file=sys.stderr)
    return pd.DataFrame(recs)


def write_memory(mem: pd.DataFrame, fmt: Callable[[pd.DataFrame], str]) -> None:
    """Write ranking_memory.md/.csv."""
    mem.to_csv(OUT / "ranking_memory.csv", index=False)
    (OUT / "ranking_memory.md").write_text(
        "# Streaming a 10^7-configuration space: memory\n\n"
        "`rank_configs(model, tests/search/synthetic-10m.toml, titan-v, N=4096, screen_bandwidth=True, prune=..., "
        "top_k=...)` on sub-spaces of 10^5 and 10^6 configurations and the whole 10^7, each run in a fresh process "
        "(`resource.getrusage` peak RSS minus the RSS after imports). `ryoo`: Ryoo's two-metric front, no model. "
        "`union` without a model: the front over Ryoo's metrics and the four analytical times (what the default "
        "does without a model). `union` with a model (a small model of made-up times, trained on 400 "
        "configurations, only to exercise the code path): every feasible configuration is predicted and the "
        "front over Ryoo's metrics and the predicted time is kept with the top-k (`top_k` = the resolved k; the "
        "last run is the default, which fills the shortlist to 10% of the feasible). Peak "
        "memory follows the chunk size (and, with a model, the feature matrix of one chunk), plus the shortlist; "
        "not the space size. Wall times are on this 2-core machine, shared with other jobs.\n\n" + fmt(mem),
        encoding="utf-8")
