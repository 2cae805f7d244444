"""Replay speed of the measure-next loop (issue 17): 10 seeds x 2 strategies x 50 runs per Kernel Tuner cache.

    .venv/bin/python experiments/loop_speed.py        # writes experiments/results/loop_speed.md (~5 min, 2 cores)

Per cache: the features (once per cache, shared by every seed and refit), the transfer prior (once per cache),
and the 20 replays (10 seeds of the model loop and of random order, budget 50) with 1 and 2 threads, as wall
time and as CPU time of the process (the machine is shared: wall time includes other jobs' load, CPU time
does not).
"""
from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))

from _common import RESULTS, header, md_table
from _kt_sim import CACHES

from hybridperf.datasets import load_dataset
from hybridperf.search.measure_next import replay, replay_pool, replay_prior

SEEDS, BUDGET = 10, 50


def _timed(fn):  # noqa: ANN001, ANN202 - a tiny local helper
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def _replays(sweep, kernel, gpu, pool, prior, n_jobs):  # noqa: ANN001, ANN202
    jobs = [(st, s) for st in ("model", "random") for s in range(SEEDS)]

    def run(job):  # noqa: ANN001, ANN202
        return replay(sweep, kernel, gpu, budget=BUDGET, seed=job[1], strategy=job[0], pool=pool, prior=prior)
    if n_jobs == 1:
        return [run(j) for j in jobs]
    with ThreadPoolExecutor(n_jobs) as ex:
        return list(ex.map(run, jobs))


def main() -> int:
    rows = []
    sweeps = {}
    for dataset, gpu, _ in CACHES:
        sweep = sweeps.setdefault(dataset, load_dataset(dataset))
        kernel = str(sweep.loc[sweep["gpu"] == gpu, "kernel"].iloc[0])
        pool, fw, fc = _timed(lambda: replay_pool(sweep, kernel, gpu))
        row = {"cache": f"{dataset}/{gpu}", "configs": len(pool.rows), "features s": round(fw, 2)}
        for kind in ("none", "transfer"):
            prior, pw, pc = _timed(lambda: replay_prior(sweep, pool, kind))
            if kind == "transfer":
                row["transfer prior s (wall/cpu)"] = f"{pw:.1f} / {pc:.1f}"
            for n_jobs in (1, 2):
                _, w, c = _timed(lambda: _replays(sweep, kernel, gpu, pool, prior, n_jobs))
                row[f"{kind}: 20 replays, {n_jobs} thread(s) s (wall/cpu)"] = f"{w:.1f} / {c:.1f}"
        rows.append(row)
        print(row, flush=True)
    df = pd.DataFrame(rows)
    load = os.getloadavg()
    text = header("Measure-next loop: replay speed", "python experiments/loop_speed.py")
    text += (f"\n{SEEDS} seeds x 2 strategies (model loop, random order) x {BUDGET} runs per cache, on this "
             f"machine ({os.cpu_count()} cores, shared: load average {load[0]:.1f} / {load[1]:.1f} / "
             f"{load[2]:.1f} when the script ended). Features and priors are computed once per cache and shared "
             "by every seed and refit (`replay_pool`, `replay_prior`). Wall time includes other jobs' load; CPU "
             "time is this process's (all threads).\n\n" + md_table(df) + "\n")
    (RESULTS / "loop_speed.md").write_text(text)
    print(f"wrote {RESULTS / 'loop_speed.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
