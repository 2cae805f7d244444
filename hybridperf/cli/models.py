"""Commands that learn from recorded runs: train, predict, evaluate, calibrate."""
from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from hybridperf.cli.output import dump_json, predicted_names, records, short_regimes, write_table
from hybridperf.cli.render import format_value, print_note, print_table
from hybridperf.errors import UsageError
from hybridperf.evaluation.splits import SPLIT_DESCRIPTIONS

__all__ = ["add_commands"]


_TRAIN_EXAMPLES = """examples:
  hybridperf train titanv-seed004 -o model.json             # a shipped dataset ('hybridperf datasets')
  hybridperf train runs.parquet more-runs.csv -o model.json  # your own sweeps
  hybridperf train kt-convolution -o conv.json --tune 30    # tune the booster with 30 optuna trials first"""
_PREDICT_EXAMPLES = """examples:
  hybridperf predict -m model.json --kernel matvec --set N=1024:65536:x2
  hybridperf predict -m model.json --kernel matvec --set N=1024:65536:x2 --plot matvec.png -o matvec.csv
  hybridperf predict -m model.json --rows runs.csv   # rows to predict; a time_ms column stays the measured one"""
_EVALUATE_EXAMPLES = """examples:
  hybridperf evaluate titanv-seed004 --split S2
  hybridperf evaluate titanv-seed004 --split S2 --plot s2.png -o s2.csv
  hybridperf evaluate clblast-xgemm --split S4 --holdout geforce-rtx-2080-ti --calibration-runs 50

splits (EVALUATION.md):
""" + "\n".join(f"  {k}  {v}" for k, v in SPLIT_DESCRIPTIONS.items())
_CALIBRATE_EXAMPLES = """examples:
  hybridperf calibrate titanv-seed004 --gpu titan-v --model mwp-cwp -o titanv-calibrated.toml
  hybridperf analyze --gpu titanv-calibrated.toml --kernel matvec --set N=4096"""


def _command_line(args: argparse.Namespace) -> str:
    return "hybridperf " + " ".join(sys.argv[1:] if args.argv is None else args.argv)


def cmd_train(args: argparse.Namespace) -> int:
    from hybridperf.datasets import load_sources, select_runs
    from hybridperf.learn.model import train_model

    data, hashes = load_sources(args.data, unique=True)
    data = select_runs(data, kernels=args.kernel, gpus=args.gpu)
    t0 = time.perf_counter()
    model = train_model(data, baseline=args.baseline, mode=args.mode, coverage=args.coverage,
                        tune_trials=args.tune, study_path=args.study, progress=True,
                        random_state=args.seed, provenance={"data": hashes, "command": _command_line(args)},
                        strict=args.strict, weighting=args.weighting)
    seconds = time.perf_counter() - t0
    model.save(args.output)
    m = model.metadata
    weighted = ", runs weighted by throughput" if model.estimator.weighting == "throughput" else ""
    print(f"trained {model.mode} model (baseline {model.baseline or 'none'}{weighted}) on {m['n_rows']} runs "
          f"({m['n_dropped_not_ok']} failed/invalid rows kept out) of {len(m['kernels'])} kernel(s) on "
          f"{len(m['gpus'])} GPU(s) in {seconds:.1f} s; training log-RMSE {m['training_log_rmse']:.3f}"
          + (f", tuned CV log-RMSE {m['tuning']['cv_log_rmse']:.3f}" if m.get("tuning") else ""))
    print(f"wrote {args.output}")
    return 0


def cmd_predict(args: argparse.Namespace) -> int:
    from hybridperf.grid import defaulted_parameters, parse_assignments
    from hybridperf.learn.model import check_prediction_rows, load_model, predict_rows, rows_to_predict
    from hybridperf.sweep import param_columns, param_name
    from hybridperf.sweepfile import read_rows

    if args.rows and (args.kernel or args.gpu or args.set):
        given = ", ".join(f for f, v in (("--kernel", args.kernel), ("--gpu", args.gpu), ("--set", args.set)) if v)
        raise UsageError(f"--rows gives every row's kernel, GPU and parameters: drop {given}, or drop --rows")
    values = parse_assignments(args.set)  # the inputs are checked before the model is loaded
    table = read_rows(args.rows).reset_index(drop=True) if args.rows else None
    model = load_model(args.model)
    rows = (check_prediction_rows(model, table, strict=args.strict) if table is not None
            else rows_to_predict(model, kernel=args.kernel, gpu=args.gpu, values=values))
    pred = predict_rows(model, rows, coverage=args.coverage, check=False)
    cov = args.coverage or model.estimator.coverage
    defaults = defaulted_parameters(rows, known=model.descriptors)
    params = param_columns(rows)
    out = predicted_names(rows[["kernel", "gpu", *params]].join(pred), measured=None if table is None else rows)
    for col, value in defaults.items():  # the values the prediction used, though nobody set them
        out.insert(2 + len(params), col, value)
        params.append(col)
    if args.plot:  # refused before any output is written
        from hybridperf.plots import check_plottable

        check_plottable(out)
    if args.output:
        write_table(out, args.output, attrs={"coverage": cov, "defaults": defaults})
    if args.plot:
        from hybridperf.plots import prediction_plot

        prediction_plot(out, args.plot, coverage=cov)
    if args.json:
        dump_json({"coverage": cov, "defaults": {param_name(k): v for k, v in defaults.items()},
                   "rows": records(out)})
    elif args.csv:
        out.to_csv(sys.stdout, index=False)
    else:
        _print_predictions(out, params, defaults, cov, "column of --rows" if args.rows else "--set")
    for path in (args.output, args.plot):
        if path:
            print(f"wrote {path}", file=sys.stderr)
    return 0


def _print_predictions(out: Any, params: list[str], defaults: dict[str, Any], cov: float,
                       source: str = "--set") -> None:
    """``predict``'s table for people: the parameters equal on every row above it, then notes."""
    from hybridperf.learn.domain import percent_text
    from hybridperf.sweep import param_name

    show = short_regimes(out).rename(columns=lambda c: param_name(c) + (" (default)" if c in defaults else "")
                                     if c in params else c)
    measured = [c for c in ("time_ms",) if c in out.columns]
    # Parameters equal on every row go above the table, so the prediction and its interval keep their columns.
    fixed = [c for c in ["kernel", "gpu", *params] if out[c].nunique(dropna=False) == 1]
    if fixed:
        print_note("for " + ", ".join(f"{param_name(c)}={format_value(out[c].iloc[0])}"
                                      + (" (default)" if c in defaults else "") for c in fixed))
    ids = [show.columns[out.columns.get_loc(c)] for c in ["kernel", "gpu", *params] if c not in fixed]
    times = ["pred_ms", "pred_lo_ms", "pred_hi_ms", *measured]
    # A narrow terminal drops the last columns first: the reasons go before the regime and limiter, and the times
    # before the parameters where more than three of these would push them off (a file of rows, --rows).
    order = ids + times if len(ids) <= 3 else ids[:1] + times + ids[1:]
    print_table(show, order + ["out_of_domain", "ood_reason", "regime", "limiter"])
    print_note(f"pred_lo_ms..pred_hi_ms: {percent_text(cov)} conformal interval; out_of_domain: outside the "
               "training range or unseen values" + ("; time_ms: measured, from --rows" if measured else ""))
    why = out.loc[~out["feasible"].to_numpy(dtype=bool), "infeasible_reason"].value_counts()
    if len(why):  # a time of "-"
        print_note(f"{int(why.sum())} row(s) infeasible (no time): "
                   + "; ".join(f"{reason} ({n})" for reason, n in why.head(3).items())
                   + (f"; {len(why) - 3} more reasons (see --csv)" if len(why) > 3 else ""))
    if defaults:
        print_note(f"(default): the descriptor's value, used because no {source} gave one: "
                   + ", ".join(f"{param_name(k)}={v:g}" for k, v in defaults.items()))


def cmd_evaluate(args: argparse.Namespace) -> int:
    from hybridperf.datasets import load_sources, select_runs
    from hybridperf.evaluation.evaluate import evaluate

    booster_params = None
    sources = list(args.data)
    if args.model:
        from hybridperf.learn.model import load_model

        model = load_model(args.model)
        booster_params = model.booster_params()
        if not sources:
            sources = [s.removeprefix("dataset:") for s in model.metadata.get("data", {})]
    data, _ = load_sources(sources)
    data = select_runs(data, kernels=args.kernel, gpus=args.gpu)
    opts = {k: v for k, v in dict(train_max_size=args.train_max_size, holdout=args.holdout,
                                  calibration_runs=args.calibration_runs, budget_fraction=args.budget).items()
            if v is not None}
    ev = evaluate(data, args.split, booster_params=booster_params, seed=args.seed, strict=args.strict, **opts)
    if args.output:
        write_table(ev.table, args.output, attrs={"split": ev.split, "n_train": ev.n_train, "n_test": ev.n_test})
    if args.plot:
        from hybridperf.plots import evaluation_plot

        evaluation_plot(ev, data, args.plot)
    if args.json:
        dump_json({"split": ev.split, "n_train": ev.n_train, "n_test": ev.n_test, "table": records(ev.table)})
    else:
        print_note(f"split {ev.split} ({SPLIT_DESCRIPTIONS[ev.split]}): {ev.n_train} training runs, "
                   f"{ev.n_test} test runs")
        print_table(ev.table, [c for c in ["method", "mape", "p90_ape", "spearman", "top1", "top5", "cover90",
                                           "median_ape", "cover80", "n", "seconds"] if c in ev.table.columns])
        print_note("mape, p90_ape, median_ape: absolute percentage errors in %; top-k: best measured / best measured "
                   "among the k best predicted per (kernel, gpu, sizes); cover: % of measured times inside the "
                   "nominal 80/90% intervals")
    for path in (args.output, args.plot):
        if path:
            print(f"wrote {path}", file=sys.stderr)
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from hybridperf.datasets import load_sources
    from hybridperf.learn.calibrate import DEFAULT_BOUNDS, calibrate_gpu, write_gpu_spec

    data, _ = load_sources(args.data)
    cal = calibrate_gpu(data, args.gpu, model=args.model, parameters=args.param or None)
    print_table([{"parameter": name, "initial": cal.initial[name], "fitted": value}
                 for name, value in cal.fitted.items()])
    print(f"log RMSE of {args.model} over {cal.n_runs} runs: {cal.log_rmse_before:.3f} -> {cal.log_rmse_after:.3f}")
    if cal.at_bounds:
        bounds = DEFAULT_BOUNDS[args.model]
        print("hybridperf: warning: " + ", ".join(f"{n} ended at its bound ({bounds[n][0]:g}..{bounds[n][1]:g})"
                                      for n in cal.at_bounds)
              + ": these runs do not pin it down, or the model misses what it stands in for; check the spec's "
              "predictions before using it (--param fits only the parameters named)", file=sys.stderr)
    if args.output:
        write_gpu_spec(cal.gpu, args.output, name=f"{cal.gpu.name} (calibrated)")
        print(f"wrote {args.output} (use it with --gpu {args.output})")
    return 0


def add_commands(sub: Any) -> None:
    from hybridperf.analytical.run import TIME_MODELS
    from hybridperf.cli import argtypes as t
    from hybridperf.evaluation.splits import SPLITS
    from hybridperf.learn.calibrate import DEFAULT_BOUNDS
    from hybridperf.learn.modes import MODES, WEIGHTINGS

    s = sub.add_parser("train", help="fit a hybrid model on recorded sweeps and write a model file",
                       epilog=_TRAIN_EXAMPLES)
    s.add_argument("data", nargs="+", help="sweep files (CSV/Parquet) or shipped dataset names")
    s.add_argument("-o", "--output", required=True, help="model file to write (JSON)")
    s.add_argument("--baseline", default="auto", choices=["auto", "none", *TIME_MODELS])
    s.add_argument("--mode", default="hybrid", choices=list(MODES))
    s.add_argument("--kernel", type=t.kernel, action="append",
                   help="train on these kernels only: names or descriptor files (repeatable)")
    s.add_argument("--gpu", action="append", help="train on these GPUs only (repeatable)")
    s.add_argument("--strict", action="store_true", help="stop at the first invalid row instead of skipping it")
    s.add_argument("--tune", type=t.non_negative_int, default=0, metavar="N",
                   help="optuna trials to tune the booster first")
    s.add_argument("--study", type=t.state_file, help="SQLite file to store/resume the optuna study")
    s.add_argument("--coverage", type=t.probability, default=0.9,
                   help="nominal coverage of the prediction intervals, in (0, 1)")
    s.add_argument("--weighting", default="throughput", choices=list(WEIGHTINGS),
                   help="how runs weigh in the fit: throughput (default; each run by its problem's fastest time over "
                        "its own, so the fast configurations a ranking needs fit best) or uniform")
    s.add_argument("--seed", type=t.seed, default=0)
    s.add_argument("--force", action="store_true", help="replace the output even where it is a symbolic link")
    s.set_defaults(func=cmd_train, argv=None)

    s = sub.add_parser("predict", help="predict times (with interval, regime, out-of-domain flag) for unseen sizes",
                       epilog=_PREDICT_EXAMPLES)
    s.add_argument("-m", "--model", required=True, type=t.model_file, help="model file from 'hybridperf train'")
    s.add_argument("--kernel", type=t.kernel, help="descriptor name or path (default: the model's only kernel)")
    s.add_argument("--gpu", help="GPU name or spec path (default: the model's only GPU)")
    s.add_argument("--set", action="append", default=[], metavar="NAME=VALUES",
                   help="parameter values: 4096 | 1024,2048 | 1024:8192:1024 | 1024:32768:x2 (repeatable)")
    s.add_argument("--rows", type=t.input_file,
                   help="CSV/Parquet of rows to predict (kernel, gpu, size.*, config.* columns)")
    s.add_argument("--coverage", type=t.probability, help="interval coverage in (0, 1) (default: the model's)")
    s.add_argument("--strict", action="store_true",
                   help="--rows: stop at the first invalid row instead of skipping it")
    s.add_argument("-o", "--output", type=t.table_output, help="also write the predictions (.csv or .parquet)")
    s.add_argument("--plot", type=t.plot_output,
                   help="draw the predicted curve over the size with its interval band, and the measured times of "
                        "--rows (.png, .svg or .pdf)")
    s.add_argument("--force", action="store_true", help="replace the outputs even where they are symbolic links")
    fmt = s.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true")
    fmt.add_argument("--csv", action="store_true")
    s.set_defaults(func=cmd_predict)

    s = sub.add_parser("evaluate", help="a split's accuracy: analytical, calibrated, boosting and hybrid side by side",
                       epilog=_EVALUATE_EXAMPLES)
    s.add_argument("data", nargs="*", help="sweep files or dataset names (default: the model's training data)")
    s.add_argument("-m", "--model", type=t.model_file,
                   help="take booster parameters (and default data) from this model")
    s.add_argument("--split", required=True, choices=list(SPLITS), help="which rows train and which test: "
                   + "; ".join(f"{k} {v}" for k, v in SPLIT_DESCRIPTIONS.items()))
    s.add_argument("--kernel", type=t.kernel, action="append",
                   help="evaluate on these kernels only: names or descriptor files (repeatable)")
    s.add_argument("--gpu", action="append", help="evaluate on these GPUs only (repeatable)")
    s.add_argument("--strict", action="store_true", help="stop at the first invalid row instead of skipping it")
    s.add_argument("--train-max-size", type=t.positive_float,
                   help="S2: train on sizes <= this (default: per kernel, up to 1/4 of its largest size "
                        "by its descriptor's size parameters, and its smallest size)")
    s.add_argument("--holdout", help="S3/S4: the kernel or GPU left out")
    s.add_argument("--calibration-runs", type=t.positive_int, help="S4: runs of the held-out GPU moved into training")
    s.add_argument("--budget", type=t.size_fraction, help="S5: fraction of the sweep measured, in (0, 1] "
                   "(default 0.01)")
    s.add_argument("--seed", type=t.seed, default=0)
    s.add_argument("-o", "--output", type=t.table_output, help="also write the table (.csv or .parquet)")
    s.add_argument("--plot", type=t.plot_output, help="draw predicted against measured and the error against the "
                   "size, per method (.png, .svg or .pdf)")
    s.add_argument("--force", action="store_true", help="replace the outputs even where they are symbolic links")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_evaluate)

    s = sub.add_parser("calibrate", help="fit a GPU's model machine parameters to recorded runs",
                       epilog=_CALIBRATE_EXAMPLES)
    s.add_argument("data", nargs="+", help="sweep files or dataset names with runs on that GPU")
    s.add_argument("--gpu", required=True)
    s.add_argument("--model", default="mwp-cwp", choices=list(DEFAULT_BOUNDS))
    s.add_argument("--param", action="append", help="parameters to fit (default: all the model reads)")
    s.add_argument("-o", "--output", help="write the calibrated spec TOML here")
    s.add_argument("--force", action="store_true", help="replace the output even where it is a symbolic link")
    s.set_defaults(func=cmd_calibrate)


