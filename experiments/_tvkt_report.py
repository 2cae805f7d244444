"""Tables, calibration and plots for experiments/tuner_vs_kernel_tuner.py (issue 17)."""
from __future__ import annotations

import argparse
from pathlib import Path

import _kt_sim as kts
import numpy as np
import pandas as pd
from _common import header, md_table

BUDGETS = (10, 20, 30, 50, 100)
# The loop with each prior (transfer: the other GPUs' sweeps of the kernel; analytical: the hierarchical
# roofline; none), and random order. LOOP (transfer) is the loop the targets are checked on: every shipped
# cache has other GPUs.
LOOP, LOOP_ANALYTICAL, LOOP_NONE = ("hybridperf loop (transfer prior)", "hybridperf loop (analytical prior)",
                                    "hybridperf loop (no prior)")
HP_RANDOM = "hybridperf random"
LOOPS = (LOOP, LOOP_ANALYTICAL, LOOP_NONE)
KT_PREFIX = "Kernel Tuner "
# Issue 17's reference table (Kernel Tuner 1.5.0, 10 seeds, 10 caches): median fraction of optimum and
# seed-runs within 1% (of 100), at 30 and 50 distinct configurations. Quoted for comparison, not measured here.
ISSUE_17 = {"hybridperf model loop (issue 17)": (0.876, 0.953, 15, 32), "dual_annealing": (0.881, 0.901, 10, 16),
            "bayes_opt": (0.791, 0.820, 8, 13), "genetic_algorithm": (0.781, 0.838, 8, 11),
            "random_sample": (0.790, 0.839, 7, 9)}
P_BINS = (0.0, 0.05, 0.2, 0.5, 0.8, 0.95, 1.0)


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


def decisions(done: dict[tuple, dict], optimum: dict[str, float]) -> pd.DataFrame:
    """Every batch a loop run chose after its start: the stop rule's P(a configuration > 1% faster remains)
    then, and whether one did (the optimum is below the best measured so far / 1.01)."""
    rows = []
    for (cache, method, seed, budget_run), rec in done.items():
        if method not in LOOPS or cache not in optimum or "decisions" not in rec:
            continue
        t = np.array([np.nan if v is None else v for v in rec["times_ms"]], dtype=np.float64)
        for n_before, p, said_stop in rec["decisions"]:
            head = t[:n_before]
            best = float(np.nanmin(head)) if np.isfinite(head).any() else float("inf")
            rows.append({"method": method, "cache": cache, "seed": seed, "budget": budget_run, "n_measured": n_before,
                         "p_better": p, "stop": bool(said_stop), "better_remained": optimum[cache] < best / 1.01})
    return pd.DataFrame(rows)


def calibration_table(dec: pd.DataFrame) -> pd.DataFrame:
    """Per loop and bin of the estimated P: decision points, mean estimate, observed frequency."""
    edges = [*P_BINS[:-1], np.nextafter(P_BINS[-1], 2.0)]  # the last bin holds P = 1
    labels = [f"[{a:g}, {b:g})" for a, b in zip(P_BINS[:-2], P_BINS[1:-1], strict=True)] + \
        [f"[{P_BINS[-2]:g}, {P_BINS[-1]:g}]"]
    bins = pd.cut(dec["p_better"], edges, right=False, labels=labels)
    g = dec.groupby([dec["method"].map(_short), bins], observed=True)
    out = pd.concat({"decisions": g.size(), "mean estimated P": g["p_better"].mean(),
                     "observed: a better one remained": g["better_remained"].mean()}, axis=1).reset_index()
    out.columns = ["method", "estimated P", *out.columns[2:]]
    out["estimated P"] = out["estimated P"].astype(str)
    return out


def stop_summary(dec: pd.DataFrame, df: pd.DataFrame) -> pd.DataFrame:
    """Per loop and budget: how often the rule said stop, where (first time), and whether a better one remained."""
    rows = []
    for (method, b), d in dec.groupby(["method", "budget"]):
        first = d.loc[d["stop"]].sort_values("n_measured").groupby(["cache", "seed"]).head(1)
        runs = df.loc[(df["method"] == method) & (df["budget"] == b)]
        rows.append({"method": _short(method), "budget": b, "runs": len(runs), "rule said stop": len(first),
                     "median measurements at stop": float(first["n_measured"].median()) if len(first) else np.nan,
                     "a >1% better one remained then": int(first["better_remained"].sum()),
                     "runs within 1% at the end": int(runs["within_1pct"].sum())})
    return pd.DataFrame(rows)


def plot_cache(df: pd.DataFrame, cache: str, path: Path, core: list[str]) -> None:
    """Median fraction of the optimum against runs, interquartile band over seeds, per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = df.loc[df["cache"] == cache]
    at50 = d.loc[d["budget"] == d["budget"].max()].groupby("method")["fraction_of_optimum"].median()
    mine = [*LOOPS, HP_RANDOM]
    others = at50.drop([m for m in [*mine, *core] if m in at50.index], errors="ignore")
    show = [m for m in [*mine, *core] if m in at50.index] + list(others.nlargest(1).index)
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for m in show:
        g = d.loc[d["method"] == m].groupby("budget")["fraction_of_optimum"]
        q = g.quantile([0.25, 0.5, 0.75]).unstack()
        lw, ls = (2.2, "-") if m == LOOP else (1.6, "-.") if m in LOOPS else \
            (1.3, "-" if m.startswith(KT_PREFIX) else ":")
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


def _intro(df: pd.DataFrame, budgets: list[int], args: argparse.Namespace, wall_s: float, kt_version: str | None,
           priors: dict[str, str]) -> list[str]:
    cmd = "python experiments/tuner_vs_kernel_tuner.py" + (" --quick" if args.quick else "")
    lines = [header("Kernel Tuner strategies vs hybridperf's measure-next loop (issue 17)", cmd)]
    lines.append(
        f"{df['cache'].nunique()} recorded Kernel Tuner caches, {args.seeds} seeds, budgets "
        f"{', '.join(map(str, budgets))} distinct configurations. Kernel Tuner: "
        + (f"{kt_version}, simulation mode" if kt_version else "not installed (its rows come from the run log)")
        + "; cache `time` set to the median of `times` (hybridperf's datasets use the same), so both chase the "
        "same optimum (checked equal per cache). The search space is the cache's keys, failed configurations "
        "included: a failed configuration costs a run for every method. Fraction of optimum = optimum / best "
        "found (0 if only failures); within 1% = fraction >= 0.99 (as `Trajectory.measurements_to(0.99)`). "
        "Kernel Tuner strategies are run once with `max_fevals` = the largest budget and read at each smaller one "
        "(same configurations as a run with the smaller `max_fevals`, checked), except "
        f"{', '.join(sorted(kts.BUDGET_AWARE))}, run once per budget; dual_annealing gets an unlimited inner "
        "scipy call limit (`maxfun`, which counts repeats) so that Kernel Tuner's distinct-configuration budget "
        "stops it (else it stops after a fraction of it). Details: docs/kernel-tuner-interop.md.\n")
    lines.append("hybridperf's loop is budget-aware (its start and batch sizes scale with the budget), so it runs "
                 "once per budget: `replay(sweep, kernel, gpu, budget=B, seed=s, prior=P)`, run to the budget (the "
                 "stop rule is recorded, not applied). `hybridperf random` is one random order per seed, read at "
                 "each budget. The priors:\n")
    lines += [f"- **{_short(m)}**: {note}" for m, note in priors.items()]
    lines.append("\nThe transfer prior of a cache is learnt from the *other* GPUs' sweeps of the same kernel (what "
                 "a user tuning a new GPU has); the replayed GPU's own runs never enter a prior.\n")
    secs = df.groupby("method")["seconds"].sum().sort_values(ascending=False)
    lines.append(f"Run time: {secs.sum() / 60:.1f} min summed over the runs (one process, 2 cores shared with other "
                 f"jobs; this invocation's wall time {wall_s / 60:.1f} min, runs found in the log are not redone). "
                 "Per method (s, summed over runs): " + ", ".join(f"{_short(m)} {v:.0f}" for m, v in secs.items())
                 + ".\n")
    return lines


def _overview(df: pd.DataFrame, budgets: list[int], reference: bool = True) -> list[str]:
    lines = ["## All caches pooled (median over cache x seed runs)\n"]
    overall = summary(df, budgets, ["method"])
    overall["method"] = overall["method"].map(_short)
    lines.append(md_table(overall.sort_values(f"median @{budgets[-1]}", ascending=False), ".3f") + "\n")
    lines.append("## Median over caches of the per-cache medians\n")
    lines.append("Each cache counts once (issue 17's medians are this statistic: its Kernel Tuner numbers "
                 "reproduce to the third decimal with it, not with the pooled median).\n")
    per_cache = cache_medians(df)
    lines.append(md_table(per_cache.sort_values(f"@{budgets[-1]}", ascending=False), ".3f") + "\n")
    if reference and 30 in budgets and 50 in budgets:
        lines.append("## Against issue 17's reference numbers (@30 / @50)\n")
        ref = []
        for m in [*[_short(x) for x in LOOPS], *ISSUE_17]:
            d = df.loc[df["method"].map(_short) == m]
            pc = per_cache.loc[per_cache["method"] == m]
            if d.empty or pc.empty:
                continue
            a, b = (d.loc[d["budget"] == x] for x in (30, 50))
            m30, m50, w30, w50 = ISSUE_17.get(m, ISSUE_17["hybridperf model loop (issue 17)"])
            ref.append({"method": m, "issue 17 median @30/@50": f"{m30:.3f} / {m50:.3f}"
                        + ("" if m in ISSUE_17 else " (the loop then)"),
                        "median of per-cache medians": f"{pc['@30'].iloc[0]:.3f} / {pc['@50'].iloc[0]:.3f}",
                        "issue 17 within 1%": f"{w30} / {w50} of 100",
                        "measured within 1%": f"{int(a['within_1pct'].sum())} / {int(b['within_1pct'].sum())}"
                                              f" of {len(b)}"})
        lines.append(md_table(pd.DataFrame(ref)) + "\n")
    return lines


def _targets(df: pd.DataFrame, budgets: list[int]) -> list[str]:
    tr = target_rows(df, budgets)
    if tr.empty:
        return []
    lines = ["## Issue 17's targets, per cache: loop (transfer prior) median >= best Kernel Tuner strategy's\n",
             f"The best of {df['method'].str.startswith(KT_PREFIX).groupby(df['method']).any().sum()} strategies' "
             "medians, chosen per cache and budget after the fact, is an optimistic bar: with 10 seeds the maximum "
             "of many noisy medians sits above any one strategy's.\n"]
    for b in (20, 30, 50):
        t = tr.loc[tr["budget"] == b]
        if len(t):
            lines.append(f"- @{b}: {int(t['loop >= best KT'].sum())} of {len(t)} caches against the best of all "
                         f"strategies run, {int(t['loop >= best of 4'].sum())} against the best of issue 17's four")
    d50 = df.loc[(df["method"] == LOOP) & (df["budget"] == 50)]
    if len(d50):
        med = d50.groupby("cache")["fraction_of_optimum"].median().median()
        lines.append(f"- @50, transfer prior: median over caches {med:.3f} (target >= 0.98), within 1% on "
                     f"{int(d50['within_1pct'].sum())} of {len(d50)} seed-runs (target >= 70 of 100)")
        five = d50.loc[d50["seed"] < 5].groupby("cache")["within_1pct"].agg(["sum", "size"])
        short = five.loc[five["sum"] < 4]
        lines.append(f"- EVALUATION.md's loop target (within 1% in <= 50 runs on >= 4 of 5 seeds, seeds 0-4, on every "
                     f"Kernel Tuner sweep): met on {len(five) - len(short)} of {len(five)} caches"
                     + ("" if short.empty else "; not on " + ", ".join(f"{c} ({int(r['sum'])} of {int(r['size'])})"
                                                                        for c, r in short.iterrows())))
    lines.append("\nWhy a cache stays below: `experiments/results/loop_shortfall.md` (how many configurations lie "
                 "within 1% / 5% / 15% of the optimum, the repeats' noise, how isolated the optimum is, and where "
                 "the transfer prior ranks it).\n")
    lines.append("\n" + md_table(tr, ".3f") + "\n")
    return lines


def _calibration(dec: pd.DataFrame, df: pd.DataFrame) -> list[str]:
    if dec.empty:
        return []
    lines = ["## Stop rule: is P(a configuration > 1% faster remains) calibrated?\n",
             "Every batch a loop run chose after its start (all budgets, all seeds) is a decision point: the rule's "
             "estimate then, against whether the cache held a configuration more than 1% faster than the best "
             "measured so far. The rule stops below 5% (`stop_probability`).\n"]
    for m, d in dec.groupby("method"):
        low = d.loc[d["p_better"] < 0.05]
        lines.append(f"- {_short(m)}: {len(d)} decisions; estimate < 5% at {len(low)}, and a better configuration "
                     f"still remained at {int(low['better_remained'].sum())} of them"
                     + (f" ({low['better_remained'].mean():.0%})" if len(low) else "") + f"; base rate "
                     f"{d['better_remained'].mean():.0%} of decisions had one remaining")
    lines.append("\n" + md_table(calibration_table(dec), ".3f") + "\n")
    lines.append("Where the rule said stop (first time per run), per budget:\n")
    lines.append(md_table(stop_summary(dec, df), ".3f") + "\n")
    return lines


def _per_cache(df: pd.DataFrame, budgets: list[int], stem: str) -> list[str]:
    lines = ["## Per cache\n"]
    core = [KT_PREFIX + s for s in kts.CORE_STRATEGIES]
    for cache in sorted(df["cache"].unique()):
        d = df.loc[df["cache"] == cache]
        per = summary(d, budgets, ["method"])
        keep = per["method"].isin([*LOOPS, HP_RANDOM, *core])
        best_other = per.loc[~keep].sort_values(f"median @{budgets[-1]}", ascending=False).head(1)
        order = {m: i for i, m in enumerate([*LOOPS, HP_RANDOM, *core])}
        per = pd.concat([per.loc[keep].sort_values("method", key=lambda m: m.map(order)), best_other])
        per["method"] = per["method"].map(_short)
        per.loc[per.index.isin(best_other.index), "method"] += " (best other KT strategy)"
        lines.append(f"### {cache} (optimum {d['optimum_ms'].iloc[0]:.6g} ms)\n")
        lines.append(f"![{cache}]({stem}_{_slug(cache)}.png)\n")
        lines.append(md_table(per, ".3f") + "\n")
    return lines


def report(df: pd.DataFrame, dec: pd.DataFrame, budgets: list[int], args: argparse.Namespace, notes: list[str],
           wall_s: float, kt_version: str | None, stem: str, priors: dict[str, str]) -> str:
    """The markdown report: set-up, overall tables, targets, stop-rule calibration, per-cache tables, checks."""
    lines = _intro(df, budgets, args, wall_s, kt_version, priors)
    lines += _overview(df, budgets, reference=not getattr(args, "held_out", False)) + _targets(df, budgets)
    lines += _calibration(dec, df) + _per_cache(df, budgets, stem)
    lines.append("## Checks\n")
    lines += [f"- {n}" for n in notes]
    if args.check_prefix and not any("differ from" in n for n in notes):
        lines.append("- Prefix check (seed 0, every cache and every non-budget-aware strategy read from one long "
                     f"run): the times of the first {budgets[0]} configurations of the max_fevals={budgets[-1]} run "
                     f"equal those of a max_fevals={budgets[0]} run in every case.")
    return "\n".join(lines) + "\n"
