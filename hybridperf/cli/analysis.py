"""Commands that run the analytical models: analyze and advise."""
from __future__ import annotations

import argparse
import sys
from typing import Any

from hybridperf.cli.output import clean, dump_json, print_table, records
from hybridperf.cli.tables import format_number

__all__ = ["add_commands"]

_SET_HELP = "parameter values: 4096 | 1024,2048 | 1024:8192:1024 | 1024:32768:x2 (repeatable)"


def cmd_analyze(args: argparse.Namespace) -> int:
    from hybridperf.analytical.run import MODELS, analyze
    from hybridperf.grid import parameter_grid, parse_assignments

    res = analyze(args.kernel, args.gpu, parameter_grid(parse_assignments(args.set)), models=args.model or list(MODELS))
    summary = res.summary()
    if args.json:
        rows = [{"params": {k: clean(res.params[k].iloc[i]) for k in res.params.columns},
                 "feasible": bool(res.feasible[i]), "reason": str(res.reason[i]),
                 "models": {m: {k: clean(v) for k, v in df.iloc[i].items()} for m, df in res.terms.items()}}
                for i in range(len(summary))]
        dump_json({"kernel": res.kernel.name, "gpu": res.gpu.name, "rows": rows})
        return 0
    print(f"kernel {res.kernel.name} on {res.gpu.name} (cc {res.gpu.compute_capability}, "
          f"{res.gpu.sm_count} SMs, {res.gpu.core_clock_mhz:g} MHz, {res.gpu.dram_bandwidth_gbs:g} GB/s)")
    if len(summary) == 1 and res.feasible[0]:
        for m, df in res.terms.items():
            print(f"\n[{m}]")
            row = df.iloc[0]
            width = max(len(k) for k in row.index)
            for k, v in row.items():
                print(f"  {k.ljust(width)}  {format_number(clean(v))}")
        if "mwp-cwp" in res.terms:
            print(f"\nregime: {summary['regime'].iloc[0]}")
        return 0
    print_table(summary)
    if "scaled-counts" in res.terms:
        print("\nscaled_counts_ms: seed 004's Eq. 4 with adjusting weight 1; it is meaningful only once calibrated "
              "on a measured run (the hybrid model does that per kernel and GPU)")
    n_bad = len(summary) - int(res.feasible.sum())
    if n_bad:
        print(f"\n{n_bad} of {len(summary)} configurations are infeasible (see status)")
    return 0


def cmd_advise(args: argparse.Namespace) -> int:
    from hybridperf.advise.benefits import advise, advise_samples, benefit_chart, format_advice
    from hybridperf.grid import parameter_grid, parse_assignments

    adv = advise(args.kernel, args.gpu, parameter_grid(parse_assignments(args.set)))
    report = None
    if args.samples:
        report = advise_samples(adv, args.samples, threads_per_block=args.threads_per_block, blocks=args.blocks,
                                active_warps_per_sm=args.active_warps, kernel=args.sample_kernel)
    if args.json:
        from hybridperf.advise.gpa import report_to_dict

        doc: Any = records(adv.table)
        if report is not None:
            doc = {"gpuperf": doc, "gpa": report_to_dict(report)}
        dump_json(doc)
    else:
        print(format_advice(adv))
        if report is not None:
            from hybridperf.advise.gpa import format_report

            print("\n== GPA: stall samples -> estimated speedups of code changes (Zhou et al., CGO 2021)")
            print(format_report(report, top=args.top))
    if args.chart:
        benefit_chart(adv, args.chart, row=args.row)
        print(f"wrote {args.chart}", file=sys.stderr if args.json else sys.stdout)
    return 0


def add_commands(sub: Any) -> None:
    from hybridperf.analytical.run import MODELS
    from hybridperf.cli import argtypes as t

    s = sub.add_parser("analyze", help="every analytical model's time and terms for a launch or a grid")
    s.add_argument("--gpu", required=True, help="shipped GPU name/alias or a spec TOML path")
    s.add_argument("--kernel", type=t.kernel, required=True, help="shipped descriptor name or a descriptor TOML path")
    s.add_argument("--set", action="append", default=[], metavar="NAME=VALUES", help=_SET_HELP)
    s.add_argument("--model", action="append", choices=list(MODELS), help="limit to these models")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_analyze)

    s = sub.add_parser("advise", help="bottleneck, GPUPerf benefit metrics and what to optimise")
    s.add_argument("--gpu", required=True)
    s.add_argument("--kernel", type=t.kernel, required=True)
    s.add_argument("--set", action="append", default=[], metavar="NAME=VALUES", help=_SET_HELP)
    s.add_argument("--chart", help="write the benefit X-Y chart (seed 000 Fig. 4) as PNG")
    s.add_argument("--row", type=t.non_negative_int, default=0, help="which row the chart shows")
    s.add_argument("--force", action="store_true", help="replace the chart even where it is a symbolic link")
    s.add_argument("--samples", type=t.input_file,
                   help="per-instruction stall samples: plain CSV or an ncu source-page SASS export")
    s.add_argument("--sample-kernel", help="which kernel of a multi-kernel ncu export")
    s.add_argument("--threads-per-block", type=t.positive_int, help="GPA: override the descriptor's threads per block")
    s.add_argument("--blocks", type=t.positive_int, help="GPA: override the descriptor's blocks")
    s.add_argument("--active-warps", type=t.positive_float, help="GPA: override active warps per SM (occupancy)")
    s.add_argument("--top", type=t.positive_int, default=5, help="GPA: suggestions to show")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_advise)
