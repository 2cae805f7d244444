"""Commands that describe what ships: gpus, kernels, datasets, reproduce."""
from __future__ import annotations

import argparse
from typing import Any

from hybridperf.cli.output import clean, dump_json, print_table

__all__ = ["add_commands"]


def cmd_gpus(args: argparse.Namespace) -> int:
    from hybridperf.hardware import list_gpus

    rows = [{"name": g.key, "gpu": g.name, "cc": g.compute_capability, "sms": g.sm_count,
             "clock_mhz": g.core_clock_mhz, "dram_gbs": g.dram_bandwidth_gbs, "fp32_gflops": g.peak_fp32_gflops,
             "aliases": ",".join(g.aliases)} for g in list_gpus()]
    if args.json:
        dump_json(rows)
    else:
        print_table(rows)
    return 0


def cmd_kernels(args: argparse.Namespace) -> int:
    from hybridperf.kernel import list_kernels

    rows = [{"name": k.name, "sizes": ",".join(k.size_names), "config": ",".join(k.config_names),
             "space": k.space_size(), "description": k.description[:60]} for k in list_kernels()]
    if args.json:
        dump_json(rows)
    else:
        print_table(rows)
    return 0


def cmd_datasets(args: argparse.Namespace) -> int:
    import pandas as pd

    from hybridperf.datasets import describe_datasets

    rows = describe_datasets()
    if args.json:
        dump_json([{k: clean(v) for k, v in r.items()} for r in rows])
        return 0
    df = pd.DataFrame(rows)
    df["noise_cv"] = [f"{a:.2%} / {b:.2%}" if pd.notna(a) else "-" for a, b in zip(df.noise_cv_median, df.noise_cv_p95)]
    print_table(df, ["name", "rows", "ok", "failed", "invalid", "gpus", "kernels", "noise_cv", "licence", "data_mb"])
    print("\nnoise_cv: per-config coefficient of variation of repeats, median / p95 "
          "(the floor under any accuracy claim)")
    if args.verbose:
        for r in rows:
            print(f"\n{r['name']}: sizes {r['sizes']}; configs {r['configs']}")
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    from hybridperf.evaluation.reproduce import run_checks

    checks = run_checks()
    if args.json:
        dump_json([{"id": c.id, "paper": c.paper, "computed": c.computed, "rel_error": c.rel_error, "ok": c.ok,
                    "tolerance": c.tolerance, "source": c.source, "note": c.note} for c in checks])
    else:
        w = max(len(c.id) for c in checks)
        print(f"{'check'.ljust(w)}  {'paper':>12}  {'computed':>12}  {'rel.err':>9}  {'tol':>7}  result")
        for c in checks:
            print(f"{c.id.ljust(w)}  {c.paper:>12.6g}  {c.computed:>12.6g}  {c.rel_error:>9.2e}  "
                  f"{c.tolerance:>7.1e}  {'pass' if c.ok else 'FAIL'}  {c.source}{'; ' + c.note if c.note else ''}")
        failed = sum(not c.ok for c in checks)
        print(f"\n{len(checks) - failed} passed, {failed} failed")
    return 0 if all(c.ok for c in checks) else 1


def add_commands(sub: Any) -> None:
    s = sub.add_parser("gpus", help="list the shipped GPU specs")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_gpus)

    s = sub.add_parser("kernels", help="list the shipped kernel descriptors")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_kernels)

    s = sub.add_parser("datasets", help="list the shipped datasets with rows, GPUs, kernels and noise floor")
    s.add_argument("--json", action="store_true")
    s.add_argument("-v", "--verbose", action="store_true", help="also size and config ranges")
    s.set_defaults(func=cmd_datasets)

    s = sub.add_parser("reproduce", help="recompute the seed papers' published numbers (exit 1 on any failure)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_reproduce)


