"""Kernel Tuner's search strategies (simulation mode) beside hybridperf's measure-next loop (issue 17).

Same 10 recorded caches, same seeds, same budgets counted in distinct configurations; cache times are set to
the median of the repeats (as in hybridperf's datasets), so both chase the same optimum. Writes
experiments/results/tuner_vs_kernel_tuner.md, .csv and tuner_vs_kernel_tuner_<cache>.png.

    .venv/bin/pip install -e '.[bench]'                         # Kernel Tuner (optional: skipped if absent)
    .venv/bin/python experiments/tuner_vs_kernel_tuner.py          # 10 seeds, budgets 10..100 (~45 min, 2 cores)
    .venv/bin/python experiments/tuner_vs_kernel_tuner.py --quick  # 2 seeds, budgets 10..50 (*_quick.* outputs)

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
from _common import RESULTS, SHARED, header, md_table

from hybridperf.datasets import load_dataset

from hybridperf.search.measure_next import replay, replay_pool

BUDGETS = (10, 20, 30, 50, 100)
LOOP, HP_RANDOM = "hybridperf model loop", "hybridperf random"
HP_METHODS = {LOOP: "model", HP_RANDOM: "random"}
KT_PREFIX = "Kernel Tuner "
# Issue 17's reference table (Kernel Tuner 1.5.0, 10 seeds, 10 caches): median fraction of optimum and
# seed-runs within 1% (of 100), at 30 and 50 distinct configurations. Quoted for comparison, not measured here.
ISSUE_17 = {LOOP: (0.876, 0.953, 15, 32), "dual_annealing": (0.881, 0.901, 10, 16),
            "bayes_opt": (0.791, 0.820, 8, 13), "genetic_algorithm": (0.781, 0.838, 8, 11),
            "random_sample": (0.790, 0.839, 7, 9)}


def hybridperf_times(sweep: pd.DataFrame, kernel: str, gpu: str, strategy: str, budget: int, seed: int,
                     pool: object) -> np.ndarray:
    """Times (ms, NaN = failed) of the configurations hybridperf's loop measures, in order: the one place to
    swap in an improved loop (it must return the distinct configurations' times, at most ``budget``)."""
    traj = replay(sweep, kernel, gpu, budget=budget, seed=seed, strategy=strategy, pool=pool)
    return traj.steps["time_ms"].to_numpy(dtype=np.float64)[:budget]


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
            times = fn()
            rec = {"cache": cache, "method": method, "seed": seed, "budget_run": budget_run,
                   "seconds": time.perf_counter() - t0,
                   "times_ms": [None if not np.isfinite(t) else float(t) for t in times]}
            fh.write(json.dumps(rec) + "\n")
            fh.flush()
            done[key] = rec
            print(f"  {cache:40s} {method:40s} seed {seed} budget {budget_run}: {rec['seconds']:.1f} s", flush=True)


def collect(args: argparse.Namespace, work: Path) -> tuple[dict[tuple, dict], dict[str, float], list[str]]:
    """Run every (cache, method, seed) not yet in the log; the records, optimum per cache, and notes."""
    log = work / "runs.jsonl"
    if args.fresh and log.exists():
        log.unlink()
    done = _load_log(log)
    seeds, budgets = range(args.seeds), [b for b in BUDGETS if b <= args.max_budget]
    optimum: dict[str, float] = {}
    notes: list[str] = []
    sweeps = {ds: load_dataset(ds) for ds in dict.fromkeys(c[0] for c in kts.CACHES)}
    for dataset, gpu, rel in kts.CACHES:
        label = _label(dataset, gpu)
        if args.caches and not any(s in label for s in args.caches):
            continue
        sweep = sweeps[dataset]
        rows = sweep.loc[sweep["gpu"].astype(str) == gpu]
        kernel = str(rows["kernel"].iloc[0])
        ok = rows["status"].astype(str).eq("ok") if "status" in rows.columns else np.ones(len(rows), bool)
        optimum[label] = float(pd.to_numeric(rows.loc[ok, "time_ms"]).min())
        print(f"{label}: {len(rows)} configurations, optimum {optimum[label]:.6g} ms", flush=True)
        pool = replay_pool(sweep, kernel, gpu)
        hp = functools.partial(hybridperf_times, sweep, kernel, gpu, pool=pool)
        _run_all(((label, m, s, budgets[-1], functools.partial(hp, HP_METHODS[m], budgets[-1], s))
                  for m in HP_METHODS for s in seeds), log, done)
        if args.no_kt:
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


# ---------------------------------------------------------------------------------------------
# Tables and plots

def long_table(done: dict[tuple, dict], optimum: dict[str, float], budgets: list[int]) -> pd.DataFrame:
    """One row per (cache, method, seed, budget): best time within the budget and fraction of the optimum."""
    out = []
    for (cache, method, seed, budget_run), rec in done.items():
        if cache not in optimum or budget_run not in (budgets[-1], *budgets):
            continue
        t = np.array([np.nan if v is None else v for v in rec["times_ms"]], dtype=np.float64)
        # a run at the largest budget serves every smaller budget that has no run of its own
        use = [b for b in budgets if b == budget_run or (budget_run == budgets[-1] and
                                                         (cache, method, seed, b) not in done)]
        for b in use:
            head = t[:b]
            best = float(np.nanmin(head)) if np.isfinite(head).any() else float("nan")
            frac = optimum[cache] / best if np.isfinite(best) else 0.0
            out.append({"cache": cache, "method": method, "seed": seed, "budget": b, "distinct_used": len(head),
                        "failed_used": int(np.isnan(head).sum()), "best_ms": best, "optimum_ms": optimum[cache],
                        "fraction_of_optimum": frac, "within_1pct": frac >= 0.99,
                        "seconds": rec["seconds"] if b == budget_run else np.nan})
    return pd.DataFrame(out)


def _short(method: str) -> str:
    return method.removeprefix(KT_PREFIX)


def summary(df: pd.DataFrame, budgets: list[int], by: list[str]) -> pd.DataFrame:
    """Median fraction of the optimum and seed-runs within 1% per budget (columns), grouped by ``by``."""
    g = df.groupby([*by, "budget"])
    wide = pd.concat({"median": g["fraction_of_optimum"].median(), "within": g["within_1pct"].sum(),
                      "n": g["within_1pct"].size(), "distinct": g["distinct_used"].mean(),
                      "failed": g["failed_used"].mean()}, axis=1).reset_index()
    out = wide.pivot_table(index=by, columns="budget", values=["median", "within", "n", "distinct", "failed"])
    rows = []
    for idx, r in out.iterrows():
        idx = idx if isinstance(idx, tuple) else (idx,)
        row = dict(zip(by, idx))
        for b in budgets:
            row[f"median @{b}"] = r[("median", b)]
        row["within 1% @" + "/".join(map(str, budgets))] = "/".join(f"{int(r[('within', b)])}" for b in budgets)
        row["of"] = int(r[("n", budgets[-1])])
        row[f"mean distinct used @{budgets[-1]}"] = f"{r[('distinct', budgets[-1])]:.1f}"
        row[f"of which failed @{budgets[-1]}"] = f"{r[('failed', budgets[-1])]:.1f}"
        rows.append(row)
    return pd.DataFrame(rows)


def cache_medians(df: pd.DataFrame) -> pd.DataFrame:
    """Per method and budget: the median over caches of each cache's median fraction of the optimum."""
    med = df.groupby(["method", "cache", "budget"])["fraction_of_optimum"].median()
    out = med.groupby(["method", "budget"]).median().unstack("budget")
    out.columns = [f"@{b}" for b in out.columns]
    out = out.reset_index()
    out["method"] = out["method"].map(_short)
    return out


def target_rows(df: pd.DataFrame, budgets: list[int]) -> pd.DataFrame:
    """Per cache and budget (20, 30, 50): the loop's median against the best Kernel Tuner strategy's, among
    all strategies run and among issue 17's four (random_sample, dual_annealing, bayes_opt, genetic_algorithm)."""
    med = df.groupby(["cache", "method", "budget"])["fraction_of_optimum"].median().reset_index()
    core = {KT_PREFIX + s for s in kts.CORE_STRATEGIES}
    rows = []
    for (cache, b), g in med.groupby(["cache", "budget"]):
        kt = g.loc[g["method"].str.startswith(KT_PREFIX)].sort_values("fraction_of_optimum", ascending=False)
        loop = g.loc[g["method"] == LOOP, "fraction_of_optimum"]
        if b not in (20, 30, 50) or kt.empty or loop.empty:
            continue
        four = kt.loc[kt["method"].isin(core)]
        lm = float(loop.iloc[0])
        rows.append({"cache": cache, "budget": b, "loop median": lm,
                     "best KT strategy": _short(kt["method"].iloc[0]),
                     "its median (all)": float(kt["fraction_of_optimum"].iloc[0]),
                     "loop >= best KT": bool(lm >= kt["fraction_of_optimum"].iloc[0]),
                     "best of issue's 4": _short(four["method"].iloc[0]) if len(four) else "-",
                     "its median (4)": float(four["fraction_of_optimum"].iloc[0]) if len(four) else float("nan"),
                     "loop >= best of 4": bool(len(four) and lm >= four["fraction_of_optimum"].iloc[0])})
    return pd.DataFrame(rows)


def plot_cache(df: pd.DataFrame, cache: str, path: Path, core: list[str]) -> None:
    """Median fraction of the optimum against runs, interquartile band over seeds, per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = df.loc[df["cache"] == cache]
    at50 = d.loc[d["budget"] == d["budget"].max()].groupby("method")["fraction_of_optimum"].median()
    others = at50.drop([m for m in [LOOP, HP_RANDOM, *core] if m in at50.index], errors="ignore")
    show = [m for m in [LOOP, HP_RANDOM, *core] if m in at50.index] + list(others.nlargest(1).index)
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for m in show:
        g = d.loc[d["method"] == m].groupby("budget")["fraction_of_optimum"]
        q = g.quantile([0.25, 0.5, 0.75]).unstack()
        lw, ls = (2.2, "-") if m == LOOP else (1.3, "-" if m.startswith(KT_PREFIX) else ":")
        label = _short(m) + (" (best other KT)" if m in others.index else "")
        line = ax.plot(q.index, q[0.5], marker="o", ms=3, lw=lw, ls=ls, label=label)[0]
        ax.fill_between(q.index, q[0.25], q[0.75], color=line.get_color(), alpha=0.12)
    ax.axhline(0.99, color="0.4", lw=0.8, ls="--", label="99% of optimum (within 1%)")
    ax.set_xlabel("runs (distinct configurations measured)")
    ax.set_ylabel("optimum / best found")
    ax.set_title(f"{cache}: median over seeds, interquartile band", fontsize=10)
    ax.set_ylim(max(0.0, float(d["fraction_of_optimum"].quantile(0.05)) - 0.05), 1.01)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _slug(cache: str) -> str:
    return cache.replace("/", "_")


def report(df: pd.DataFrame, budgets: list[int], args: argparse.Namespace, notes: list[str], wall_s: float,
           kt_version: str | None, stem: str) -> str:
    cmd = "python experiments/tuner_vs_kernel_tuner.py" + (" --quick" if args.quick else "")
    lines = [header("Kernel Tuner strategies vs hybridperf's measure-next loop (issue 17)", cmd)]
    n_caches = df["cache"].nunique()
    lines.append(
        f"{n_caches} recorded Kernel Tuner caches, {args.seeds} seeds, budgets {', '.join(map(str, budgets))} "
        "distinct configurations. Kernel Tuner: "
        + (f"{kt_version}, simulation mode" if kt_version else "not installed (skipped)")
        + "; cache `time` set to the median of `times` (hybridperf's datasets use the same), so both chase the "
        "same optimum (checked equal per cache). The search space is the cache's keys, failed configurations "
        "included: a failed configuration costs a run for every method. Fraction of optimum = optimum / best "
        "found (0 if only failures); within 1% = fraction >= 0.99 (as `Trajectory.measurements_to(0.99)`). Kernel Tuner strategies are run once with `max_fevals` = the largest budget "
        "and read at each smaller one (same configurations as a run with the smaller `max_fevals`, checked), "
        f"except {', '.join(sorted(kts.BUDGET_AWARE))}, run once per budget; dual_annealing gets an unlimited inner "
        "scipy call limit (`maxfun`, which counts repeats) so that Kernel Tuner's distinct-configuration budget "
        "stops it (else it stops after a fraction of it). hybridperf: `replay(..., budget="
        f"{budgets[-1]}, strategy='model'|'random')` read at each budget, stop rule not applied. "
        "Details: docs/kernel-tuner-interop.md.\n")
    secs = df.groupby("method")["seconds"].sum().sort_values(ascending=False)
    lines.append(f"Run time: {secs.sum() / 60:.1f} min summed over the runs (one process, 2 shared cores; this "
                 f"invocation's wall time {wall_s / 60:.1f} min, runs found in the log are not redone). "
                 "Per method (s, summed over runs):\n")
    lines.append(", ".join(f"{_short(m)} {s:.0f}" for m, s in secs.items()) + ".\n")
    lines.append("## All caches pooled (median over cache x seed runs)\n")
    overall = summary(df, budgets, ["method"])
    overall["method"] = overall["method"].map(_short)
    lines.append(md_table(overall.sort_values(f"median @{budgets[-1]}", ascending=False), ".3f") + "\n")
    lines.append("## Median over caches of the per-cache medians\n")
    lines.append("Each cache counts once (issue 17's medians are this statistic: its Kernel Tuner numbers "
                 "reproduce to the third decimal with it, not with the pooled median).\n")
    per_cache = cache_medians(df)
    lines.append(md_table(per_cache.sort_values(f"@{budgets[-1]}", ascending=False), ".3f") + "\n")
    if 30 in budgets and 50 in budgets:
        lines.append("## Against issue 17's reference numbers (@30 / @50)\n")
        ref = []
        for m, (m30, m50, w30, w50) in ISSUE_17.items():
            d = df.loc[df["method"].map(_short) == m]
            if d.empty:
                continue
            a, b = (d.loc[d["budget"] == x] for x in (30, 50))
            pc = per_cache.loc[per_cache["method"] == m].iloc[0]
            ref.append({"method": m, "issue median @30/@50": f"{m30:.3f} / {m50:.3f}",
                        "median of per-cache medians": f"{pc['@30']:.3f} / {pc['@50']:.3f}",
                        "pooled median": f"{a['fraction_of_optimum'].median():.3f} / "
                                         f"{b['fraction_of_optimum'].median():.3f}",
                        "issue within 1%": f"{w30} / {w50} of 100",
                        "measured within 1%": f"{int(a['within_1pct'].sum())} / {int(b['within_1pct'].sum())}"
                                              f" of {len(b)}"})
        lines.append(md_table(pd.DataFrame(ref)) + "\n")
    tr = target_rows(df, budgets)
    if not tr.empty:
        lines.append("## Issue 17's first target: loop median >= best Kernel Tuner strategy's, per cache\n")
        lines.append(f"The best of {df['method'].str.startswith(KT_PREFIX).groupby(df['method']).any().sum()} "
                     "strategies' medians, chosen per cache and budget after the fact, is an optimistic bar: "
                     "with few seeds the maximum of many noisy medians sits above any one strategy's.\n")
        for b in (20, 30, 50):
            t = tr.loc[tr["budget"] == b]
            if len(t):
                lines.append(f"- @{b}: {int(t['loop >= best KT'].sum())} of {len(t)} caches against the best of all "
                             f"strategies run, {int(t['loop >= best of 4'].sum())} against the best of issue 17's four")
        lines.append("\n" + md_table(tr, ".3f") + "\n")
    lines.append("## Per cache\n")
    core = [KT_PREFIX + s for s in kts.CORE_STRATEGIES]
    for cache in sorted(df["cache"].unique()):
        d = df.loc[df["cache"] == cache]
        per = summary(d, budgets, ["method"])
        keep = per["method"].isin([LOOP, HP_RANDOM, *core])
        best_other = per.loc[~keep].sort_values(f"median @{budgets[-1]}", ascending=False).head(1)
        order = {m: i for i, m in enumerate([LOOP, HP_RANDOM, *core])}
        per = pd.concat([per.loc[keep].sort_values("method", key=lambda m: m.map(order)), best_other])
        per["method"] = per["method"].map(_short)
        per.loc[per.index.isin(best_other.index), "method"] += " (best other KT strategy)"
        lines.append(f"### {cache} (optimum {d['optimum_ms'].iloc[0]:.6g} ms)\n")
        lines.append(f"![{cache}]({stem}_{_slug(cache)}.png)\n")
        lines.append(md_table(per, ".3f") + "\n")
    lines.append("## Checks\n")
    lines += [f"- {n}" for n in notes]
    if args.check_prefix and not any("differ from" in n for n in notes):
        lines.append("- Prefix check (seed 0, every cache and every strategy read from one long run): the times of "
                     f"the first {budgets[0]} configurations of the max_fevals={budgets[-1]} run equal those of a "
                     f"max_fevals={budgets[0]} run in every case.")
    return "\n".join(lines) + "\n"


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
    args = ap.parse_args(argv)
    args.seeds = args.seeds or (2 if args.quick else 10)
    args.max_budget = 50 if args.quick else 100
    args.strategies = args.strategies or list(kts.CORE_STRATEGIES + kts.EXTRA_STRATEGIES)
    stem = "tuner_vs_kernel_tuner" + ("_quick" if args.quick else "")
    work = args.work or Path("/tmp/hybridperf-tvkt" + ("-quick" if args.quick else ""))
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
    df = long_table(done, optimum, budgets)
    if args.strategies is not None:
        allowed = set(HP_METHODS) | {KT_PREFIX + s for s in args.strategies}
        df = df.loc[df["method"].isin(allowed) & (df["seed"] < args.seeds)]
    RESULTS.mkdir(parents=True, exist_ok=True)
    df.drop(columns="optimum_ms").assign(method=df["method"].map(_short)).to_csv(
        RESULTS / f"{stem}.csv", index=False, float_format="%.6g")
    core = [KT_PREFIX + s for s in kts.CORE_STRATEGIES]
    for cache in sorted(df["cache"].unique()):
        plot_cache(df, cache, RESULTS / f"{stem}_{_slug(cache)}.png", core)
    (RESULTS / f"{stem}.md").write_text(report(df, budgets, args, notes, wall_s, kt_version, stem))
    print(f"wrote {RESULTS / stem}.md/.csv and {df['cache'].nunique()} plots in {wall_s / 60:.1f} min")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
