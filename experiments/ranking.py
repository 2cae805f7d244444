"""Ranking experiments: Pareto pruning, S5 ranking with 1% measured, measure-next loop vs random.

Writes experiments/results/ranking.md, ranking.csv and ranking_*.png (and, with --memory,
ranking_memory.md/.csv: peak memory of streaming a 10^7-configuration space).

    .venv/bin/python experiments/ranking.py            # everything (~10-15 min on 2 cores)
    .venv/bin/python experiments/ranking.py --quick    # 2 seeds, smaller loop budget
    .venv/bin/python experiments/ranking.py --memory   # only the streaming-memory benchmark
    .venv/bin/python experiments/ranking.py --pruning-only [--quick]   # only the default-rank pruning
                                                                      # comparison (ranking_pruning.md)
"""
from __future__ import annotations

import argparse
import importlib.util
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
if importlib.util.find_spec("hybridperf") is None:  # not installed: this checkout; else PYTHONPATH's (--tag runs)
    sys.path.insert(0, str(ROOT))

from ranking_memory import memory_bench, write_memory
from ranking_pruning import evaluate_sweep, held_out_sweeps
from ranking_pruning import write as write_pruning

from hybridperf.analytical.run import analyze
from hybridperf.datasets import load_dataset
from hybridperf.evaluation.evaluate import evaluate
from hybridperf.kernel import load_kernel
from hybridperf.search.loop import LoopOptions
from hybridperf.search.measure_next import replay, replay_pool
from hybridperf.search.pareto import pareto_mask, pareto_ranks
from hybridperf.search.plots import pareto_plot, rank_plot, trajectory_plot

OUT = ROOT / "experiments" / "results"
# Seed 003 Table 4 (Ryoo et al., CGO'08): configurations before -> after Pareto pruning.
RYOO_TABLE4 = [("matrix multiplication", 93, 11), ("CP", 38, 10), ("SAD", 908, 16), ("MRI-FHD", 175, 30)]


@dataclass(frozen=True)
class Group:
    """One (dataset, kernel, GPU, size) sweep: a recorded exhaustive search space."""

    label: str
    dataset: str
    gpu: str
    rows: pd.DataFrame
    note: str = ""


def load_groups() -> list[Group]:
    groups = []
    groups.append(Group("UCI SGEMM, GTX 680", "uci-sgemm-gtx680", "geforce-gtx-680", load_dataset("uci-sgemm-gtx680")))
    for ds, label in (("kt-gemm-rtx", "KT gemm (CLBlast)"), ("kt-convolution", "KT convolution"),
                      ("kt-dedispersion", "KT dedispersion")):
        df = load_dataset(ds)
        for gpu, g in df.groupby("gpu", sort=True):
            groups.append(Group(f"{label}, {gpu}", ds, str(gpu), g.reset_index(drop=True)))
    return groups


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60]


def _params(rows: pd.DataFrame) -> pd.DataFrame:
    """Parameter columns without prefixes; empty cells (a source that did not vary a parameter) take the
    descriptor default, as hybridperf.learn.features does."""
    known = load_kernel(str(rows["kernel"].iloc[0])).parameters
    out = pd.DataFrame({c.split(".", 1)[1]: pd.to_numeric(rows[c], errors="coerce").to_numpy(np.float64)
                        for c in rows.columns if c.startswith(("size.", "config."))})
    for name in out.columns:
        if name in known and known[name].default is not None:
            out[name] = out[name].fillna(known[name].default)
    return out


# ---------------------------------------------------------------------------------------------
# 1. Pruning by the Pareto front alone (seed 003 Sec. 5.2) and with bandwidth screening (Sec. 5.3)

def pruning(group: Group, plots: bool) -> dict:
    rows = group.rows
    rec: dict = {"section": "pruning", "group": group.label, "configs": len(rows)}
    t = np.where(rows["status"] == "ok", rows["time_ms"].to_numpy(np.float64), np.nan)
    opt = float(np.nanmin(t))
    try:
        a = analyze(str(rows["kernel"].iloc[0]), group.gpu, _params(rows), models=["occupancy", "ryoo", "roofline"])
    except Exception as exc:  # noqa: BLE001 - reported in the table
        rec["error"] = str(exc)[:160]
        return rec
    eff = a.terms["ryoo"]["efficiency"].to_numpy()
    util = a.terms["ryoo"]["utilization"].to_numpy()
    mem = a.terms["roofline"]["memory_bound"].to_numpy(dtype=bool)
    use = a.feasible & np.isfinite(t) & np.isfinite(eff) & np.isfinite(util)
    rec.update(ok=int(np.isfinite(t).sum()), infeasible=int((~a.feasible).sum()), candidates=int(use.sum()),
               optimum_feasible=bool(np.isfinite(t[use]).any() and np.nanmin(t[use]) <= opt * (1 + 1e-12)))
    obj = np.c_[eff[use], util[use]]
    front = pareto_mask(obj, maximize=True)
    tt = t[use]
    rec.update(front=int(front.sum()), removed_pct=100 * (1 - front.sum() / len(rows)),
               best_on_front_x=float(tt[front].min() / opt))
    rec["optimum_kept"] = bool(rec["best_on_front_x"] <= 1 + 1e-12)
    rec["within1pct_kept"] = bool(rec["best_on_front_x"] <= 1.01)
    ranks = pareto_ranks(obj, maximize=True, max_rank=500)
    within = tt <= opt * 1.01
    if within.any():
        depth = int(ranks[within].min())
        kept = int((ranks <= depth).sum())
        rec.update(layers_for_1pct=depth + 1, kept_with_layers=kept, removed_with_layers_pct=100 * (1 - kept / len(rows)))
    cb = ~mem[use]
    rec["memory_bound_pct"] = float(100 * mem[use].mean())
    if cb.any():
        f2 = pareto_mask(obj[cb], maximize=True)
        rec.update(screened_front=int(f2.sum()), screened_removed_pct=100 * (1 - f2.sum() / len(rows)),
                   screened_best_x=float(tt[cb][f2].min() / opt))
    if plots:
        pareto_plot(eff[use], util[use], OUT / f"ranking_pareto_{_slug(group.label)}.png", on_front=front,
                    measured_ms=tt, title=f"{group.label}: {front.sum()} of {len(rows)} on the front")
    return rec


# ---------------------------------------------------------------------------------------------
# 2. S5: train on 1% of the configurations, rank the rest (EVALUATION.md)

def s5(group: Group, seeds: list[int], plots: bool) -> list[dict]:
    out = []
    rows = group.rows
    t_all = np.where(rows["status"] == "ok", rows["time_ms"].to_numpy(np.float64), np.nan)
    opt = float(np.nanmin(t_all))
    for seed in seeds:
        try:
            ev = evaluate(rows, "S5", budget_fraction=0.01, seed=seed)
        except Exception as exc:  # noqa: BLE001
            out.append({"section": "s5", "group": group.label, "seed": seed, "error": str(exc)[:160]})
            continue
        meas = ev.predictions["measured_ms"]
        # Random sampling with the same budget: the best of the 1% measured at random (training rows).
        test_idx = ev.predictions.index
        ok_rows = rows.index[np.isfinite(t_all)]
        train_idx = ok_rows.difference(test_idx)
        best_random = float(np.nanmin(t_all[train_idx])) if len(train_idx) else np.nan
        for _, r in ev.table.iterrows():
            # "hybrid (roofline)": the baseline chosen on this seed's 1% goes to its own column.
            method, _, base = str(r["method"]).partition(" (")
            rec = {"section": "s5", "group": group.label, "seed": seed, "method": method,
                   "baseline": base.rstrip(")") or None, "n_train": ev.n_train,
                   "n_test": ev.n_test, "top1": r["top1"], "top5": r["top5"], "spearman": r["spearman"],
                   "mape": r["mape"]}
            if r["method"] in ev.predictions.columns:
                pred = ev.predictions[r["method"]]
                top5 = pred.nsmallest(5).index
                # End to end: 1% measured at random + the model's top-5 measured, best of both.
                rec["e2e_top5"] = opt / min(best_random, float(meas.loc[top5].min()))
            out.append(rec)
        out.append({"section": "s5", "group": group.label, "seed": seed, "method": "random sampling (same 1%)",
                    "n_train": ev.n_train, "top1": opt / best_random, "top5": opt / best_random,
                    "e2e_top5": opt / best_random})
        if plots and seed == seeds[0]:
            hyb = [c for c in ev.predictions.columns if c.startswith("hybrid")]
            if hyb:
                rank_plot(ev.predictions[hyb[0]], meas, OUT / f"ranking_rank_{_slug(group.label)}.png",
                          title=f"{group.label} (S5, 1%)")
    return out


# ---------------------------------------------------------------------------------------------
# 3. Measure-next loop vs random sampling on recorded sweeps

def loop(group: Group, seeds: list[int], budget: int, members: int, plots: bool) -> list[dict]:
    rows = group.rows
    kernel = str(rows["kernel"].iloc[0])
    t0 = time.perf_counter()
    try:
        pool = replay_pool(rows, kernel, group.gpu)
    except Exception as exc:  # noqa: BLE001
        return [{"section": "loop", "group": group.label, "error": str(exc)[:160]}]
    t = np.where(rows["status"] == "ok", rows["time_ms"].to_numpy(np.float64), np.nan)
    opt = np.nanmin(t)
    m = int((t <= opt * 1.01).sum())
    n = len(rows)
    out, curves = [], {"loop": [], "random": []}
    for seed in seeds:
        for strategy in ("model", "random"):
            run = replay(rows, kernel, group.gpu, budget=budget, seed=seed, strategy=strategy, pool=pool,
                         options=LoopOptions(members=members))
            s = run.steps
            stop_n = run.stopped_at
            out.append({"section": "loop", "group": group.label, "seed": seed, "strategy": strategy,
                        "configs": n, "within1pct_configs": m, "budget": budget,
                        "to_99pct": run.measurements_to(0.99), "to_95pct": run.measurements_to(0.95),
                        "final_fraction": float(s["fraction_of_optimum"].iloc[-1]),
                        "stop_at": stop_n,
                        "fraction_at_stop": float(s["fraction_of_optimum"].iloc[stop_n - 1]) if stop_n else np.nan,
                        # Sampling without replacement: expected draws to hit one of m good configs.
                        "random_expected_to_99pct": (n + 1) / (m + 1)})
            curves["loop" if strategy == "model" else "random"].append(s["fraction_of_optimum"].to_numpy())
    if plots:
        trajectory_plot(curves, OUT / f"ranking_loop_{_slug(group.label)}.png",
                        title=f"{group.label}: {n} configs, budget {budget}")
    print(f"  loop {group.label}: {time.perf_counter() - t0:.0f}s", file=sys.stderr)
    return out


# ---------------------------------------------------------------------------------------------

def _fmt(df: pd.DataFrame) -> str:
    def cell(v: object) -> str:
        if isinstance(v, (bool, np.bool_)):
            return "yes" if v else "no"
        if isinstance(v, (float, np.floating)):
            return "" if np.isnan(v) else f"{v:.3g}" if abs(v) < 1e4 else f"{v:,.0f}"
        return "" if v is None else str(v)
    head = "| " + " | ".join(df.columns) + " |\n|" + "---|" * len(df.columns) + "\n"
    return head + "".join("| " + " | ".join(cell(v) for v in r) + " |\n" for r in df.itertuples(index=False))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 seeds, loop budget 96, no memory benchmark")
    ap.add_argument("--memory", action="store_true", help="only the streaming-memory benchmark")
    ap.add_argument("--no-memory", action="store_true", help="skip the streaming-memory benchmark")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--pruning-only", action="store_true", help="only the default-rank pruning comparison")
    args = ap.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    if args.memory or not (args.quick or args.no_memory or args.pruning_only):
        write_memory(memory_bench(), _fmt)
        if args.memory:
            return 0
    seeds = [0, 1] if args.quick else [0, 1, 2, 3, 4]
    budget = 96 if args.quick else 160
    plots = not args.no_plots
    groups = load_groups()
    print(f"loaded {len(groups)} groups in {time.perf_counter() - t0:.0f}s", file=sys.stderr)
    t1 = time.perf_counter()
    prune_rows = []
    for g in groups:
        prune_rows += evaluate_sweep(g.label, g.rows, g.gpu, seeds)
    for label, rows, gpu in held_out_sweeps():
        prune_rows += evaluate_sweep(label, rows, gpu, seeds, held_out=True)
    prune_line = write_pruning(pd.DataFrame(prune_rows), seeds, time.perf_counter() - t1, _fmt)
    print(f"default-rank pruning done at {time.perf_counter() - t0:.0f}s", file=sys.stderr)
    if args.pruning_only:
        return 0
    prune = pd.DataFrame([pruning(g, plots) for g in groups])
    print(f"pruning done at {time.perf_counter() - t0:.0f}s", file=sys.stderr)
    s5_rows = []
    for g in groups:
        s5_rows += s5(g, seeds[:1] if g.dataset == "uci-sgemm-gtx680" else seeds[:3], plots)
        print(f"  s5 {g.label} done at {time.perf_counter() - t0:.0f}s", file=sys.stderr)
    s5_df = pd.DataFrame(s5_rows)
    loop_groups = [g for g in groups if g.gpu in {"geforce-gtx-680", "geforce-rtx-2080-ti", "a100-pcie-40gb"}]
    loop_rows = []
    for g in loop_groups:
        loop_rows += loop(g, seeds, budget, members=3, plots=plots)
    loop_df = pd.DataFrame(loop_rows)
    total = time.perf_counter() - t0
    pd.concat([prune, s5_df, loop_df], ignore_index=True).to_csv(OUT / "ranking.csv", index=False)
    write_report(prune, s5_df, loop_df, seeds, budget, total, prune_line)
    print(f"wrote {OUT / 'ranking.md'} in {total:.0f}s", file=sys.stderr)
    return 0


def summary(prune: pd.DataFrame, s5_df: pd.DataFrame, loop_df: pd.DataFrame, prune_line: str) -> list[str]:
    """The EVALUATION.md targets, met or not, computed from the tables below."""
    out = ["## Targets (EVALUATION.md)\n", f"- {prune_line}"]
    p = prune.dropna(subset=["front"])
    met = p[(p["removed_pct"] >= 95) & p["within1pct_kept"].astype(bool)]
    out.append(f"- **Pruning** (>= 95% removed with the optimum or a configuration within 1% kept): met on "
               f"{len(met)} of {len(p)} sweeps ({', '.join(met['group']) or 'none'}). The front removes "
               f"{p['removed_pct'].min():.1f}-{p['removed_pct'].max():.1f}% everywhere, but its best configuration "
               f"is {p['best_on_front_x'].min():.2f}-{p['best_on_front_x'].max():.2f}x the optimum (median "
               f"{p['best_on_front_x'].median():.2f}x). Keeping the first few Pareto layers instead keeps a 1%-near "
               f"configuration while removing {p['removed_with_layers_pct'].min():.0f}-"
               f"{p['removed_with_layers_pct'].max():.0f}% (column `layers_for_1pct`). **Not met.**")
    if "method" in s5_df.columns:
        u = s5_df[(s5_df["group"].str.startswith("UCI")) & (s5_df["method"] == "hybrid")]
        if len(u):
            r = u.iloc[0]
            ok = [r["top1"] >= 0.97, r["top5"] >= 0.99, r["spearman"] >= 0.95]
            out.append(f"- **S5 on UCI SGEMM** (1% measured, {int(r['n_train'])} rows): hybrid top-1 {r['top1']:.3f} "
                       f"(>= 0.97: {'met' if ok[0] else 'not met'}), top-5 {r['top5']:.3f} (>= 0.99: "
                       f"{'met' if ok[1] else 'not met'}), Spearman {r['spearman']:.3f} (>= 0.95: "
                       f"{'met' if ok[2] else 'not met'}). The model orders the bulk of the space well but its five "
                       f"fastest predictions miss the handful of fastest configurations (see "
                       f"ranking_rank_uci-sgemm-gtx-680.png); the best of the random 1% alone scores "
                       f"{s5_df[(s5_df['group'].str.startswith('UCI')) & (s5_df['method'].str.startswith('random'))]['top1'].iloc[0]:.3f}.")
    if "strategy" in loop_df.columns:
        lines = []
        for grp, g in loop_df.dropna(subset=["strategy"]).groupby("group", sort=False):
            m, r = g[g["strategy"] == "model"], g[g["strategy"] == "random"]
            lines.append(f"{grp}: loop reached 99% in {m['to_99pct'].notna().sum()}/{len(m)} seeds "
                         f"(median final {m['final_fraction'].median():.3f}), random in "
                         f"{r['to_99pct'].notna().sum()}/{len(r)} (median final {r['final_fraction'].median():.3f}; "
                         f"expected {g['random_expected_to_99pct'].iloc[0]:,.0f} draws)")
        out.append("- **Measure-next loop vs random, same budget**: " + "; ".join(lines) + ".")
    return out + [""]


def write_report(prune: pd.DataFrame, s5_df: pd.DataFrame, loop_df: pd.DataFrame, seeds: list[int], budget: int,
                 total: float, prune_line: str) -> None:
    md = ["# Ranking: Pareto pruning, S5 ranking, measure-next loop\n",
          (f"Generated by `experiments/ranking.py` in {total / 60:.1f} min on this 2-core machine "
           f"(seeds {seeds}; numbers are from the real recorded sweeps in `datasets/`).\n")]
    md += summary(prune, s5_df, loop_df, prune_line)
    cols = ["group", "configs", "infeasible", "candidates", "front", "removed_pct", "best_on_front_x", "optimum_kept",
            "within1pct_kept", "layers_for_1pct", "removed_with_layers_pct", "memory_bound_pct", "screened_front",
            "screened_best_x", "error"]
    md += ["## 1. Pareto pruning alone (seed 003 Sec. 5.2)\n",
           ("Front over (efficiency, utilization), both maximised, among configurations that are feasible by the "
            "descriptor + GPU spec and ran. `best_on_front_x` = best measured time on the front / optimum (1.0 = "
            "optimum kept). `layers_for_1pct`: Pareto layers (non-dominated sorting) needed to keep a configuration "
            "within 1% of the optimum, and the share of the sweep still removed when keeping them. `screened_*`: "
            "roofline memory-bound configurations removed first (Sec. 5.3).\n"),
           _fmt(prune.reindex(columns=cols)),
           "\nSeed 003 Table 4 for comparison (optimum always kept): " +
           ", ".join(f"{k} {a} -> {b} ({100 * (1 - b / a):.0f}% removed)" for k, a, b in RYOO_TABLE4) + ".\n"]
    if not s5_df.empty and "method" in s5_df.columns:
        ok = s5_df.dropna(subset=["method"])
        agg = ok.groupby(["group", "method"], sort=False)[["top1", "top5", "e2e_top5", "spearman", "mape"]].median()
        agg["seeds"] = ok.groupby(["group", "method"], sort=False).size()
        md += ["\n## 2. S5: 1% of the configurations measured, the rest ranked\n",
               ("Median over seeds (UCI: one seed, it is 241,600 rows). top-k score = best measured / best measured "
                "among the k best predicted, over the held-out 99% (TenSet). `e2e_top5` = optimum / best of (the 1% "
                "measured + the 5 best predicted measured): what a user gets after 1% + 5 runs. Targets on UCI: "
                "top-1 >= 0.97, top-5 >= 0.99, Spearman >= 0.95.\n"), _fmt(agg.reset_index())]
        err = s5_df[s5_df.get("error", pd.Series(dtype=object)).notna()] if "error" in s5_df else pd.DataFrame()
        if len(err):
            md += ["\nNot evaluated: " + "; ".join(f"{r.group}: {r.error}" for r in err.itertuples()) + "\n"]
    if not loop_df.empty and "strategy" in loop_df.columns:
        ok = loop_df.dropna(subset=["strategy"])
        g = ok.groupby(["group", "strategy"], sort=False)
        agg = g[["configs", "within1pct_configs", "budget"]].first()
        agg["median_to_99pct"] = g["to_99pct"].apply(
            lambda s: np.nan if s.isna().sum() > len(s) / 2 else float(np.median(s.fillna(np.inf))))
        agg["reached_99pct"] = g["to_99pct"].apply(lambda s: f"{s.notna().sum()}/{len(s)}")
        agg["median_to_95pct"] = g["to_95pct"].apply(
            lambda s: np.nan if s.isna().sum() > len(s) / 2 else float(np.median(s.fillna(np.inf))))
        agg["reached_95pct"] = g["to_95pct"].apply(lambda s: f"{s.notna().sum()}/{len(s)}")
        agg["median_final_fraction"] = g["final_fraction"].median()
        agg["median_stop_at"] = g["stop_at"].median()
        agg["median_fraction_at_stop"] = g["fraction_at_stop"].median()
        agg["random_expected"] = g["random_expected_to_99pct"].first()
        md += ["\n## 3. Measure-next loop vs random sampling\n",
               (f"Replay on the recorded sweeps: 16 random configurations, then batches of 8 (6 fastest predicted + 2 "
                f"largest expected improvement) from a 3-member bagged hybrid model refitted each batch, up to "
                f"{budget} measurements; random sampling shares the first 16. `median_to_99pct` = measurements until "
                f"optimum / best found >= 0.99 (median over seeds; empty when most seeds never got there within the "
                f"budget). `median_stop_at` = where the stop rule (expected gain < 0.5% of the best) would have "
                f"stopped. `random_expected` = (N+1)/(m+1), the expected number of random draws to hit one of the m "
                f"configurations within 1%.\n"), _fmt(agg.reset_index())]
        err = loop_df[loop_df["strategy"].isna()] if "strategy" in loop_df else pd.DataFrame()
        if len(err):
            md += ["\nNot run: " + "; ".join(f"{r.group}: {r.error}" for r in err.itertuples()) + "\n"]
    (OUT / "ranking.md").write_text("\n".join(md), encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
