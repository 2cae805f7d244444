"""Commands that search configuration spaces: rank, suggest, replay."""
from __future__ import annotations

import argparse
import sys
from typing import Any

from hybridperf.cli.output import clean, dump_json, print_table, progress_enabled, records

__all__ = ["add_commands"]


def _rank(args: argparse.Namespace, model: Any) -> Any:
    from hybridperf.grid import parse_assignments, single_values
    from hybridperf.limits import MAX_SPACE_ROWS
    from hybridperf.search.rank import rank_configs

    space = {k: tuple(v) for k, v in parse_assignments(args.space or [], "--space", max_rows=MAX_SPACE_ROWS).items()}
    client = _dask_client(args.dask) if args.dask else None
    return rank_configs(model, args.kernel, args.gpu, single_values(parse_assignments(args.set)),
                        space_overrides=space or None, top=args.top, screen_bandwidth=args.screen_bandwidth,
                        prune="none" if args.no_pareto else args.prune, top_k=args.top_k,
                        chunk_rows=args.chunk_rows, progress=progress_enabled(args), client=client)


def _dask_client(address: str) -> Any:
    from hybridperf.errors import UsageError

    try:
        from distributed import Client
    except ImportError:
        raise UsageError("--dask needs the dask extra: pip install 'hybridperf[dask]'") from None
    try:
        return Client(address, timeout="5s")
    except (OSError, TimeoutError, ValueError, TypeError) as exc:
        raise UsageError(f"--dask {address}: cannot reach a Dask scheduler ({type(exc).__name__}: "
                         f"{' '.join(str(exc).split())[:100]}); check the address, e.g. tcp://host:8786") from None


def _model(args: argparse.Namespace) -> Any:
    from hybridperf.learn.model import load_model

    return load_model(args.model) if args.model else None


def cmd_rank(args: argparse.Namespace) -> int:
    res = _rank(args, _model(args))
    if args.json:
        dump_json({"counts": records(res.counts()), "pruning": {k: clean(v) for k, v in res.pruning().items()},
                   "notes": list(res.notes), "table": records(res.table)})
        return 0
    if args.csv:
        res.candidates.to_csv(sys.stdout, index=False)
        return 0
    print(res.describe_pruning())
    print_table(res.counts())
    for note in res.notes:
        print(f"note: {note}")
    show = res.table.rename(columns=lambda c: c.removeprefix("config."))
    print()
    print_table(show, [c for c in show.columns if c not in ("index", "efficiency", "utilization", "ood_reason")])
    print("\ntie_with_best: the interval overlaps the best candidate's; measure these rather than trust their order")
    print("on_front / in_top_k: kept by the Pareto front / among the model's top-k fastest predicted")
    return 0


def cmd_suggest(args: argparse.Namespace) -> int:
    from hybridperf.search.measure_next import suggest_next
    from hybridperf.sweepfile import read_sweep

    measured = read_sweep(args.measured) if args.measured else None  # a bad file fails before the ranking
    model = _model(args)
    res = _rank(args, model)
    sug = suggest_next(model, res.rows(), measured, batch=args.batch, explore=args.explore, seed=args.seed,
                       stop_gain=args.stop_gain)
    if args.json:
        dump_json({"stop": sug.stop.stop, "reason": sug.stop.reason, "expected_gain": clean(sug.stop.expected_gain),
                   "best_measured_ms": clean(sug.best_measured_ms), "batch": records(sug.table)})
        return 0
    print(f"{sug.n_candidates} candidates, {sug.n_measured} measured; best measured "
          f"{sug.best_measured_ms:.4g} ms" if sug.n_measured else f"{sug.n_candidates} candidates, none measured yet")
    print(f"stop: {'yes' if sug.stop.stop else 'no'} ({sug.stop.reason})")
    show = sug.table.rename(columns=lambda c: c.removeprefix("config."))
    print_table(show, [c for c in show.columns if not c.startswith(("size.", "kernel", "gpu"))])
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    from hybridperf.datasets import load_sources
    from hybridperf.grid import parse_assignments, single_values
    from hybridperf.search.measure_next import compare_strategies

    data, _ = load_sources(args.data)
    df = compare_strategies(data, args.kernel, args.gpu, single_values(parse_assignments(args.set)) or None,
                            seeds=args.seeds, initial=args.initial, batch=args.batch, budget=args.budget)
    print_table(df)
    med = df.groupby("strategy")["best_fraction_of_optimum"].median()
    print(f"\nmedian fraction of the optimum reached: model {med.get('model', float('nan')):.3f}, "
          f"random {med.get('random', float('nan')):.3f} (same budget)")
    return 0


def _rank_args(s: argparse.ArgumentParser, model_required: bool) -> None:
    from hybridperf.cli import argtypes as t
    from hybridperf.search.chunks import PRUNE_MODES
    from hybridperf.search.rank import FILL

    s.add_argument("-m", "--model", required=model_required, type=t.model_file,
                   help="model file (without one: Ryoo efficiency order)")
    s.add_argument("--kernel", required=True)
    s.add_argument("--gpu", required=True)
    s.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="problem size (repeatable)")
    s.add_argument("--space", action="append", metavar="NAME=VALUES", help="restrict a config parameter's values")
    s.add_argument("--top", type=t.positive_int, default=10)
    s.add_argument("--screen-bandwidth", action="store_true", help="drop roofline memory-bound configs first")
    s.add_argument("--prune", choices=PRUNE_MODES, default="union",
                   help="union (default): Pareto front over Ryoo's efficiency and utilization and the predicted time, "
                        "plus the model's top-k (without a model: the analytical times instead); ryoo: the paper's "
                        "two-metric front; none: rank every feasible config (needs a model)")
    s.add_argument("--top-k", type=t.count_or_share, default=None, metavar="K",
                   help="the union keeps the model's K fastest: a count, or a share of the feasible configurations "
                        f"(default: as many as fill the shortlist to {FILL:.0%} of the feasible, at least --top)")
    s.add_argument("--no-pareto", action="store_true", help="alias of --prune none")
    s.add_argument("--chunk-rows", type=t.count(5_000_000), default=200_000,
                   help="configs per streamed chunk (bounds memory)")
    s.add_argument("--dask", metavar="ADDRESS", help="run the chunks on this Dask scheduler")
    s.add_argument("--quiet", action="store_true")


def add_commands(sub: Any) -> None:
    from hybridperf.cli import argtypes as t

    s = sub.add_parser("rank", help="rank a kernel's configuration space: constraints, occupancy, Pareto, model")
    _rank_args(s, model_required=False)
    fmt = s.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true")
    fmt.add_argument("--csv", action="store_true")
    s.set_defaults(func=cmd_rank)

    s = sub.add_parser("suggest", help="the next batch of configurations to measure (and whether to stop)")
    _rank_args(s, model_required=True)
    s.add_argument("--measured", type=t.input_file, help="sweep of the runs measured so far")
    s.add_argument("--batch", type=t.count(100_000), default=8)
    s.add_argument("--explore", type=t.share, default=0.25, help="share of the batch chosen for information")
    s.add_argument("--stop-gain", type=t.non_negative_float, default=0.005,
                   help="stop when the expected relative gain is below")
    s.add_argument("--seed", type=t.seed, default=0)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_suggest)

    s = sub.add_parser("replay", help="run the measure-next loop on a recorded exhaustive sweep vs random sampling")
    s.add_argument("data", nargs="+", help="sweep files or dataset names")
    s.add_argument("--kernel", required=True)
    s.add_argument("--gpu", required=True)
    s.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    s.add_argument("--initial", type=t.positive_int, default=16)
    s.add_argument("--batch", type=t.count(100_000), default=8)
    s.add_argument("--budget", type=t.positive_int, default=160)
    s.add_argument("--seeds", type=t.count(1000), default=3)
    s.set_defaults(func=cmd_replay)
