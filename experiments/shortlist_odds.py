"""Are `rank`'s odds honest? The stated chance that the fastest configuration is kept, against how often it is.

Issue 12 asks `rank` to report, for its shortlist, the probability that the true optimum is in it. This script
checks that number on the 11 recorded ranking sweeps (UCI SGEMM, Kernel Tuner CLBlast gemm x3, convolution x5,
dedispersion x2), 5 seeds each, with the protocol of ``ranking_pruning.py``: a model trained as a user would on a
uniform random 1% of the sweep, then ``rank_configs(model, kernel, gpu, sizes, configs=<the sweep>)`` (the
default union shortlist, ``top=5`` shown). Per (sweep, seed): ``p_kept`` (the stated chance that the fastest
configuration is among the shortlist), ``p_shown`` (among the 5 shown), and whether the measured optimum
(exactly the fastest recorded run) is in each. A probability is honest when, over cases, the stated values
average what happens (and, binned, each bin's mean matches its frequency); the Brier score says how sharp.

    .venv/bin/python experiments/shortlist_odds.py [--seeds N]   # results/shortlist_odds.md and .csv
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, git_commit, md_table  # noqa: E402
from ranking import load_groups  # noqa: E402
from ranking_pruning import _sizes, user_model  # noqa: E402

from hybridperf.search.rank import rank_configs  # noqa: E402

TOP = 5
SHARES = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2)  # predicted-fastest shares checked beside rank's default
# Earlier methods' results (label, file in results/), side by side with this code's.
EARLIER = (("held-out curve as measured (d1e1c7f)", "shortlist_odds_curve.csv"),
           ("intervals as independent (3d0d7fa)", "shortlist_odds_main.csv"))


def one(group, seed: int, shares: bool = True) -> tuple[dict, list[dict]]:
    """The case's record, and its records at :data:`SHARES` (none without ``shares``: code before the order
    correlation cannot make them)."""
    rows = group.rows
    t = np.where(rows["status"] == "ok", rows["time_ms"].to_numpy(np.float64), np.nan)
    opt_index = int(np.nanargmin(t))  # rank_configs' index = row position of configs
    model, n_train = user_model(rows, seed)
    t0 = time.perf_counter()
    res = rank_configs(model, str(rows["kernel"].iloc[0]), group.gpu, _sizes(rows), configs=rows, top=TOP)
    kept = set(res.candidates["index"].astype(int))
    shown = set(res.table["index"].astype(int))
    rec = {"sweep": group.label, "seed": seed, "n_train": n_train, "kept": len(kept),
           "p_kept": res.p_fastest_kept, "opt_kept": opt_index in kept,
           "p_shown": res.p_fastest_in_table, "opt_shown": opt_index in shown,
           "contenders": res.n_contenders, "seconds": time.perf_counter() - t0}
    return rec, at_shares(model, group, opt_index, seed) if shares else []


def at_shares(model, group, opt_index: int, seed: int) -> list[dict]:
    """The predicted-fastest k = round(share x n) of the n feasible configurations (no front, as ``--top-k``
    share with ``prune='none'`` would keep), at each of :data:`SHARES`: the chance stated now (rank's reading,
    NaN where the halves do not resolve the share), the curve read as is, the order correlation read at any
    share, and whether the measured optimum is among them."""
    from hybridperf.learn.best_of import best_in_top_k  # this code's (see one)
    from hybridperf.learn.model import predict_rows
    from hybridperf.learn.shortlist import hit_probability

    rows = group.rows.reset_index(drop=True)
    curve = model.intervals.shortlist_hits[str(rows["kernel"].iloc[0])]
    pred = predict_rows(model, rows.assign(gpu=group.gpu), check=False)["time_ms"].to_numpy(np.float64)
    feasible = np.flatnonzero(np.isfinite(pred))
    order = feasible[np.argsort(pred[feasible], kind="stable")]  # ties by index, as rank orders them
    n = len(order)
    place = np.flatnonzero(order == opt_index)
    opt_rank = int(place[0]) if place.size else n
    out = []
    for share in SHARES:
        k = max(1, round(share * n))
        out.append({"sweep": group.label, "seed": seed, "share": share, "n": n, "k": k, "rho": curve.get("rho"),
                    "finest_resolved": curve["q"][0], "stated": hit_probability(curve, k / n, n),
                    "curve_as_measured": hit_probability(curve, k / n),
                    "correlation_any_share": float(best_in_top_k(curve["rho"], n, k)[0]),
                    "opt_in": opt_rank < k})
    return out


SHARES_TEXT = (
    "Per (sweep, seed) and share: the k = round(share x n) configurations the model predicts fastest among the n "
    "feasible ones (rank's top-k alone, no front), whether the measured optimum is among them, and three "
    "chances: `stated` (what rank states: the order correlation at the space's size, NaN where the share is finer "
    "than the halves resolve), `curve` (the halves' curve read as is, d1e1c7f's reading, NaN likewise) and "
    "`correlation` (the order correlation read at every share, resolved or not). Brier scores over the cases each "
    "states; `constant`: the hindsight rate of those cases.\n")


def _brier(p: pd.Series, hit: pd.Series) -> float:
    ok = p.notna()
    return float(np.mean((p[ok] - hit[ok]) ** 2)) if ok.any() else np.nan


def _by_share(shares: pd.DataFrame) -> pd.DataFrame:
    out = []
    for share, g in shares.groupby("share"):
        hit = g["opt_in"].astype(float)
        row = {"share": share, "cases": len(g), "kept": hit.mean()}
        for col, name in (("stated", "stated"), ("curve_as_measured", "curve"),
                          ("correlation_any_share", "correlation")):
            ok = g[col].notna()
            row |= {f"{name} cases": int(ok.sum()), f"{name} mean": g.loc[ok, col].mean() if ok.any() else np.nan,
                    f"{name} kept": hit[ok].mean() if ok.any() else np.nan, f"{name} Brier": _brier(g[col], hit)}
        row["constant Brier"] = float(np.mean((hit.mean() - hit) ** 2))
        out.append(row)
    return pd.DataFrame(out)


def _share_sweeps(shares: pd.DataFrame, share: float) -> pd.DataFrame:
    g = shares[np.isclose(shares["share"], share)]
    return g.groupby("sweep", sort=False).agg(rho=("rho", "mean"), finest_resolved=("finest_resolved", "mean"),
                                               stated=("stated", "mean"), correlation=("correlation_any_share", "mean"),
                                               kept=("opt_in", "mean")).reset_index()


def reliability(df: pd.DataFrame, p: str, hit: str) -> pd.DataFrame:
    edges = [0.0, 0.2, 0.4, 0.6, 0.8, 0.95, 1.0 + 1e-9]
    b = pd.cut(df[p], edges, right=False)
    g = df.groupby(b, observed=True).agg(cases=(hit, "size"), stated=(p, "mean"), happened=(hit, "mean"))
    g.index = [f"[{iv.left:.2f}, {min(iv.right, 1.0):.2f}{')' if iv.right < 1 else ']'}" for iv in g.index]
    return g.reset_index(names="stated bin")


def _summary(df: pd.DataFrame, method: str) -> list[dict]:
    out = []
    for p, hit, what in (("p_kept", "opt_kept", "the shortlist"), ("p_shown", "opt_shown", f"the {TOP} shown")):
        ok = df[np.isfinite(df[p])]
        out.append({"method": method, "set": what, "cases": len(ok), "mean stated": ok[p].mean() if len(ok) else np.nan,
                    "happened": ok[hit].mean() if len(ok) else np.nan,
                    "Brier": float(np.mean((ok[p] - ok[hit]) ** 2)) if len(ok) else np.nan,
                    "Brier of the base rate": float(np.mean((ok[hit].mean() - ok[hit]) ** 2)) if len(ok) else np.nan,
                    "no odds (NaN)": int((~np.isfinite(df[p])).sum())})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--tag", help="write results/shortlist_odds_TAG.csv only (an older checkout on PYTHONPATH), "
                                  "which the report shows side by side when EARLIER names it")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    recs, share_recs = [], []
    for group in load_groups():
        for seed in range(args.seeds):
            rec, at = one(group, seed, shares=not args.tag)
            recs.append(rec)
            share_recs += at
            r = recs[-1]
            print(f"  {r['sweep']} seed {seed}: p_kept {r['p_kept']:.3f} kept {r['opt_kept']} | "
                  f"p_shown {r['p_shown']:.3f} shown {r['opt_shown']}", flush=True)
    df = pd.DataFrame(recs)
    if args.tag:
        df.to_csv(RESULTS / f"shortlist_odds_{args.tag}.csv", index=False)
        return 0
    df.to_csv(RESULTS / "shortlist_odds.csv", index=False)
    shares = pd.DataFrame(share_recs)
    shares.to_csv(RESULTS / "shortlist_odds_shares.csv", index=False)
    earlier = {label: pd.read_csv(RESULTS / name) for label, name in EARLIER if (RESULTS / name).exists()}
    before = earlier.get(EARLIER[0][0])
    now = "order correlation at the space's size (this code)"
    summ = _summary(df, now) + [r for label, frame in earlier.items() for r in _summary(frame, label)]
    lines = [f"# Shortlist odds: stated against measured\n\nRegenerate with `python experiments/shortlist_odds.py` "
             f"(commit {git_commit()}, Python {sys.version.split()[0]}; {time.perf_counter() - t0:.0f} s).\n",
             __doc__.split("\n\n", 1)[1].rsplit("\n\n", 1)[0] + "\n",
             f"Methods: `{now}`: `rank`'s odds now (:mod:`hybridperf.learn.best_of`: the held-out halves' hit rates "
             f"fitted by a Gaussian-copula order correlation, read at the space's size); `{EARLIER[0][0]}`: the same "
             "halves' hit rate read as is at the shortlist's share (`results/shortlist_odds_curve.csv`: this script "
             f"at commit d1e1c7f); `{EARLIER[1][0]}`: the first odds, every configuration's prediction interval taken "
             "as an independent error (`results/shortlist_odds_main.csv`: this script at commit 3d0d7fa, its printed "
             "values, 3 decimals). NaN: no odds stated (a share finer than the model's held-out runs resolve: the 5 "
             "shown are 0.02-1.1% of these spaces, finer than halves of 1% samples resolve).\n", "## Overall\n",
             md_table(pd.DataFrame(summ))]
    for label, frame in ((now, df), *earlier.items()):
        for p, hit, what in (("p_kept", "opt_kept", "the shortlist"), ("p_shown", "opt_shown", f"the {TOP} shown")):
            ok = frame[np.isfinite(frame[p])]
            if len(ok):
                lines += [f"\n## Reliability: {what}, {label}\n", md_table(reliability(ok, p, hit))]
    per = df.groupby("sweep", sort=False).agg(
        kept=("kept", "median"), p_kept=("p_kept", "mean"), opt_kept=("opt_kept", "mean"),
        p_shown=("p_shown", "mean"), opt_shown=("opt_shown", "mean"), contenders=("contenders", "median"))
    if before is not None:
        per.insert(2, "p_kept_d1e1c7f", before.groupby("sweep", sort=False)["p_kept"].mean())
    lines += ["\n## Per sweep (mean over seeds)\n", md_table(per.reset_index())]
    lines += ["\n## Other shares: the predicted-fastest k of the space\n", SHARES_TEXT, md_table(_by_share(shares)),
              "\nAt 5 %, by sweep (mean over seeds):\n", md_table(_share_sweeps(shares, 0.05))]
    (RESULTS / "shortlist_odds.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
