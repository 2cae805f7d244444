"""Commands that describe what ships: gpus (and gpus show NAME), kernels, datasets, reproduce."""
from __future__ import annotations

import argparse
from typing import Any

from hybridperf.cli.output import clean, dump_json
from hybridperf.cli.render import print_fields, print_note, print_table

__all__ = ["add_commands"]


def cmd_gpus(args: argparse.Namespace) -> int:
    from hybridperf.hardware import list_gpus

    if args.show:
        return _show_gpu(args)
    rows = [{"name": g.key, "gpu": g.name, "cc": g.compute_capability, "sms": g.sm_count,
             "clock_mhz": g.core_clock_mhz, "dram_gbs": g.dram_bandwidth_gbs, "fp32_gflops": g.peak_fp32_gflops,
             "aliases": ", ".join(g.aliases)} for g in list_gpus()]
    if args.json:
        dump_json(rows)
    else:
        print_table(rows)
        print_note("every value with its source: hybridperf gpus show NAME")
    return 0


def _show_gpu(args: argparse.Namespace) -> int:
    from hybridperf.hardware import describe_gpu, load_gpu

    g = load_gpu(args.show)
    rows = describe_gpu(g)
    if args.json:
        dump_json({"name": g.name, "key": g.key, "compute_capability": g.compute_capability, "aliases": list(g.aliases),
                   "path": g.path, "sha256": g.sha256, "values": [{k: clean(v) for k, v in r.items()} for r in rows]})
        return 0
    print_note(f"{g.name} ({g.key}): compute capability {g.compute_capability}; aliases "
               f"{', '.join(g.aliases) or '-'}")
    print_note(f"file {g.path}")
    for section, title in (("spec", "datasheet values"), ("model", "machine parameters of the analytical models"),
                           ("limits", "per-SM limits")):
        print()
        print_fields([(r["name"], r["value"], r["source"]) for r in rows if r["section"] == section],
                     ["name", "value", "source"], title=f"[{section}] {title}")
    return 0


def cmd_kernels(args: argparse.Namespace) -> int:
    from hybridperf.kernel import list_kernels
    from hybridperf.references import cite

    rows = [{"name": k.name, "space": k.space_size(), "sizes": ", ".join(k.size_names),
             "config": ", ".join(k.config_names), "description": cite(k.description)} for k in list_kernels()]
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
    print_table(df, ["name", "rows", "ok", "failed", "invalid", "noise_cv", "data_mb", "licence", "kernels", "gpus"])
    print_note("noise_cv: per-config coefficient of variation of repeats, median / p95 (the floor under any "
               "accuracy claim)")
    if args.verbose:
        for r in rows:
            print_note(f"\n{r['name']}: sizes {r['sizes']}; configs {r['configs']}")
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    from hybridperf.evaluation.reproduce import run_checks

    checks = run_checks()
    if args.json:
        dump_json([{"id": c.id, "paper": c.paper, "computed": c.computed, "rel_error": c.rel_error, "ok": c.ok,
                    "tolerance": c.tolerance, "source": c.source, "note": c.note} for c in checks])
    else:
        print_table([{"check": c.id, "result": "pass" if c.ok else "FAIL", "paper": f"{c.paper:.6g}",
                      "computed": f"{c.computed:.6g}", "rel_error": f"{c.rel_error:.1e}",
                      "tolerance": f"{c.tolerance:.0e}",
                      "source": c.source + (f"; {c.note}" if c.note else "")} for c in checks])
        failed = sum(not c.ok for c in checks)
        print(f"\n{len(checks) - failed} passed, {failed} failed")
    return 0 if all(c.ok for c in checks) else 1


def add_commands(sub: Any) -> None:
    s = sub.add_parser("gpus", help="list the shipped GPU specs, or show one with every value and its source",
                       epilog="examples:\n  hybridperf gpus\n  hybridperf gpus show a100\n"
                              "  hybridperf gpus show my-gpu.toml --json")
    s.add_argument("what", nargs="*", metavar="show NAME",
                   help="'show' and a shipped GPU name or alias, or a spec TOML path")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=_gpus_entry)

    s = sub.add_parser("kernels", help="list the shipped kernel descriptors",
                       epilog="examples:\n  hybridperf kernels\n  hybridperf kernels --wide")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_kernels)

    s = sub.add_parser("datasets", help="list the shipped datasets with rows, GPUs, kernels and noise floor",
                       epilog="examples:\n  hybridperf datasets\n  hybridperf datasets -v   # also size and config "
                              "ranges")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_datasets)

    s = sub.add_parser("reproduce", help="recompute the seed papers' published numbers (exit 1 on any failure)",
                       epilog="examples:\n  hybridperf reproduce\n  hybridperf reproduce --json")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_reproduce)


def _gpus_entry(args: argparse.Namespace) -> int:
    from hybridperf.errors import UsageError

    what = list(args.what)
    if what and (what[0] != "show" or len(what) != 2):
        name = what[-1] if what[-1] != "show" else "a100"
        raise UsageError(f"gpus {' '.join(what)}: write 'hybridperf gpus' to list them or 'hybridperf gpus show "
                         f"{name}' for one")
    args.show = what[1] if what else None
    return cmd_gpus(args)
