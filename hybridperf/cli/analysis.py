"""Commands that run the analytical models: analyze and advise."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from typing import Any

from hybridperf.cli.output import clean, dump_json, dump_json_rows, records, short_regimes, write_table
from hybridperf.cli.render import print_fields, print_note, print_table

__all__ = ["add_commands"]

_ANALYZE_EXAMPLES = """examples:
  hybridperf analyze --gpu a100 --kernel matvec --set N=4096
  hybridperf analyze --gpu a100 --kernel matvec --set N=4096 --terms
  hybridperf analyze --gpu titan-v --kernel tiled-matmul --set N=512:4096:x2 --set TILE=8,16,32 -o grid.csv"""
_ADVISE_EXAMPLES = """examples:
  hybridperf advise --gpu a100 --kernel matvec --set N=1024,16384 --chart benefits.png
  hybridperf advise --gpu v100 --kernel matvec --set N=4096 --samples sass_samples.csv"""
_SET_HELP = "parameter values: 4096 | 1024,2048 | 1024:8192:1024 | 1024:32768:x2 (repeatable)"


def _baseline_line(args: argparse.Namespace, kernel: str, gpu: str) -> str:
    """Which analytical model a trained model uses as this kernel's baseline on this GPU (with -m), else how to
    find out: the kernel's own, or for a GPU the model has no runs of the kernel on, the transfer fit's."""
    if not args.model_file:
        return ("baseline: a trained model picks one of these times per kernel from measured runs; "
                "pass -m MODEL to see which")
    from hybridperf.analytical.run import TIME_MODELS
    from hybridperf.learn.baseline import baseline_column, group_id
    from hybridperf.learn.model import load_model

    model = load_model(args.model_file)
    chosen = model.features.baselines_.get(kernel)
    est = model.estimator
    trained = model.features.domain_.get(kernel, {}).get("gpus", [])
    if chosen and gpu not in trained and getattr(est, "transfer_regressor_", None) is not None \
            and group_id(kernel) in getattr(est, "transfer_kernels_", []):
        column = est.transfer_baseline_column  # e.g. log_hierarchical_ms, the hierarchical time
        other = {baseline_column(m): m for m in TIME_MODELS}.get(column, str(column))
        return (f"baseline: {args.model_file} has no runs of {kernel} on {gpu}, so it corrects the {other} "
                f"time (the {chosen} time on the GPUs it trained {kernel} on)")
    if chosen:
        return f"baseline: {args.model_file} corrects the {chosen} time for {kernel}"
    return (f"baseline: {args.model_file} was not trained on {kernel}; it would use its fallback "
            f"{model.baseline or 'none (boosting only)'}")


def _json_rows(res: Any, block: int = 2000) -> Iterator[dict[str, Any]]:
    """``analyze --json``'s rows, made a block at a time: each frame's slice turned into records once (row by
    row .iloc took 32 of the 50 s of a 20,000-row grid; the whole grid at once, 4 GB for 100,000 rows)."""
    for start in range(0, len(res.params), block):
        stop = min(start + block, len(res.params))
        params = res.params.iloc[start:stop].to_dict("records")
        terms = {m: df.iloc[start:stop].to_dict("records") for m, df in res.terms.items()}
        for j, i in enumerate(range(start, stop)):
            yield {"params": {k: clean(v) for k, v in params[j].items()},
                   "feasible": bool(res.feasible[i]), "reason": str(res.reason[i]),
                   "models": {m: {k: clean(v) for k, v in records[j].items()} for m, records in terms.items()}}


def cmd_analyze(args: argparse.Namespace) -> int:
    from hybridperf.analytical.run import MODELS, analyze
    from hybridperf.grid import parameter_grid, parse_assignments

    res = analyze(args.kernel, args.gpu, parameter_grid(parse_assignments(args.set)), models=args.model or list(MODELS))
    summary = res.summary()
    if args.json:
        dump_json_rows({"kernel": res.kernel.name, "gpu": res.gpu.name}, _json_rows(res))
        return 0
    if args.output:
        write_table(_all_terms(res) if args.terms else summary, args.output)
    print(f"kernel {res.kernel.name} on {res.gpu.name} (cc {res.gpu.compute_capability}, "
          f"{res.gpu.sm_count} SMs, {res.gpu.core_clock_mhz:g} MHz, {res.gpu.dram_bandwidth_gbs:g} GB/s)")
    if args.terms:
        _print_terms(res)
    else:
        # The parameters the grid varies (and the status, when a row cannot launch), then the times (the
        # hierarchical roofline first: the closest to measured times uncalibrated), the regime and the occupancy
        # limiter, then the rest and the parameters every row shares: a narrow terminal drops the last columns.
        params = [p for p in res.kernel.parameters if p in summary.columns]
        varying = [p for p in params if summary[p].nunique(dropna=False) > 1]
        status = ["status"] if not res.feasible.all() else []
        short = [c for c in dict.fromkeys([
            *varying, *status, "hierarchical_ms", "mwp_cwp_ms", "gpuperf_ms", "regime", "limiter", "status",
            "hierarchical_limiter", "roofline_ms", "scaled_counts_ms", "occupancy", "roofline_bound",
            "register_spill", *(p for p in params if p not in varying)]) if c in summary.columns]
        print_table(short_regimes(summary), short)
        shared = [p for p in params if p not in varying]
        if shared:
            print_note("every row: " + ", ".join(f"{p}={_value(summary[p].iloc[0])}" for p in shared))
        print_note(_baseline_line(args, res.kernel.name, res.gpu.key))
        if "scaled-counts" in res.terms:
            print_note("scaled_counts_ms: occupancy-scaled counts (Karan Kumar, NYU report) with adjusting weight 1; "
                       "meaningful only once calibrated on measured runs (the hybrid model does that per kernel and "
                       "GPU)")
        print_note("every model's terms: --terms")
    n_bad = len(summary) - int(res.feasible.sum())
    if n_bad:
        print_note(f"{n_bad} of {len(summary)} configurations are infeasible (see status)")
    if args.output:
        print_note(f"wrote {args.output}")
    return 0


def _value(v: Any) -> str:
    """A parameter value as a user writes it: 256, not 256.0; 1048576, not 1.04858e+06."""
    try:
        return format(float(v), ".15g")
    except (TypeError, ValueError):
        return str(v)


def _all_terms(res: Any) -> Any:
    import pandas as pd

    parts = [res.params] + [df.add_prefix(f"{m}.") for m, df in res.terms.items()]
    return pd.concat([p.reset_index(drop=True) for p in parts], axis=1)


def _print_terms(res: Any) -> None:
    """Every model's terms: one name-value list per model for one launch, one table per model for a grid."""
    import pandas as pd

    from hybridperf.analytical.units import term_unit

    params = list(res.params.columns)
    for m, df in res.terms.items():
        print()
        if len(df) == 1:
            print_fields([(k, v, term_unit(m, k)) for k, v in df.iloc[0].items()], ["term", "value", "unit"],
                         title=f"[{m}]")
        else:
            named = df.rename(columns=lambda c: f"{c} ({term_unit(m, c)})" if term_unit(m, c) not in ("", "-")
                              and term_unit(m, c) not in c else c)
            print_table(pd.concat([res.params.reset_index(drop=True), named.reset_index(drop=True)], axis=1),
                        [*params, *named.columns], title=f"[{m}]")


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
        for line in format_advice(adv).split("\n"):
            print_note(line)
        if report is not None:
            from hybridperf.advise.gpa import format_report

            print("\n== GPA: stall samples -> estimated speedups of code changes (Zhou et al., CGO 2021)")
            print_note(format_report(report, top=args.top))
    if args.chart:
        benefit_chart(adv, args.chart, row=args.row)
        print(f"wrote {args.chart}", file=sys.stderr if args.json else sys.stdout)
    return 0


def add_commands(sub: Any) -> None:
    from hybridperf.analytical.run import MODELS
    from hybridperf.cli import argtypes as t

    s = sub.add_parser("analyze", help="every analytical model's time, the regime and the limiter for a launch or "
                                       "a grid (--terms: every term)", epilog=_ANALYZE_EXAMPLES)
    s.add_argument("--gpu", required=True, help="shipped GPU name/alias or a spec TOML path")
    s.add_argument("--kernel", type=t.kernel, required=True, help="shipped descriptor name or a descriptor TOML path")
    s.add_argument("--set", action="append", default=[], metavar="NAME=VALUES", help=_SET_HELP)
    s.add_argument("--model", action="append", choices=list(MODELS), help="limit to these models")
    s.add_argument("--terms", action="store_true", help="every term of every model (MWP, CWP, cycles, ...)")
    s.add_argument("-m", "--model-file", type=t.model_file, metavar="MODEL",
                   help="a trained model: say which analytical time it uses as this kernel's baseline")
    s.add_argument("-o", "--output", type=t.table_output, help="also write the table (.csv or .parquet)")
    s.add_argument("--force", action="store_true", help="replace the output even where it is a symbolic link")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_analyze)

    s = sub.add_parser("advise", help="bottleneck, GPUPerf benefit metrics and what to optimise",
                       epilog=_ADVISE_EXAMPLES)
    s.add_argument("--gpu", required=True)
    s.add_argument("--kernel", type=t.kernel, required=True)
    s.add_argument("--set", action="append", default=[], metavar="NAME=VALUES", help=_SET_HELP)
    s.add_argument("--chart", type=t.plot_output, help="write the benefit X-Y charts (Sim et al., PPoPP 2012, Fig. 4), "
                   "one panel per row (.png, .svg or .pdf)")
    s.add_argument("--row", type=t.non_negative_int, help="chart only this row (default: every row)")
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
