"""Commands that search configuration spaces: rank, suggest, replay."""
from __future__ import annotations

import argparse
import sys
from typing import Any

from hybridperf.cli.output import clean, dump_json, predicted_names, records, short_regimes
from hybridperf.cli.render import format_value, print_note, print_table

__all__ = ["add_commands"]


_RANK_EXAMPLES = """examples:
  hybridperf rank --kernel tiled-matmul --gpu gtx280 --set N=2048 --top 5
  hybridperf rank -m model.json --kernel matvec --gpu titan-v --set N=4096 -o picks.csv --plot front.png
  hybridperf rank --kernel kt-convolution --gpu a100 --set filter_width=15 --candidates sweep.parquet --jobs 2"""
_SUGGEST_EXAMPLES = """examples:
  hybridperf suggest -m model.json --kernel matvec --gpu titan-v --set N=4096 --batch 4
  hybridperf suggest -m model.json --kernel matvec --gpu titan-v --set N=4096 --measured runs.csv -o next.csv
(docs/ranking.md walks through a whole tuning loop)"""
_REPLAY_EXAMPLES = """examples:
  hybridperf replay kt-convolution --kernel kt-convolution --gpu rtx-a4000 --budget 40 --seeds 2
(docs/ranking.md has more)"""


def _candidates(args: argparse.Namespace) -> Any:
    from hybridperf.sweepfile import read_rows

    return read_rows(args.candidates) if args.candidates else None


def _space(args: argparse.Namespace) -> dict[str, tuple[float, ...]] | None:
    from hybridperf.grid import parse_assignments
    from hybridperf.limits import MAX_SPACE_ROWS

    space = {k: tuple(v) for k, v in parse_assignments(args.space or [], "--space", max_rows=MAX_SPACE_ROWS).items()}
    return space or None


def _rank(args: argparse.Namespace, model: Any) -> Any:
    from contextlib import nullcontext

    from hybridperf.grid import parse_assignments, single_values
    from hybridperf.search.cluster import dask_client
    from hybridperf.search.rank import rank_configs

    values, space, cands = single_values(parse_assignments(args.set)), _space(args), _candidates(args)
    with dask_client(args.dask) if args.dask else nullcontext() as client:
        return rank_configs(model, args.kernel, args.gpu, values, space_overrides=space, configs=cands, top=args.top,
                            screen_bandwidth=args.screen_bandwidth, prune="none" if args.no_pareto else args.prune,
                            top_k=args.top_k, chunk_rows=args.chunk_rows, progress=True, client=client,
                            jobs=args.jobs, odds=args.odds)


def _model(args: argparse.Namespace) -> Any:
    from hybridperf.learn.model import load_model

    return load_model(args.model) if args.model else None


def _problem_line(sizes: Any, given: Any) -> str:
    """'problem: N=4096 (default)': the sizes ranked for, those no --set gave marked (the descriptor's default)."""
    return "problem: " + ", ".join(f"{k}={format_value(v)}" + ("" if k in given else " (default)")
                                   for k, v in sizes.items())


def _print_rank(res: Any) -> None:
    if res.sizes:
        print_note(_problem_line(res.sizes, [k for k in res.sizes if k not in res.defaulted_sizes]))
    print_note(res.describe_pruning())
    if res.describe_odds():
        print_note(res.describe_odds())
    if res.fixed:
        print_note("fixed (not searched): " + ", ".join(f"{k}={v:g}" for k, v in res.fixed.items()))
    counts = res.counts()  # the numbers first: a long constraint in the stage column is what a narrow terminal elides
    print_table(counts, [c for c in ("configs", "share", "best_ms", "stage") if c in counts.columns])
    for note in res.notes:
        if note != res.defaulted_note():  # the problem line marks those sizes "(default)"
            print_note(f"note: {note}")
    show = short_regimes(predicted_names(res.table)).rename(columns=lambda c: c.removeprefix("config."))
    # Rank, then the time the rows are ordered by (predicted, with its interval; without a model the hierarchical
    # roofline's), then the searched parameters: a narrow terminal drops the last columns, and the fixed
    # parameters are in the note above.
    timed = show["pred_ms"].notna().any()
    # Without a model there is no interval to overlap and no model's top-k: those columns would say "no" of all.
    untimed = () if timed else ("tie_with_best", "in_top_k", "out_of_domain",
                                *(c for c in ("regime", "limiter") if c in show and not show[c].astype(bool).any()))
    cols = [c for c in show.columns
            if c not in ("index", "efficiency", "utilization", "ood_reason", *untimed, *res.fixed)]
    times = [c for c in (("pred_ms", "pred_lo_ms", "pred_hi_ms") if timed else ("hierarchical_ms",)) if c in cols]
    rest = [c for c in cols if c != "rank" and c not in times and (timed or not c.startswith("pred_"))]
    cols = ["rank", *times, *rest]
    print()
    print_table(show, cols)
    if timed:
        print_note("tie_with_best: the interval overlaps the best candidate's; measure these rather than trust their "
                   "order. on_front / in_top_k: kept by the Pareto front / among the model's top-k fastest predicted")
    else:
        order = ("the hierarchical roofline's time, which has no interval (equal times are not told apart)"
                 if "hierarchical_ms" in show.columns else "Ryoo's efficiency, then utilization (no time)")
        print_note(f"no model: ordered by {order}; pass a model (-m) for predicted times, intervals and ties. "
                   "on_front: kept by the Pareto front")
    if res.table["out_of_domain"].any():
        print_note("out_of_domain: outside the model's training data (see the notes); its time is an extrapolation")


def cmd_rank(args: argparse.Namespace) -> int:
    from hybridperf.search.picks import check_picks_path, rank_picks, write_picks_table

    if args.output:
        check_picks_path(args.output)  # before the ranking, which may take long
    res = _rank(args, _model(args))
    if args.output:
        write_picks_table(rank_picks(res), args.output, {"prune": res.prune, "space_size": res.space_size,
                                                         "feasible": res.n_feasible, "fixed": dict(res.fixed)})
    if args.plot:
        from hybridperf.plots import pareto_plot

        pareto_plot(res, args.plot)
    if args.json:
        dump_json({"counts": records(res.counts()), "pruning": {k: clean(v) for k, v in res.pruning().items()},
                   "notes": list(res.notes), "table": records(predicted_names(res.table))})
    elif args.csv:
        res.candidates.to_csv(sys.stdout, index=False)
    else:
        _print_rank(res)
    for path in (args.output, args.plot):
        if path:
            print(f"wrote {path}", file=sys.stderr)
    return 0


def _loop_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    return {"batch": args.batch, "start": args.start, "explore": args.explore, "local": args.local,
            "members": args.members,
            "stop_probability": args.stop_probability, "stop_gain": args.stop_gain}


def _stop_line(stop: Any) -> str:
    return "stop: not estimated yet (start batch, no model fitted)" if stop is None else \
        f"stop: {'yes' if stop.stop else 'no'} ({stop.reason})"


def cmd_suggest(args: argparse.Namespace) -> int:
    from hybridperf.datasets import load_sources
    from hybridperf.grid import parse_assignments, single_values
    from hybridperf.search.measure_next import space_candidates, suggest_next, write_picks
    from hybridperf.sweepfile import read_sweep

    values = single_values(parse_assignments(args.set))
    cands = space_candidates(args.kernel, args.gpu, values, space_overrides=_space(args), candidates=_candidates(args))
    measured = read_sweep(args.measured) if args.measured else None  # a bad file fails before the model loads
    source = _model(args) if args.model else load_sources(args.prior_data)[0] if args.prior_data else None
    sug = suggest_next(source, cands, measured, prior=args.prior, budget=args.budget, seed=args.seed,
                       **_loop_kwargs(args))
    if args.output:
        write_picks(sug, args.output)
    if sug.n_ignored:  # on stderr, whatever the output: --json and --csv keep stdout for the data
        print(f"hybridperf: note: {sug.n_ignored} of the {len(measured)} --measured rows are not candidates of this "
              "problem (another size, GPU or kernel, or a configuration outside the space) and were left out",
              file=sys.stderr)
    if args.json:
        stop = sug.stop
        dump_json({"prior": sug.prior, "stop": None if stop is None else stop.stop,
                   "reason": None if stop is None else stop.reason,
                   "p_better": None if stop is None else clean(stop.p_better),
                   "expected_gain": None if stop is None else clean(stop.expected_gain),
                   "best_measured_ms": clean(sug.best_measured_ms), "n_candidates": sug.n_candidates,
                   "n_measured": sug.n_measured, "n_ignored": sug.n_ignored,
                   "batch": records(predicted_names(sug.table))})
        return 0
    if args.csv:
        predicted_names(sug.table).to_csv(sys.stdout, index=False)
        return 0
    print(f"{sug.n_candidates} candidates, {sug.n_measured} measured; best measured {sug.best_measured_ms:.4g} ms"
          if sug.n_measured else f"{sug.n_candidates} candidates, none measured yet")
    sizes = {c.removeprefix("size."): cands[c].iloc[0] for c in cands.columns if c.startswith("size.")}
    if sizes and len(cands):
        print(_problem_line(sizes, sizes if args.candidates else values))
    print(f"prior: {sug.prior}")
    print(_stop_line(sug.stop))
    table = short_regimes(predicted_names(sug.table))
    first = [c for c in table.columns if c.startswith("config.")] + [
        c for c in ("pred_ms", "pred_lo_ms", "pred_hi_ms", "p_fail", "why") if c in table.columns]
    rest = [c for c in table.columns if c not in first and not c.startswith(("size.", "kernel", "gpu"))]
    show = table.rename(columns=lambda c: c.removeprefix("config."))
    print_table(show, [c.removeprefix("config.") for c in first + rest])
    if args.output:
        print(f"wrote the batch to {args.output}", file=sys.stderr)
    return 0


def _write_replay(comp: Any, args: argparse.Namespace) -> None:
    import json

    from hybridperf.errors import HybridperfError
    from hybridperf.files import atomic_write_text

    fmt = "json" if args.json else "csv" if args.csv else (args.output or "").rsplit(".", 1)[-1]
    if fmt not in ("json", "csv"):
        raise HybridperfError(f"--output {args.output}: name a .csv or .json file, or pass --csv / --json")
    steps = comp.steps()
    if fmt == "json":
        text = json.dumps({"prior": comp.prior, "summary": records(comp.summary()), "steps": records(steps)},
                          indent=1, allow_nan=False) + "\n"
    else:
        text = steps.to_csv(index=False)
    if args.output:
        atomic_write_text(args.output, text)
    else:
        sys.stdout.write(text)


def cmd_replay(args: argparse.Namespace) -> int:
    from hybridperf.datasets import load_sources
    from hybridperf.grid import parse_assignments, single_values
    from hybridperf.search.loop import LoopOptions
    from hybridperf.search.measure_next import compare_strategies

    data, _ = load_sources(args.data)
    prior_rows = load_sources(args.prior_data)[0] if args.prior_data else None
    comp = compare_strategies(data, args.kernel, args.gpu, single_values(parse_assignments(args.set)) or None,
                              seeds=args.seeds, seed_offset=args.seed_offset, strategies=args.strategies,
                              prior=args.prior, prior_rows=prior_rows, model=_model(args), budget=args.budget,
                              stop=args.stop, options=LoopOptions(**_loop_kwargs(args)), n_jobs=args.jobs)
    if args.json or args.csv or args.output:
        _write_replay(comp, args)
        if not args.output:
            return 0
    df = comp.summary()
    print_table(df)
    meds = ", ".join(f"{k} {v:.3f}" for k, v in df.groupby("strategy")["best_fraction_of_optimum"].median().items())
    print_note(f"\nmedian fraction of the optimum after {args.budget} measurements: {meds}")
    if comp.prior:
        print_note(f"model loop's prior: {comp.prior}")
    if args.output:
        print(f"wrote the trajectories to {args.output}", file=sys.stderr)
    return 0


def _loop_args(s: argparse.ArgumentParser) -> None:
    from hybridperf.cli import argtypes as t
    from hybridperf.search.prior_kinds import PRIORS

    s.add_argument("--prior", choices=PRIORS, default="auto",
                   help="what the loop knows before measuring (auto: transfer from --prior-data, else the model, "
                        "else the analytical model)")
    s.add_argument("--prior-data", action="append", metavar="DATA",
                   help="sweep file or dataset name with runs of the same kernel on other GPUs (repeatable)")
    s.add_argument("-m", "--model", type=t.model_file, help="trained model file (the 'model' prior)")
    s.add_argument("--batch", type=t.count(100_000),
                   help="configurations per refit (default: a tenth of the budget, 2-8)")
    s.add_argument("--start", type=t.count(1_000_000, 0),
                   help="configurations before the first fit (default: ~12%% of the budget)")
    s.add_argument("--explore", type=t.share, default=0.25, help="share of each batch chosen by expected improvement")
    s.add_argument("--local", type=t.share, default=0.5,
                   help="share of the other picks taken next to the fastest runs (one parameter changed)")
    s.add_argument("--members", type=t.count(64), default=5, help="bagged boosters (Thompson sampling draws from them)")
    s.add_argument("--stop-probability", type=t.probability, default=0.05,
                   help="stop when P(a configuration more than --stop-gain faster remains) is below this")
    s.add_argument("--stop-gain", type=t.non_negative_float, default=0.01,
                   help="relative gain that counts as better (0.01 = 1%%)")


def _rank_args(s: argparse.ArgumentParser, model_required: bool) -> None:
    from hybridperf.cli import argtypes as t
    from hybridperf.search.chunks import PRUNE_MODES
    from hybridperf.search.rank import FILL

    s.add_argument("-m", "--model", required=model_required, type=t.model_file,
                   help="model file (without one: ordered by the hierarchical roofline's time; by Ryoo's "
                        "efficiency with --prune ryoo)")
    s.add_argument("--kernel", type=t.kernel, required=True)
    s.add_argument("--gpu", required=True)
    s.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="problem size, or a config parameter to fix (not searched) (repeatable)")
    s.add_argument("--space", action="append", metavar="NAME=VALUES", help="restrict a config parameter's values")
    s.add_argument("--candidates", type=t.input_file,
                   help="rank exactly these configurations (a sweep, e.g. the recorded one, or rows of config.*)")
    s.add_argument("--top", type=t.positive_int, default=10)
    s.add_argument("--screen-bandwidth", action="store_true", help="drop roofline memory-bound configs first")
    s.add_argument("--prune", choices=PRUNE_MODES, default="union",
                   help="union (default): Pareto front over Ryoo's efficiency and utilization and the predicted time, "
                        "plus the model's top-k (without a model: the analytical times instead); ryoo: the paper's "
                        "two-metric front; none: rank every feasible config (needs a model)")
    s.add_argument("--top-k", type=t.count_or_share, default=None, metavar="K",
                   help="the union keeps the model's K fastest: a count, or a share of the feasible configurations "
                        f"(default: as many as fill the shortlist to {FILL:.0%}% of the feasible, at least --top)")
    s.add_argument("--no-pareto", action="store_true", help="alias of --prune none")
    s.add_argument("--chunk-rows", type=t.count(5_000_000), default=50_000,
                   help="configs per streamed chunk (bounds memory: about 3 kB per config with a model)")
    s.add_argument("--jobs", type=t.count(256), default=1, help="threads scanning chunks side by side")
    s.add_argument("--odds", action=argparse.BooleanOptionalAction, default=None,
                   help="count the configurations not returned whose intervals still allow them to be the fastest "
                        "(default: for spaces of at most 2,000,000 configurations; it predicts every configuration's "
                        "interval)")
    s.add_argument("--dask", metavar="ADDRESS",
                   help="run the chunks on Dask: local (a local cluster, a worker per core), local:N, or a "
                        "scheduler's address (tcp://host:8786)")


def add_commands(sub: Any) -> None:
    from hybridperf.cli import argtypes as t

    s = sub.add_parser("rank", help="rank a kernel's configuration space: constraints, occupancy, Pareto, model",
                       epilog=_RANK_EXAMPLES)
    _rank_args(s, model_required=False)
    s.add_argument("-o", "--output", type=t.picks_output,
                   help="also write the top picks: .csv/.parquet (sweep rows to measure) or .json (Kernel Tuner "
                        "configurations for PicksStrategy)")
    s.add_argument("--plot", type=t.plot_output, help="draw the Pareto front with the picks marked (.png, .svg, .pdf)")
    s.add_argument("--force", action="store_true", help="replace the outputs even where they are symbolic links")
    fmt = s.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true")
    fmt.add_argument("--csv", action="store_true")
    s.set_defaults(func=cmd_rank)

    s = sub.add_parser("suggest", help="the next batch of configurations to measure (and whether to stop)",
                       epilog=_SUGGEST_EXAMPLES)
    s.add_argument("--kernel", type=t.kernel, required=True)
    s.add_argument("--gpu", required=True)
    s.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="problem size, or a config parameter to fix (not searched) (repeatable)")
    s.add_argument("--space", action="append", metavar="NAME=VALUES", help="restrict a config parameter's values")
    s.add_argument("--candidates", type=t.input_file,
                   help="choose from exactly these configurations (a sweep, e.g. the recorded one, or 'rank -o' "
                        "picks) instead of the whole space")
    s.add_argument("--measured", type=t.input_file, help="sweep of the runs measured so far (failed rows included)")
    s.add_argument("--budget", type=t.count(1_000_000),
                   help="measurements planned in all (scales the start and the batch)")
    _loop_args(s)
    s.add_argument("--seed", type=t.seed, default=0)
    s.add_argument("-o", "--output", help="write the batch: .json (Kernel Tuner configurations for PicksStrategy), "
                                          ".csv or .parquet (rows to measure)")
    fmt = s.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true")
    fmt.add_argument("--csv", action="store_true", help="the batch as CSV rows")
    s.set_defaults(func=cmd_suggest)

    s = sub.add_parser("replay", help="run the measure-next loop on a recorded exhaustive sweep vs random sampling",
                       epilog=_REPLAY_EXAMPLES)
    s.add_argument("data", nargs="+", help="sweep files or dataset names")
    s.add_argument("--kernel", type=t.kernel, required=True)
    s.add_argument("--gpu", required=True)
    s.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="problem size, if several")
    s.add_argument("--budget", type=t.count(1_000_000), default=50, help="measurements per run")
    s.add_argument("--seeds", type=t.count(1000), default=3, help="runs per strategy")
    s.add_argument("--seed-offset", type=t.seed, default=0, help="first seed (runs use seeds OFFSET..OFFSET+SEEDS-1)")
    s.add_argument("--strategies", nargs="+", choices=["model", "random"], default=["model", "random"])
    s.add_argument("--stop", action="store_true", help="end a run when the stop rule says stop (default: record it)")
    s.add_argument("--jobs", type=t.count(64), default=1, help="threads running the replays")
    _loop_args(s)
    s.add_argument("-o", "--output", help="write the trajectories (.csv or .json; every measurement of every run)")
    fmt = s.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="trajectories and summary as JSON")
    fmt.add_argument("--csv", action="store_true", help="trajectories as CSV")
    s.set_defaults(func=cmd_replay)
