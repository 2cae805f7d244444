"""Commands that describe what ships: gpus, kernels, datasets, reproduce."""
from __future__ import annotations

import argparse
from typing import Any

from hybridperf.cli.output import clean, dump_json, print_table, records

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
    from hybridperf.kernel import available_kernels

    rows = [{"name": k.name, "from": origin, "sizes": ",".join(k.size_names), "config": ",".join(k.config_names),
             "space": k.space_size(), "description": k.description[:60]} for origin, k in available_kernels()]
    if args.json:
        dump_json(rows)
    else:
        print_table(rows)
    return 0


def cmd_kernels_check(args: argparse.Namespace) -> int:
    from hybridperf.datasets import load_sources
    from hybridperf.kernel_check import check_descriptor

    data = load_sources(args.data, check_names=False)[0] if args.data else None
    res = check_descriptor(args.file, data, gpus=args.gpu)
    k = res.kernel
    if args.json:
        dump_json({"kernel": k.name, "sha256": k.sha256, "space": res.space, "notes": list(res.notes),
                   "runs": res.runs, **{name: None if t is None else records(t.reset_index() if name == "feasibility"
                                                                              else t)
                                        for name, t in (("feasibility", res.feasibility), ("models", res.models),
                                                        ("counters", res.counters))}})
        return 0
    print(f"{k.name}: valid descriptor; sizes {', '.join(k.size_names) or '-'}; config "
          f"{', '.join(k.config_names) or '-'}; {res.space:,} configurations before constraints")
    for note in res.notes:
        print(f"note: {note}")
    if res.feasibility is not None:
        print(f"\n{res.runs:,} runs compared. Measured status against analytical feasibility:")
        print_table(res.feasibility.reset_index())
        print("\nEach time model against the measured times of the ok, feasible runs (per GPU):")
        print_table(res.models)
        print("spearman: rank correlation of the model's time with the measured one; median_abs_log_error: "
              "|log(measured/model)|, as is and after one scale per GPU (0.69 = a factor of 2)")
    if res.counters is not None:
        print("\nCounters that measure a descriptor field (measured / descriptor):")
        print_table(res.counters)
    return 0


def cmd_kernels_new(args: argparse.Namespace) -> int:
    from hybridperf.datasets import load_sources
    from hybridperf.kernel_template import write_descriptor_template

    data = load_sources(args.from_data, check_names=False)[0] if args.from_data else None
    write_descriptor_template(args.name, args.output, data, force=args.force)
    print(f"wrote {args.output}: descriptor {args.name!r} with placeholder formulas; edit them, then run "
          f"'hybridperf kernels check {args.output}" + (f" --data {args.from_data[0]}'" if args.from_data else "'"))
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
    from hybridperf.cli import argtypes as t

    s = sub.add_parser("gpus", help="list the shipped GPU specs")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_gpus)

    s = sub.add_parser("kernels", help="list the kernel descriptors (shipped, registered, on the search path); "
                                       "'kernels check FILE', 'kernels new NAME'")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_kernels)
    ks = s.add_subparsers(dest="kernels_command", parser_class=type(s), metavar="{check,new}")
    c = ks.add_parser("check", help="validate a descriptor; with --data, compare it with recorded runs")
    c.add_argument("file", type=t.kernel, help="descriptor file (or name)")
    c.add_argument("--data", action="append", metavar="SWEEP", help="sweep files or dataset names with runs of it")
    c.add_argument("--gpu", action="append", help="compare on these GPUs only (spec names as the rows carry them)")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_kernels_check)
    n = ks.add_parser("new", help="write a descriptor to fill in (parameters from a sweep with --from)")
    n.add_argument("name", help="the kernel's name (letters, digits, - _ . +)")
    n.add_argument("-o", "--output", required=True, help="descriptor file to write (.toml)")
    n.add_argument("--from", dest="from_data", action="append", metavar="SWEEP",
                   help="take size and config parameters and their values from these runs")
    n.add_argument("--force", action="store_true", help="replace an existing file")
    n.set_defaults(func=cmd_kernels_new)

    s = sub.add_parser("datasets", help="list the shipped datasets with rows, GPUs, kernels and noise floor")
    s.add_argument("--json", action="store_true")
    s.add_argument("-v", "--verbose", action="store_true", help="also size and config ranges")
    s.set_defaults(func=cmd_datasets)

    s = sub.add_parser("reproduce", help="recompute the seed papers' published numbers (exit 1 on any failure)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_reproduce)


