"""Search-space construction and ranking at scale (issue 14, Scale): the solver against Kernel Tuner's Searchspace.

Three measurements, each in the same run as its reference:

1. The CLBlast Xgemm space (descriptor clblast-xgemm, M = N = K = 2048: 241,600 of 1,327,104 combinations)
   built by hybridperf's solver (`user_space(...).configs()`: every feasible configuration, sorted) and by
   Kernel Tuner's `Searchspace(tune_params, restrictions, max_threads=1024)` (python-constraint2), runs
   interleaved; the two sets of configurations are checked equal. Product-then-filter (the descriptor's
   Cartesian product addressed by index in chunks and `constraint_mask`, what rank did before) is timed
   beside them.
2. `rank --no-pareto` on the whole kt-convolution space (31,457,280 combinations, 18.4M satisfy the
   constraints) with a model trained on the shipped kt-convolution sweep, in a child process whose peak
   memory (the sum of the RSS of the process and its children, sampled every 0.1 s) is recorded: with 2
   threads (`--jobs 2`), 1 thread, a 2-worker local Dask cluster, and 2 threads with `--odds`.
3. A 10^8-combination space (the synthetic 10^7 descriptor plus one 10-value parameter in a constraint)
   streamed by the solver in chunks of 50,000, in a child process (peak RSS), with product-then-filter
   in chunks beside it.

The machine these ran on is shared (2 cores, other jobs running): the load average is recorded with each
part, and times are medians. Run: `nice -n 10 .venv/bin/python experiments/space_speed.py`.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, ROOT, git_commit, md_table  # noqa: E402

XGEMM_SIZES = {"M": 2048, "N": 2048, "K": 2048}
CONV_SIZES = {"W": 4096, "H": 4096}
MODEL = ROOT / "build" / "space_speed" / "kt-convolution.json"


def _xgemm_kernel_tuner() -> tuple[dict, list[str]]:
    from hybridperf.kernel import load_kernel

    k = load_kernel("clblast-xgemm")
    tune = {p.name: [int(v) if float(v).is_integer() else v for v in p.values] for p in k.config}
    restrictions = []
    for c in k.constraints:  # the sizes written in as numbers, as a Kernel Tuner user would
        text = c.text
        for name, v in XGEMM_SIZES.items():
            text = re.sub(rf"\b{name}\b", str(v), text)
        restrictions.append(text)
    return tune, restrictions


def _product_then_filter(kernel: str, sizes: dict, chunk_rows: int = 200_000) -> int:
    """Feasible configurations counted as rank did before the solver: the Cartesian product addressed by
    index in chunks (mixed-radix decoding), every constraint evaluated on every combination."""
    from hybridperf.kernel import load_kernel

    k = load_kernel(kernel)
    values = [np.asarray(p.values, dtype=np.float64) for p in k.config]
    shape = tuple(len(v) for v in values)
    n = 0
    for start in range(0, k.space_size(), chunk_rows):
        idx = np.arange(start, min(start + chunk_rows, k.space_size()), dtype=np.int64)
        env = {p.name: v[c] for p, v, c in zip(k.config, values, np.unravel_index(idx, shape))}
        ok, _ = k.constraint_mask({**env, **sizes})
        n += int(ok.sum())
    return n


def xgemm(runs: int) -> pd.DataFrame:
    from kernel_tuner.searchspace import Searchspace

    from hybridperf.search.user_space import user_space

    tune, restrictions = _xgemm_kernel_tuner()
    ours = user_space("clblast-xgemm", XGEMM_SIZES).configs()
    kt = Searchspace(tune, restrictions, 1024)
    names = list(tune)
    mine = {tuple(int(v) for v in row) for row in ours[names].to_numpy()}
    assert mine == {tuple(int(v) for v in c) for c in kt.list}, "the two spaces differ"
    times: dict[str, list[float]] = {"hybridperf solver": [], "Kernel Tuner Searchspace": [], "product-then-filter": []}
    for _ in range(runs):  # interleaved, so load changes hit both
        t = time.perf_counter()
        n_ours = len(user_space("clblast-xgemm", XGEMM_SIZES).configs())
        times["hybridperf solver"].append(time.perf_counter() - t)
        t = time.perf_counter()
        n_kt = Searchspace(tune, restrictions, 1024).size
        times["Kernel Tuner Searchspace"].append(time.perf_counter() - t)
        t = time.perf_counter()
        n_pf = _product_then_filter("clblast-xgemm", XGEMM_SIZES)
        times["product-then-filter"].append(time.perf_counter() - t)
    assert n_ours == n_kt == n_pf == len(mine)
    kt_median = statistics.median(times["Kernel Tuner Searchspace"])
    return pd.DataFrame([{"builder": k, "configs": n_ours, "runs": runs, "median_s": statistics.median(v),
                          "min_s": min(v), "max_s": max(v), "ratio_to_kernel_tuner": statistics.median(v) / kt_median}
                         for k, v in times.items()])


def _train_model() -> Path:
    if not MODEL.exists():
        MODEL.parent.mkdir(parents=True, exist_ok=True)
        cli = "import sys; from hybridperf.cli import main; sys.exit(main(sys.argv[1:]))"
        subprocess.run([sys.executable, "-c", cli, "train", "kt-convolution", "-o", str(MODEL), "--quiet"],
                       check=True, cwd=ROOT)
    return MODEL


_HWM = """
def hwm_mib():  # peak RSS of this address space (ru_maxrss would carry the parent's peak over exec)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
"""

_RANK_CHILD = _HWM + """
import json, sys, time
sys.path.insert(0, {root!r})
from contextlib import nullcontext
from hybridperf.learn.model import load_model
from hybridperf.search.rank import rank_configs
from hybridperf.search.cluster import dask_client
model = load_model({model!r})
with (dask_client({dask!r}) if {dask!r} else nullcontext()) as client:
    t, c = time.perf_counter(), time.process_time()
    r = rank_configs(model, "kt-convolution", "rtx-a4000", {sizes!r}, prune="none", top=10, jobs={jobs},
                     chunk_rows={chunk}, client=client, odds={odds!r})
    wall, cpu = time.perf_counter() - t, time.process_time() - c
print(json.dumps({{"wall_s": wall, "cpu_s_main": cpu, "maxrss_main_mib": hwm_mib(), "odds": not r.odds_skipped,
                  "contenders": r.n_contenders,
                  "space": r.space_size, "feasible": r.n_feasible, "best_ms": float(r.table["time_ms"].iloc[0]),
                  "best_index": int(r.table["index"].iloc[0])}}))
"""


def _run_sampled(code: str) -> tuple[dict, float]:
    """Run ``code`` in a child Python; its JSON line and the peak sum of RSS over it and its children (MiB)."""
    import psutil

    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = 0.0
    parent = psutil.Process(proc.pid)
    while proc.poll() is None:
        try:
            tree = [parent, *parent.children(recursive=True)]
            peak = max(peak, sum(p.memory_info().rss for p in tree if p.is_running()) / 2**20)
        except psutil.Error:
            pass
        time.sleep(0.1)
    out, err = proc.communicate()
    if proc.returncode:
        raise RuntimeError(f"child failed: {err[-2000:]}")
    return json.loads(out.strip().splitlines()[-1]), peak


def conv(runs: int, chunk_rows: int) -> pd.DataFrame:
    model = str(_train_model())
    recs = []
    plan = [("threads", 2, "", None)] * runs + [("threads", 1, "", None), ("dask local:2", 1, "local:2", None),
                                               ("threads, --odds", 2, "", True)]
    for how, jobs, dask, odds in plan:
        load = os.getloadavg()[0]
        code = _RANK_CHILD.format(root=str(ROOT), model=model, dask=dask, jobs=jobs, sizes=CONV_SIZES, chunk=chunk_rows,
                                  odds=odds)
        res, peak = _run_sampled(code)
        recs.append({"how": how, "jobs": jobs, "chunk_rows": chunk_rows, **res, "peak_rss_tree_mib": peak,
                     "load_avg_1min_before": load, "load_avg_1min_after": os.getloadavg()[0]})
        print(f"  conv {how} jobs={jobs}: {recs[-1]}", file=sys.stderr)
    return pd.DataFrame(recs)


_STREAM_CHILD = _HWM + """
import json, sys, time
sys.path.insert(0, {root!r})
sys.path.insert(0, {exp!r})
from hybridperf.search.user_space import user_space
from space_speed import _product_then_filter
base = hwm_mib()
us = user_space({desc!r}, {{"N": 4096}})
t = time.perf_counter()
if {solver!r}:
    n = sum(len(c) for c in us.space.chunks({chunk}))
else:
    n = _product_then_filter({desc!r}, {{"N": 4096.0}}, {chunk})
print(json.dumps({{"seconds": time.perf_counter() - t, "space": us.space.size(), "feasible": n,
                  "maxrss_mib": hwm_mib(), "rss_after_imports_mib": base}}))
"""


def stream_1e8(chunk_rows: int, product_too: bool) -> pd.DataFrame:
    src = (ROOT / "tests" / "search" / "synthetic-10m.toml").read_text()
    src = src.replace('name = "synthetic-10m"', 'name = "synthetic-100m"')
    src = src.replace("PAD = { values", "Q = { values = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], default = 1 }\nPAD = { values")
    src = src.replace('constraints = ["N % V == 0"]', 'constraints = ["N % V == 0", "Q <= TX * TY or U >= 4"]')
    recs = []
    with tempfile.TemporaryDirectory() as tmp:
        desc = Path(tmp) / "synthetic-100m.toml"
        desc.write_text(src)
        for solver in ([True, False] if product_too else [True]):
            load = os.getloadavg()[0]
            code = _STREAM_CHILD.format(root=str(ROOT), exp=str(Path(__file__).resolve().parent), desc=str(desc),
                                        chunk=chunk_rows, solver=solver)
            res, peak = _run_sampled(code)
            recs.append({"builder": "hybridperf solver" if solver else "product-then-filter", "chunk_rows": chunk_rows,
                         **res, "peak_rss_tree_mib": peak, "load_avg_1min_before": load})
            print(f"  1e8 {recs[-1]}", file=sys.stderr)
    return pd.DataFrame(recs)


PARTS = ("xgemm", "stream_1e8", "conv")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="Xgemm builds per builder")
    ap.add_argument("--conv-runs", type=int, default=3, help="convolution ranks with 2 threads")
    ap.add_argument("--chunk-rows", type=int, default=50_000)
    ap.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS),
                    help="what to measure now; the report also shows the parts measured by earlier runs (their CSV)")
    ap.add_argument("--no-product", action="store_true", help="1e8: skip the product-then-filter reference")
    args = ap.parse_args()
    stamp = {"commit": git_commit(), "load_avg_1min_at_start": round(os.getloadavg()[0], 1),
             "command": "nice -n 10 .venv/bin/python experiments/space_speed.py " + " ".join(sys.argv[1:])}
    for part in args.parts:
        if part == "xgemm":
            df = xgemm(args.runs)
        elif part == "stream_1e8":
            df = stream_1e8(args.chunk_rows, not args.no_product)
        else:
            df = conv(args.conv_runs, args.chunk_rows)
        df.assign(**stamp).to_csv(RESULTS / f"space_speed_{part}.csv", index=False)  # saved as soon as measured
        print(df, file=sys.stderr)
    _report()


def _part(name: str) -> pd.DataFrame | None:
    path = RESULTS / f"space_speed_{name}.csv"
    return pd.read_csv(path) if path.exists() else None


def _provenance(df: pd.DataFrame) -> str:
    return (f"Measured with `{df['command'].iloc[0]}` at commit {df['commit'].iloc[0]} (1-minute load average "
            f"{df['load_avg_1min_at_start'].iloc[0]} on {os.cpu_count()} cores at the start).\n")


def _report() -> None:
    lines = ["# Search space construction and ranking at scale\n",
             f"`experiments/space_speed.py` (Python {sys.version.split()[0]}). The machine was shared with other jobs "
             "(up to 7 sessions on 2 cores): times are medians of interleaved runs, ratios are taken within one run, "
             "and each part says the load it ran under.\n"]
    meta = ["commit", "load_avg_1min_at_start", "command"]
    x = _part("xgemm")
    if x is not None:
        lines += ["## 1. CLBlast Xgemm space (clblast-xgemm, M = N = K = 2048)\n", _provenance(x),
                  "Target: built in no more time than Kernel Tuner's `Searchspace` takes (ratio <= 1). The two"
                  " builders gave the same 241,600 configurations (checked as sets).\n",
                  md_table(x.drop(columns=meta)), ""]
    c = _part("conv")
    if c is not None:
        threads = c[(c["how"] == "threads") & (c["jobs"] == 2)]
        lines += ["## 2. `rank --no-pareto` on the kt-convolution space\n", _provenance(c),
                  "Model: `hybridperf train kt-convolution` (all five GPUs of the shipped sweep; cached in "
                  "build/space_speed/). Ranked for rtx-a4000, W = H = 4096, `prune='none'`, top 10, chunks of 50,000. "
                  "Targets: <= 90 s on 2 cores, peak memory <= 1 GiB (the sum of the RSS of the process and its "
                  "children, sampled every 0.1 s; `maxrss_main_mib` is the main process's VmHWM). `cpu_s_main`: CPU "
                  "seconds of the main process, all its threads (the Dask workers' are not in it).\n",
                  md_table(c.drop(columns=meta)), "",
                  f"Median over {len(threads)} runs with 2 threads: {threads['wall_s'].median():.0f} s wall, "
                  f"{threads['cpu_s_main'].median():.0f} CPU s, peak {threads['peak_rss_tree_mib'].max():.0f} MiB "
                  "(under a load average above 2 the wall time also measures the other jobs). `odds`: whether the "
                  "chance that the fastest is kept was computed (by default not for a space of more than 2,000,000 "
                  "configurations; the `--odds` row asks for it); `contenders`: the dropped configurations whose "
                  "intervals let them be the fastest (more than 100,000 make the chance unknown).\n"]
    s = _part("stream_1e8")
    if s is not None:
        lines += ["## 3. A 10^8-combination space streamed\n", _provenance(s),
                  "Synthetic: tests/search/synthetic-10m.toml plus Q (10 values) and the constraint `Q <= TX * TY or "
                  "U >= 4`; chunks of 50,000 in a child process that counts the feasible configurations. Peak memory: "
                  "the child's VmHWM (`maxrss_mib`; `rss_after_imports_mib` before the space is built) and the sum of "
                  "RSS sampled every 0.1 s. Product-then-filter is what rank did before: the product addressed by "
                  "index in chunks, every constraint evaluated on every combination.\n",
                  md_table(s.drop(columns=meta)), ""]
    (RESULTS / "space_speed.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
