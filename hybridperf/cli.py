"""Command-line interface: parse arguments, call the library, print, return an exit code."""
from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # exit 2 with a one-line message, as for bad data
        self.exit(2, f"hybridperf: error: {message}\n")


def _json_default(o: Any) -> Any:
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    return str(o)


def _clean(v: Any) -> Any:
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    return v


def _dump(obj: Any) -> None:
    print(json.dumps(obj, indent=2, default=_json_default, allow_nan=False))


def _parse_sets(items: Sequence[str]) -> dict[str, list[float]]:
    from hybridperf.analyze import parse_values
    from hybridperf.errors import HybridperfError

    out: dict[str, list[float]] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise HybridperfError(f"--set {item!r}: write NAME=VALUE, e.g. --set N=4096 or --set N=1024:8192:1024")
        out[name.strip()] = parse_values(value)
    return out


# -- commands ------------------------------------------------------------------------------------

def cmd_gpus(args: argparse.Namespace) -> int:
    from hybridperf.hardware import list_gpus
    from hybridperf.tables import format_table
    import pandas as pd
    from pathlib import Path

    rows = [{"name": Path(g.path).stem, "gpu": g.name, "cc": g.compute_capability, "sms": g.sm_count,
             "clock_mhz": g.core_clock_mhz, "dram_gbs": g.dram_bandwidth_gbs,
             "fp32_tflops": g.peak_fp32_gflops / 1000, "aliases": ",".join(g.aliases)} for g in list_gpus()]
    if args.json:
        _dump(rows)
    else:
        print(format_table(pd.DataFrame(rows)))
    return 0


def cmd_kernels(args: argparse.Namespace) -> int:
    from hybridperf.kernel import list_kernels
    from hybridperf.tables import format_table
    import pandas as pd

    rows = [{"name": k.name, "sizes": ",".join(k.size_names), "config": ",".join(k.config_names),
             "space": k.space_size(), "description": k.description[:60]} for k in list_kernels()]
    if args.json:
        _dump(rows)
    else:
        print(format_table(pd.DataFrame(rows)))
    return 0


def cmd_analyze(args: argparse.Namespace) -> int:
    from hybridperf.analyze import MODELS, analyze, parameter_grid
    from hybridperf.tables import format_table

    models = args.model or list(MODELS)
    grid = parameter_grid(_parse_sets(args.set))
    res = analyze(args.kernel, args.gpu, grid, models=models)
    summary = res.summary()
    if args.json:
        rows = []
        for i in range(len(summary)):
            rows.append({
                "params": {k: _clean(float(res.params[k].iloc[i])) for k in res.params.columns},
                "feasible": bool(res.feasible[i]), "reason": str(res.reason[i]),
                "models": {m: {k: _clean(v.item() if hasattr(v, "item") else v) for k, v in df.iloc[i].items()}
                           for m, df in res.terms.items()},
            })
        _dump({"kernel": res.kernel.name, "gpu": res.gpu.name, "rows": rows})
        return 0
    print(f"kernel {res.kernel.name} on {res.gpu.name} (cc {res.gpu.compute_capability}, "
          f"{res.gpu.sm_count} SMs, {res.gpu.core_clock_mhz:g} MHz, {res.gpu.dram_bandwidth_gbs:g} GB/s)")
    if len(summary) == 1 and res.feasible[0]:
        for m, df in res.terms.items():
            print(f"\n[{m}]")
            row = df.iloc[0]
            width = max(len(k) for k in row.index)
            for k, v in row.items():
                from hybridperf.tables import format_number
                print(f"  {k.ljust(width)}  {format_number(v.item() if hasattr(v, 'item') else v)}")
        if "mwp-cwp" in res.terms:
            print(f"\nregime: {summary['regime'].iloc[0]}")
        return 0
    print(format_table(summary))
    if not res.feasible.all():
        print(f"\n{int((~res.feasible).sum())} of {len(summary)} configurations are infeasible (see status)")
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    from hybridperf.reproduce import run_checks

    checks = run_checks()
    if args.json:
        _dump([{"id": c.id, "paper": c.paper, "computed": c.computed, "rel_error": c.rel_error, "ok": c.ok,
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


# -- parser --------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="hybridperf", description="Predict GPU kernel execution time: analytical models + "
                "gradient-boosted residuals.")
    p.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    s = sub.add_parser("gpus", help="list the shipped GPU specs")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_gpus)

    s = sub.add_parser("kernels", help="list the shipped kernel descriptors")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_kernels)

    s = sub.add_parser("analyze", help="every analytical model's time and terms for a launch or a grid")
    s.add_argument("--gpu", required=True, help="shipped GPU name/alias or a spec TOML path")
    s.add_argument("--kernel", required=True, help="shipped descriptor name or a descriptor TOML path")
    s.add_argument("--set", action="append", default=[], metavar="NAME=VALUES",
                   help="parameter values: 4096 | 1024,2048 | 1024:8192:1024 | 1024:32768:x2 (repeatable)")
    s.add_argument("--model", action="append", choices=["occupancy", "mwp-cwp", "gpuperf", "scaled-counts",
                                                         "roofline", "ryoo"], help="limit to these models")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_analyze)

    s = sub.add_parser("reproduce", help="recompute the seed papers' published numbers (exit 1 on any failure)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_reproduce)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hybridperf`` command; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    from hybridperf.errors import HybridperfError

    try:
        return int(args.func(args))
    except HybridperfError as exc:
        if args.debug:
            raise
        print(f"hybridperf: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
