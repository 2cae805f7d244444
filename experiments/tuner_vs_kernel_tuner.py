"""Kernel Tuner's search strategies (simulation mode) beside hybridperf's measure-next loop (issue 17).

Same 10 recorded caches, same seeds, same budgets counted in distinct configurations; cache times are set to
the median of the repeats (as in hybridperf's datasets), so both chase the same optimum. Writes
experiments/results/tuner_vs_kernel_tuner.md, .csv and tuner_vs_kernel_tuner_<cache>.png.

    .venv/bin/pip install -e '.[bench]'                         # Kernel Tuner (optional: skipped if absent)
    .venv/bin/python experiments/tuner_vs_kernel_tuner.py          # 10 seeds, budgets 10..100 (~45 min, 2 cores)
    .venv/bin/python experiments/tuner_vs_kernel_tuner.py --quick  # 2 seeds, budgets 10..50 (*_quick.* outputs)
    .venv/bin/python experiments/tuner_vs_kernel_tuner.py --held-out  # pnpoly, hotspot, expdist (*_heldout.*)

Runs are appended to <work>/runs.jsonl as they finish; a rerun resumes from there (``--fresh`` starts over).
"""
from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))

import _kt_sim as kts
import _tvkt_report as rep
from _common import RESULTS, SHARED
from _tvkt_report import BUDGETS, HP_RANDOM, KT_PREFIX, LOOP, LOOP_ANALYTICAL, LOOP_NONE, LOOPS

from hybridperf.datasets import load_dataset
from hybridperf.search.measure_next import replay, replay_pool, replay_prior

HP_METHODS = {LOOP: "transfer", LOOP_ANALYTICAL: "analytical", LOOP_NONE: "none", HP_RANDOM: None}


def hybridperf_times(sweep: pd.DataFrame, kernel: str, gpu: str, prior: object, budget: int, seed: int,
                     pool: object) -> dict:
    """What hybridperf's loop measures, in order: the one place to swap in another loop. ``prior`` is a Prior
    (the model loop) or None (random order). Returns ``times_ms`` (ms, NaN = failed; distinct configurations,
    at most ``budget``) and, for the loop, ``decisions``: per batch after the start, (measurements before it,
    the stop rule's P(better), whether the rule said stop)."""
    strategy = "random" if prior is None else "model"
    traj = replay(sweep, kernel, gpu, budget=budget, seed=seed, strategy=strategy, pool=pool,
                  prior=prior if prior is not None else "none")
    s = traj.steps
    first = s.loc[(s["batch"] > 0) & s["batch"].ne(s["batch"].shift())]
    return {"times_ms": s["time_ms"].to_numpy(dtype=np.float64)[:budget],
            "decisions": [[int(r.n_measured) - 1, float(r.p_better), bool(r.stop_rule)] for r in first.itertuples()]}


# ---------------------------------------------------------------------------------------------
# Runs (one JSON record per run, appended as it finishes)

def _label(dataset: str, gpu: str) -> str:
    return f"{dataset}/{gpu}"


def _load_log(path: Path) -> dict[tuple, dict]:
    done: dict[tuple, dict] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                done[(r["cache"], r["method"], r["seed"], r["budget_run"])] = r
    return done


def _run_all(jobs: Iterable[tuple[str, str, int, int, Callable[[], np.ndarray]]], log: Path,
             done: dict[tuple, dict]) -> None:
    with log.open("a") as fh:
        for cache, method, seed, budget_run, fn in jobs:
            key = (cache, method, seed, budget_run)
            if key in done:
                continue
            t0 = time.perf_counter()
            out = fn()
            extra = dict(out) if isinstance(out, dict) else {"times_ms": out}
            times = extra.pop("times_ms")
            rec = {"cache": cache, "method": method, "seed": seed, "budget_run": budget_run,
                   "seconds": time.perf_counter() - t0,
                   "times_ms": [None if not np.isfinite(t) else float(t) for t in times], **extra}
            fh.write(json.dumps(rec) + "\n")
            fh.flush()
            done[key] = rec
            print(f"  {cache:40s} {method:40s} seed {seed} budget {budget_run}: {rec['seconds']:.1f} s", flush=True)


PRIOR_NOTES = {
    LOOP: "transfer: the cache's kernel on the other GPUs (`replay_prior(sweep, pool, 'transfer')`): a configuration "
          "they measured gets the mean of its log time relative to each GPU's median, and the share of them where it "
          "failed; the others a booster's prediction from the analytical features (with the GPU datasheet fields, "
          "up to 10,000 rows) and a classifier's failure chance",
    LOOP_ANALYTICAL: "analytical: the hierarchical roofline's log time, uncalibrated (the descriptor and GPU spec "
                     "only; MWP-CWP's before 28 Nov)",
    LOOP_NONE: "none: no prior; the start is space-filling and the model learns from the runs alone",
}


def _hybridperf_jobs(label: str, sweep: pd.DataFrame, kernel: str, gpu: str, args: argparse.Namespace,
                     budgets: list[int], done: dict[tuple, dict]) -> list[tuple]:
    """The loop (each prior, every budget: it is budget-aware) and random order (largest budget) runs still to do.
    Features are computed once per cache, each prior once per cache (and only when a run needs it)."""
    pool = replay_pool(sweep, kernel, gpu)
    jobs = []
    for method, kind in HP_METHODS.items():
        if method not in args.methods:
            continue
        runs = [(s, b) for s in range(args.seeds) for b in (budgets if kind else budgets[-1:])
                if (label, method, s, b) not in done]
        if not runs:
            continue
        prior = None
        if kind:
            t0 = time.perf_counter()
            prior = replay_prior(sweep, pool, "auto" if args.held_out and method == LOOP else kind)
            print(f"  prior {kind}: {time.perf_counter() - t0:.1f} s ({prior.note})", flush=True)
        jobs += [(label, method, s, b, functools.partial(hybridperf_times, sweep, kernel, gpu, prior, b, s, pool))
                 for s, b in runs]
    return jobs


def collect(args: argparse.Namespace, work: Path) -> tuple[dict[tuple, dict], dict[str, float], list[str]]:
    """Run every (cache, method, seed) not yet in the log; the records, optimum per cache, and notes."""
    log = work / "runs.jsonl"
    if args.fresh and log.exists():
        log.unlink()
    done = _load_log(log)
    seeds, budgets = range(args.seeds), [b for b in BUDGETS if b <= args.max_budget]
    optimum: dict[str, float] = {}
    notes: list[str] = []
    caches = kts.HELD_OUT if args.held_out else kts.CACHES
    sweeps = {ds: load_dataset(ds) for ds in dict.fromkeys(c[0] for c in caches)}
    for dataset, gpu, rel in caches:
        label = _label(dataset, gpu)
        if args.caches and not any(s in label for s in args.caches):
            continue
        sweep = sweeps[dataset]
        rows = sweep.loc[sweep["gpu"].astype(str) == gpu]
        kernel = str(rows["kernel"].iloc[0])
        ok = rows["status"].astype(str).eq("ok") if "status" in rows.columns else np.ones(len(rows), bool)
        optimum[label] = float(pd.to_numeric(rows.loc[ok, "time_ms"]).min())
        print(f"{label}: {len(rows)} configurations, optimum {optimum[label]:.6g} ms", flush=True)
        _run_all(_hybridperf_jobs(label, sweep, kernel, gpu, args, budgets, done), log, done)
        if args.no_kt or dataset in kts.KT_TOO_SLOW:
            if dataset in kts.KT_TOO_SLOW and not args.no_kt:
                notes.append(f"{label}: Kernel Tuner not run (its search space takes minutes to build per run); "
                             "the loop against random order only.")
            continue
        space = kts.prepare_cache(SHARED / rel, work / "caches" / (label.replace("/", "__") + ".json"))
        if abs(space.optimum_ms / optimum[label] - 1) > 1e-6 or space.n_configs != len(rows):
            raise SystemExit(f"{label}: the Kernel Tuner cache ({space.n_configs} configs, optimum "
                             f"{space.optimum_ms} ms) and dataset {dataset} ({len(rows)} rows, optimum "
                             f"{optimum[label]} ms) disagree; rebuild the dataset (datasets/build.py)")
        jobs = []
        for strat in args.strategies:
            # budget-aware strategies run once per budget; the others once at the largest budget, plus seed 0 at
            # the smallest to check that reading a long run's first configurations equals a short run
            runs = budgets if strat in kts.BUDGET_AWARE else [budgets[-1]]
            jobs += [(label, KT_PREFIX + strat, s, b, functools.partial(kts.run_strategy, space, strat, b, s))
                     for s in seeds for b in runs]
            if args.check_prefix and strat not in kts.BUDGET_AWARE:
                jobs.append((label, KT_PREFIX + strat, 0, budgets[0],
                             functools.partial(kts.run_strategy, space, strat, budgets[0], 0)))
        _run_all(jobs, log, done)
        for strat in args.strategies if args.check_prefix else []:
            short, long_ = (done.get((label, KT_PREFIX + strat, 0, b)) for b in (budgets[0], budgets[-1]))
            if strat not in kts.BUDGET_AWARE and short and long_ and \
                    short["times_ms"] != long_["times_ms"][: len(short["times_ms"])]:
                notes.append(f"{label}, {strat}: the first {budgets[0]} configurations of a max_fevals="
                             f"{budgets[-1]} run differ from a max_fevals={budgets[0]} run (seed 0)")
    over = [k for k, r in done.items() if k[1].startswith(KT_PREFIX) and len(r["times_ms"]) > k[3]]
    notes.append(f"Kernel Tuner runs that evaluated more distinct configurations than max_fevals: {len(over)} of "
                 f"{sum(k[1].startswith(KT_PREFIX) for k in done)}" + (f" (e.g. {over[0]})" if over else "") + ".")
    return done, optimum, notes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 seeds, budgets up to 50 (outputs *_quick.*)")
    ap.add_argument("--seeds", type=int, default=None, help="seeds 0..N-1 (default 10; 2 with --quick)")
    ap.add_argument("--strategies", nargs="+", default=None,
                    help=f"Kernel Tuner strategies (default: {' '.join(kts.CORE_STRATEGIES + kts.EXTRA_STRATEGIES)})")
    ap.add_argument("--caches", nargs="+", default=None, help="only caches whose label contains one of these")
    ap.add_argument("--work", type=Path, default=None,
                    help="folder for the modified caches and the run log (default /tmp/hybridperf-tvkt[-quick])")
    ap.add_argument("--fresh", action="store_true", help="discard the run log and start over")
    ap.add_argument("--no-check-prefix", dest="check_prefix", action="store_false",
                    help="skip the seed-0 run at the smallest budget that checks the prefix reading")
    ap.add_argument("--held-out", action="store_true",
                    help="the caches the loop was not developed on (pnpoly, hotspot, expdist; outputs *_heldout.*); "
                         "the loop's prior is 'auto' there: transfer where other GPUs' sweeps exist, else analytical")
    ap.add_argument("--methods", nargs="+", default=list(HP_METHODS), choices=list(HP_METHODS), metavar="METHOD",
                    help="hybridperf methods to run (default: the loop with each prior, and random order)")
    args = ap.parse_args(argv)
    args.seeds = args.seeds or (2 if args.quick else 10)
    args.max_budget = 50 if args.quick else 100
    args.strategies = args.strategies or list(kts.CORE_STRATEGIES + kts.EXTRA_STRATEGIES)
    suffix = ("_quick" if args.quick else "") + ("_heldout" if args.held_out else "")
    stem = "tuner_vs_kernel_tuner" + suffix
    work = args.work or Path("/tmp/hybridperf-tvkt" + suffix.replace("_", "-"))
    work.mkdir(parents=True, exist_ok=True)
    kt_version = None
    args.no_kt = importlib.util.find_spec("kernel_tuner") is None
    if args.no_kt:
        print("Kernel Tuner is not installed (pip install -e '.[bench]'): running hybridperf's loop only.")
    else:
        from importlib.metadata import version

        kt_version = version("kernel_tuner")
    t0 = time.perf_counter()
    done, optimum, notes = collect(args, work)
    wall_s = time.perf_counter() - t0
    budgets = [b for b in BUDGETS if b <= args.max_budget]
    df = rep.long_table(done, optimum, budgets)
    allowed = set(args.methods) | {KT_PREFIX + s for s in args.strategies}
    df = df.loc[df["method"].isin(allowed) & (df["seed"] < args.seeds)]
    dec = rep.decisions({k: v for k, v in done.items() if k[2] < args.seeds}, optimum)
    RESULTS.mkdir(parents=True, exist_ok=True)
    df.drop(columns="optimum_ms").assign(method=df["method"].map(rep._short)).to_csv(
        RESULTS / f"{stem}.csv", index=False, float_format="%.6g")
    core = [KT_PREFIX + s for s in kts.CORE_STRATEGIES]
    for cache in sorted(df["cache"].unique()):
        rep.plot_cache(df, cache, RESULTS / f"{stem}_{rep._slug(cache)}.png", core)
    notes.append(f"hybridperf's loop variants: {', '.join(rep._short(m) for m in LOOPS if m in args.methods)}.")
    priors = {m: n for m, n in PRIOR_NOTES.items() if m in args.methods}
    if args.held_out and LOOP in priors:
        priors[LOOP] = ("held-out caches: the default prior ('auto'), i.e. " + PRIOR_NOTES[LOOP] + " where the kernel "
                        "has sweeps on other GPUs (pnpoly), else the analytical prior (hotspot, expdist: one GPU)")
    (RESULTS / f"{stem}.md").write_text(rep.report(df, dec, budgets, args, notes, wall_s, kt_version, stem, priors))
    print(f"wrote {RESULTS / stem}.md/.csv and {df['cache'].nunique()} plots in {wall_s / 60:.1f} min")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
