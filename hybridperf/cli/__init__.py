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


def _parse_sets(items: Sequence[str], flag: str = "--set") -> dict[str, list[float]]:
    from hybridperf.grid import parse_assignments

    return parse_assignments(items, flag)


# -- commands ------------------------------------------------------------------------------------

def cmd_gpus(args: argparse.Namespace) -> int:
    from pathlib import Path

    import pandas as pd

    from hybridperf.cli.tables import format_table
    from hybridperf.hardware import list_gpus

    rows = [{"name": Path(g.path).stem, "gpu": g.name, "cc": g.compute_capability, "sms": g.sm_count,
             "clock_mhz": g.core_clock_mhz, "dram_gbs": g.dram_bandwidth_gbs,
             "fp32_tflops": g.peak_fp32_gflops / 1000, "aliases": ",".join(g.aliases)} for g in list_gpus()]
    if args.json:
        _dump(rows)
    else:
        print(format_table(pd.DataFrame(rows)))
    return 0


def cmd_kernels(args: argparse.Namespace) -> int:
    import pandas as pd

    from hybridperf.cli.tables import format_table
    from hybridperf.kernel import list_kernels

    rows = [{"name": k.name, "sizes": ",".join(k.size_names), "config": ",".join(k.config_names),
             "space": k.space_size(), "description": k.description[:60]} for k in list_kernels()]
    if args.json:
        _dump(rows)
    else:
        print(format_table(pd.DataFrame(rows)))
    return 0


def cmd_analyze(args: argparse.Namespace) -> int:
    from hybridperf.analytical.run import MODELS, analyze
    from hybridperf.cli.tables import format_table
    from hybridperf.grid import parameter_grid

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
                from hybridperf.cli.tables import format_number
                print(f"  {k.ljust(width)}  {format_number(v.item() if hasattr(v, 'item') else v)}")
        if "mwp-cwp" in res.terms:
            print(f"\nregime: {summary['regime'].iloc[0]}")
        return 0
    print(format_table(summary))
    if "scaled-counts" in res.terms:
        print("\nscaled_counts_ms: seed 004's Eq. 4 with adjusting weight 1; it is meaningful only once calibrated "
              "on a measured run (the hybrid model does that per kernel and GPU)")
    if not res.feasible.all():
        print(f"\n{int((~res.feasible).sum())} of {len(summary)} configurations are infeasible (see status)")
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    from hybridperf.evaluation.reproduce import run_checks

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



def _sha256(path: str) -> str:
    import hashlib
    from pathlib import Path

    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _load_data(sources: Sequence[str]) -> tuple[Any, dict[str, str]]:
    """Read sweeps given as file paths or shipped dataset names; returns (table, {source: sha256})."""
    from pathlib import Path

    import pandas as pd

    from hybridperf.errors import HybridperfError
    from hybridperf.sweep import read_sweep

    frames, hashes = [], {}
    for src in sources:
        if Path(src).is_file():
            frames.append(read_sweep(src))
            hashes[src] = _sha256(src)
            continue
        from hybridperf.datasets import list_datasets, load_dataset

        known = {d.name: d for d in list_datasets()}
        if src not in known:
            raise HybridperfError(f"{src!r} is neither a sweep file nor a shipped dataset; run 'hybridperf datasets' "
                                  "for the names or check the path")
        frames.append(load_dataset(src))
        hashes[f"dataset:{src}"] = _sha256(str(known[src].data_path))
    if not frames:
        raise HybridperfError("give at least one sweep file or dataset name (see 'hybridperf datasets')")
    return pd.concat(frames, ignore_index=True), hashes


def _progress(args: argparse.Namespace) -> bool:
    return not getattr(args, "quiet", False) and sys.stderr.isatty()


def cmd_train(args: argparse.Namespace) -> int:
    import time

    from hybridperf.learn.model import train_model
    from hybridperf.learn.persist import save_model

    data, hashes = _load_data(args.data)
    if args.kernel:
        data = data[data["kernel"].isin(args.kernel)]
    t0 = time.perf_counter()
    model = train_model(data, baseline=args.baseline, mode=args.mode, coverage=args.coverage,
                        tune_trials=args.tune, study_path=args.study, progress=_progress(args),
                        random_state=args.seed,
                        provenance={"data": hashes, "command": "hybridperf " + " ".join(sys.argv[1:] if args.argv is None else args.argv)})
    seconds = time.perf_counter() - t0
    save_model(model, args.output)
    m = model.metadata
    print(f"trained {model.mode} model (baseline {model.baseline or 'none'}) on {m['n_rows']} runs "
          f"({m['n_dropped_not_ok']} failed/invalid rows kept out) of {len(m['kernels'])} kernel(s) on "
          f"{len(m['gpus'])} GPU(s) in {seconds:.1f} s; training log-RMSE {m['training_log_rmse']:.3f}"
          + (f", tuned CV log-RMSE {m['tuning']['cv_log_rmse']:.3f}" if m.get("tuning") else ""))
    print(f"wrote {args.output}")
    return 0


def _prediction_rows(args: argparse.Namespace, model: Any) -> Any:
    import pandas as pd

    from hybridperf.errors import HybridperfError
    from hybridperf.grid import parameter_grid
    from hybridperf.hardware import load_gpu
    from hybridperf.kernel import load_kernel
    from hybridperf.sweep import read_sweep

    if args.rows:
        try:
            rows = read_sweep(args.rows)
        except HybridperfError:
            rows = pd.read_csv(args.rows)
        return rows.reset_index(drop=True)
    kernels = list(model.metadata.get("kernels", {}))
    gpus = list(model.metadata.get("gpus", {}))
    kname = args.kernel or (kernels[0] if len(kernels) == 1 else None)
    gname = args.gpu or (gpus[0] if len(gpus) == 1 else None)
    if kname is None or gname is None:
        raise HybridperfError(f"the model covers kernels {kernels} and GPUs {gpus}; name one with --kernel and --gpu")
    desc = load_kernel(kname)
    from pathlib import Path
    gpu = Path(load_gpu(gname).path).stem if not str(gname).endswith(".toml") else gname
    grid = parameter_grid(_parse_sets(args.set))
    rows = pd.DataFrame({"kernel": desc.name, "gpu": gpu}, index=range(max(len(grid), 1)))
    for col in grid.columns:
        prefix = "size." if col in desc.size_names else "config." if col in desc.config_names else None
        if prefix is None:
            raise HybridperfError(f"--set {col}: {desc.name} has no parameter {col}; it takes {', '.join(desc.parameters)}")
        rows[prefix + col] = grid[col].to_numpy()
    return rows


def cmd_predict(args: argparse.Namespace) -> int:
    from hybridperf.cli.tables import format_table
    from hybridperf.learn.model import predict_rows
    from hybridperf.learn.persist import load_model

    model = load_model(args.model)
    rows = _prediction_rows(args, model)
    pred = predict_rows(model, rows, coverage=args.coverage)
    cov = args.coverage or model.estimator.coverage
    params = [c for c in rows.columns if c.startswith(("size.", "config."))]
    out = rows[["kernel", "gpu", *params]].join(pred)
    if args.json:
        _dump({"coverage": cov, "rows": [{k: _clean(v.item() if hasattr(v, "item") else v) for k, v in r.items()}
                                         for r in out.to_dict("records")]})
    elif args.csv:
        out.to_csv(sys.stdout, index=False)
    else:
        show = out.rename(columns=lambda c: c.split(".", 1)[-1])
        print(format_table(show[[c.split(".", 1)[-1] for c in params] + ["time_ms", "lo_ms", "hi_ms", "regime",
                                                                         "limiter", "out_of_domain", "ood_reason"]]))
        print(f"\ninterval: {cov:.0%} conformal; out_of_domain: outside the training range or unseen values")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from hybridperf.cli.tables import format_table
    from hybridperf.evaluation.evaluate import evaluate

    booster_params = None
    sources = list(args.data)
    if args.model:
        from hybridperf.learn.persist import load_model

        model = load_model(args.model)
        booster_params = {k: v for k, v in model.metadata.get("booster_params", {}).items()
                          if k in ("n_estimators", "max_depth", "learning_rate", "subsample", "colsample_bytree",
                                   "min_child_weight", "reg_lambda")}
        if not sources:
            sources = [s.removeprefix("dataset:") for s in model.metadata.get("data", {})]
    data, _ = _load_data(sources)
    if args.kernel:
        data = data[data["kernel"].isin(args.kernel)]
    opts = {k: v for k, v in dict(train_max_size=args.train_max_size, holdout=args.holdout,
                                  calibration_runs=args.calibration_runs, budget_fraction=args.budget).items()
            if v is not None}
    ev = evaluate(data, args.split, booster_params=booster_params, seed=args.seed, **opts)
    if args.json:
        _dump({"split": ev.split, "n_train": ev.n_train, "n_test": ev.n_test,
               "table": [{k: _clean(v) for k, v in r.items()} for r in ev.table.to_dict("records")]})
        return 0
    print(f"split {ev.split}: {ev.n_train} training runs, {ev.n_test} test runs")
    cols = [c for c in ["method", "n", "mape", "median_ape", "p90_ape", "spearman", "top1", "top5", "cover80",
                        "cover90", "seconds"] if c in ev.table.columns]
    print(format_table(ev.table[cols]))
    print("\nAPE in %; top-k: best measured / best measured among the k best predicted per (kernel, gpu, sizes); "
          "cover: % of measured times inside the nominal 80/90% intervals")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from hybridperf.learn.calibrate import calibrate_gpu, write_gpu_spec

    data, _ = _load_data(args.data)
    cal = calibrate_gpu(data, args.gpu, model=args.model, parameters=args.param or None)
    for name, value in cal.fitted.items():
        print(f"{name:32s} {cal.initial[name]:>10.4g} -> {value:>10.4g}")
    print(f"log RMSE of {args.model} over {cal.n_runs} runs: {cal.log_rmse_before:.3f} -> {cal.log_rmse_after:.3f}")
    if args.output:
        write_gpu_spec(cal.gpu, args.output, name=f"{cal.gpu.name} (calibrated)")
        print(f"wrote {args.output} (use it with --gpu {args.output})")
    return 0


def _gpa(args: argparse.Namespace, adv: Any) -> Any:
    """GPA on a stall-sample table; launch geometry from the first analysed row unless given."""
    from hybridperf.advise.gpa import GPAArch, advise_from_samples

    gpu = adv.gpu
    row = adv.table.iloc[0]
    prof = adv.kernel.profile({p: row[p] for p in adv.kernel.parameters})
    from hybridperf.analytical.launch import launch_state

    st = launch_state(prof, gpu)
    arch = GPAArch(name=gpu.name, sm_count=gpu.sm_count, max_warps_per_sm=gpu.limits.max_warps_per_sm,
                   schedulers_per_sm=4 if float(gpu.compute_capability) >= 5.0 else max(1, gpu.limits.max_warps_per_sm // 16))
    return advise_from_samples(
        args.samples, threads_per_block=int(args.threads_per_block or prof.threads_per_block[0]),
        blocks=int(args.blocks or prof.blocks[0]),
        active_warps_per_sm=float(args.active_warps or st.n_warps[0]), arch=arch, kernel=args.sample_kernel)


def cmd_advise(args: argparse.Namespace) -> int:
    from hybridperf.advise.benefits import advise, benefit_chart, format_advice
    from hybridperf.grid import parameter_grid

    adv = advise(args.kernel, args.gpu, parameter_grid(_parse_sets(args.set)))
    if args.samples:
        from hybridperf.advise.gpa import format_report, report_to_dict

        report = _gpa(args, adv)
        if args.json:
            _dump({"gpuperf": [{k: _clean(v.item() if hasattr(v, "item") else v) for k, v in r.items()}
                               for r in adv.table.to_dict("records")], "gpa": report_to_dict(report)})
        else:
            print(format_advice(adv))
            print("\n== GPA: stall samples -> estimated speedups of code changes (Zhou et al., CGO 2021)")
            print(format_report(report, top=args.top))
        if args.chart:
            benefit_chart(adv, args.chart, row=args.row)
        return 0
    if args.json:
        _dump([{k: _clean(v.item() if hasattr(v, "item") else v) for k, v in r.items()}
               for r in adv.table.to_dict("records")])
    else:
        print(format_advice(adv))
    if args.chart:
        benefit_chart(adv, args.chart, row=args.row)
        print(f"wrote {args.chart}", file=sys.stderr if args.json else sys.stdout)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from hybridperf.importers import import_to_file
    from hybridperf.sweep import summarize_sweep

    options: dict[str, Any] = {}
    for item in args.option:
        key, sep, value = item.partition("=")
        if not sep:
            from hybridperf.errors import HybridperfError
            raise HybridperfError(f"--option {item!r}: write KEY=VALUE")
        options[key.strip().replace("-", "_")] = value
    if args.map:
        options["mapping"] = dict(m.split("=", 1) for m in args.map)
    df = import_to_file(args.source, args.format, args.output, **options)
    s = summarize_sweep(df)
    print(f"imported {s.rows} rows ({s.ok} ok, {s.failed} failed, {s.invalid} invalid) of "
          f"{', '.join(s.kernels)} on {', '.join(s.gpus)} -> {args.output}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from hybridperf.importers import export_kernel_tuner

    data, _ = _load_data(args.data)
    export_kernel_tuner(data, args.output)
    print(f"wrote {len(data)} rows as a Kernel Tuner cache to {args.output}")
    return 0


def cmd_datasets(args: argparse.Namespace) -> int:
    import pandas as pd

    from hybridperf.cli.tables import format_table
    from hybridperf.datasets import describe_datasets

    rows = describe_datasets()
    if args.json:
        _dump([{k: _clean(v) for k, v in r.items()} for r in rows])
        return 0
    df = pd.DataFrame(rows)
    df["noise_cv"] = [f"{a:.2%} / {b:.2%}" if pd.notna(a) else "-" for a, b in zip(df.noise_cv_median, df.noise_cv_p95)]
    df["MB"] = df.data_bytes / 1e6
    print(format_table(df[["name", "rows", "ok", "failed", "invalid", "gpus", "kernels", "noise_cv", "licence", "MB"]]))
    print("\nnoise_cv: per-config coefficient of variation of repeats, median / p95 (the floor under any accuracy claim)")
    if args.verbose:
        for r in rows:
            print(f"\n{r['name']}: sizes {r['sizes']}; configs {r['configs']}")
    return 0


def cmd_record(args: argparse.Namespace) -> int:
    from hybridperf.errors import RecordError
    from hybridperf.grid import parse_assignments
    from hybridperf.record import record_sweep

    summary = record_sweep(args.kernel, parse_assignments(args.sizes, "--sizes", RecordError),
                           parse_assignments(args.space or [], "--space", RecordError) or None, args.output, gpu=args.gpu,
                           min_repeats=args.min_repeats, max_repeats=args.max_repeats, target_cv=args.target_cv,
                           warmup=args.warmup, ncu=args.ncu, retry_failed=args.retry_failed, bench=args.bench,
                           progress=_progress(args))
    print(summary.describe())
    return 1 if summary.stopped else 0


def _one_size(args: argparse.Namespace) -> dict[str, float]:
    from hybridperf.errors import HybridperfError

    sizes = {}
    for name, values in _parse_sets(args.set).items():
        if len(values) != 1:
            raise HybridperfError(f"--set {name}: ranking takes one problem size at a time, got {len(values)} values")
        sizes[name] = values[0]
    return sizes


def _rank(args: argparse.Namespace) -> Any:
    from hybridperf.learn.persist import load_model
    from hybridperf.search.rank import rank_configs

    model = load_model(args.model) if args.model else None
    space = {k: tuple(v) for k, v in _parse_sets(args.space or [], "--space").items()}
    client = None
    if getattr(args, "dask", None):
        from distributed import Client

        client = Client(args.dask)
    return rank_configs(model, args.kernel, args.gpu, _one_size(args), space_overrides=space or None,
                        top=args.top, screen_bandwidth=args.screen_bandwidth, pareto=not args.no_pareto,
                        chunk_rows=args.chunk_rows, progress=_progress(args), client=client)


def cmd_rank(args: argparse.Namespace) -> int:
    from hybridperf.cli.tables import format_table

    res = _rank(args)
    table = res.table
    if args.json:
        _dump({"counts": res.counts().to_dict("records"), "notes": list(res.notes),
               "table": [{k: _clean(v.item() if hasattr(v, "item") else v) for k, v in r.items()}
                         for r in table.to_dict("records")]})
        return 0
    if args.csv:
        res.candidates.to_csv(sys.stdout, index=False)
        return 0
    print(format_table(res.counts()))
    for note in res.notes:
        print(f"note: {note}")
    show = table.rename(columns=lambda c: c.removeprefix("config."))
    cols = [c for c in show.columns if c not in ("index", "efficiency", "utilization", "ood_reason")]
    print()
    print(format_table(show[cols]))
    print("\ntie_with_best: the interval overlaps the best candidate's; measure these rather than trust their order")
    return 0


def cmd_suggest(args: argparse.Namespace) -> int:
    from hybridperf.cli.tables import format_table
    from hybridperf.learn.persist import load_model
    from hybridperf.search.measure_next import suggest_next
    from hybridperf.sweep import read_sweep

    res = _rank(args)
    measured = read_sweep(args.measured) if args.measured else None
    model = load_model(args.model)
    sug = suggest_next(model, res.rows(), measured, batch=args.batch, explore=args.explore, seed=args.seed,
                       stop_gain=args.stop_gain)
    if args.json:
        _dump({"stop": sug.stop.stop, "reason": sug.stop.reason, "expected_gain": sug.stop.expected_gain,
               "best_measured_ms": _clean(sug.best_measured_ms),
               "batch": [{k: _clean(v.item() if hasattr(v, "item") else v) for k, v in r.items()}
                         for r in sug.table.to_dict("records")]})
        return 0
    print(f"{sug.n_candidates} candidates, {sug.n_measured} measured; best measured "
          f"{sug.best_measured_ms:.4g} ms" if sug.n_measured else f"{sug.n_candidates} candidates, none measured yet")
    print(f"stop: {'yes' if sug.stop.stop else 'no'} ({sug.stop.reason})")
    show = sug.table.rename(columns=lambda c: c.removeprefix("config."))
    print(format_table(show[[c for c in show.columns if not c.startswith(("size.", "kernel", "gpu"))]]))
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    import pandas as pd

    from hybridperf.cli.tables import format_table
    from hybridperf.search.measure_next import replay

    data, _ = _load_data(args.data)
    rows = []
    for strategy in ("model", "random"):
        for seed in range(args.seeds):
            tr = replay(data, args.kernel, args.gpu, _one_size(args) or None, initial=args.initial, batch=args.batch,
                        budget=args.budget, seed=seed, strategy=strategy)
            last = tr.steps.iloc[-1]
            rows.append({"strategy": strategy, "seed": seed, "measured": int(last["n_measured"]),
                         "best_fraction_of_optimum": float(last["fraction_of_optimum"]),
                         "measurements_to_99pct": tr.measurements_to(0.99), "stopped_at": tr.stopped_at})
    df = pd.DataFrame(rows)
    print(format_table(df))
    med = df.groupby("strategy")["best_fraction_of_optimum"].median()
    print(f"\nmedian fraction of the optimum reached: model {med.get('model', float('nan')):.3f}, "
          f"random {med.get('random', float('nan')):.3f} (same budget)")
    return 0

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
    s = sub.add_parser("train", help="fit a hybrid model on recorded sweeps and write a model file")
    s.add_argument("data", nargs="+", help="sweep files (CSV/Parquet) or shipped dataset names")
    s.add_argument("-o", "--output", required=True, help="model file to write (JSON)")
    s.add_argument("--baseline", default="auto", choices=["auto", "none", "mwp-cwp", "gpuperf", "scaled-counts", "roofline"])
    s.add_argument("--mode", default="hybrid", choices=["hybrid", "analytical", "calibrated", "boosting"])
    s.add_argument("--kernel", action="append", help="train on these kernels only (repeatable)")
    s.add_argument("--tune", type=int, default=0, metavar="N", help="optuna trials to tune the booster first")
    s.add_argument("--study", help="SQLite file to store/resume the optuna study")
    s.add_argument("--coverage", type=float, default=0.9, help="nominal coverage of the prediction intervals")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--quiet", action="store_true", help="no progress bars")
    s.set_defaults(func=cmd_train, argv=None)

    s = sub.add_parser("predict", help="predict times (with interval, regime, out-of-domain flag) for unseen sizes")
    s.add_argument("-m", "--model", required=True, help="model file from 'hybridperf train'")
    s.add_argument("--kernel", help="descriptor name or path (default: the model's only kernel)")
    s.add_argument("--gpu", help="GPU name or spec path (default: the model's only GPU)")
    s.add_argument("--set", action="append", default=[], metavar="NAME=VALUES",
                   help="parameter values: 4096 | 1024,2048 | 1024:8192:1024 | 1024:32768:x2 (repeatable)")
    s.add_argument("--rows", help="CSV/Parquet of rows to predict (kernel, gpu, size.*, config.* columns)")
    s.add_argument("--coverage", type=float, help="interval coverage (default: the model's)")
    fmt = s.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true")
    fmt.add_argument("--csv", action="store_true")
    s.set_defaults(func=cmd_predict)

    s = sub.add_parser("evaluate", help="a split's accuracy: analytical, calibrated, boosting and hybrid side by side")
    s.add_argument("data", nargs="*", help="sweep files or dataset names (default: the model's training data)")
    s.add_argument("-m", "--model", help="take booster parameters (and default data) from this model")
    s.add_argument("--split", required=True, choices=["S1", "S2", "S3", "S4", "S5"])
    s.add_argument("--kernel", action="append", help="evaluate on these kernels only (repeatable)")
    s.add_argument("--train-max-size", type=float, help="S2: train on sizes <= this (default: 1/4 of the largest)")
    s.add_argument("--holdout", help="S3/S4: the kernel or GPU left out")
    s.add_argument("--calibration-runs", type=int, help="S4: runs of the held-out GPU moved into training")
    s.add_argument("--budget", type=float, help="S5: fraction of the sweep measured (default 0.01)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_evaluate)

    s = sub.add_parser("calibrate", help="fit a GPU's model machine parameters to recorded runs")
    s.add_argument("data", nargs="+", help="sweep files or dataset names with runs on that GPU")
    s.add_argument("--gpu", required=True)
    s.add_argument("--model", default="mwp-cwp", choices=["mwp-cwp", "gpuperf"])
    s.add_argument("--param", action="append", help="parameters to fit (default: all the model reads)")
    s.add_argument("-o", "--output", help="write the calibrated spec TOML here")
    s.set_defaults(func=cmd_calibrate)

    s = sub.add_parser("advise", help="bottleneck, GPUPerf benefit metrics and what to optimise")
    s.add_argument("--gpu", required=True)
    s.add_argument("--kernel", required=True)
    s.add_argument("--set", action="append", default=[], metavar="NAME=VALUES")
    s.add_argument("--chart", help="write the benefit X-Y chart (seed 000 Fig. 4) as PNG")
    s.add_argument("--row", type=int, default=0, help="which row the chart shows")
    s.add_argument("--samples", help="per-instruction stall samples: plain CSV or an ncu source-page SASS export")
    s.add_argument("--sample-kernel", help="which kernel of a multi-kernel ncu export")
    s.add_argument("--threads-per-block", type=int, help="GPA: override the descriptor's threads per block")
    s.add_argument("--blocks", type=int, help="GPA: override the descriptor's blocks")
    s.add_argument("--active-warps", type=float, help="GPA: override active warps per SM (occupancy)")
    s.add_argument("--top", type=int, default=5, help="GPA: suggestions to show")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_advise)
    s = sub.add_parser("import", help="convert recorded runs (Kernel Tuner, KTT, UCI SGEMM, NeuSight, AIWC, CSV) to a sweep")
    s.add_argument("source", help="file (or folder for neusight) to import")
    s.add_argument("--format", required=True, choices=["kernel-tuner", "ktt", "uci-sgemm", "neusight", "aiwc", "csv"])
    s.add_argument("-o", "--output", required=True, help="sweep to write (.parquet, .csv or .csv.gz)")
    s.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="importer option, e.g. gpu=rtx-a4000, kernel=..., time_unit=us (repeatable)")
    s.add_argument("--map", action="append", metavar="SRC=DST", help="csv: column mapping, e.g. n=size.N")
    s.set_defaults(func=cmd_import)

    s = sub.add_parser("export", help="write sweeps as a Kernel Tuner cache JSON (to replay picks in Kernel Tuner)")
    s.add_argument("data", nargs="+")
    s.add_argument("-o", "--output", required=True)
    s.set_defaults(func=cmd_export)

    s = sub.add_parser("datasets", help="list the shipped datasets with rows, GPUs, kernels and noise floor")
    s.add_argument("--json", action="store_true")
    s.add_argument("-v", "--verbose", action="store_true", help="also size and config ranges")
    s.set_defaults(func=cmd_datasets)
    s = sub.add_parser("record", help="time a kernel's sizes x configurations on this machine's NVIDIA GPU (CuPy)")
    s.add_argument("--kernel", required=True, help="descriptor with a CUDA benchmark setup (see docs/record.md)")
    s.add_argument("--sizes", action="append", required=True, metavar="NAME=VALUES", help="size values (repeatable)")
    s.add_argument("--space", action="append", metavar="NAME=VALUES", help="config values (default: the descriptor's)")
    s.add_argument("-o", "--output", required=True, help="sweep file; rows already there are skipped (resume)")
    s.add_argument("--gpu", help="GPU spec to record under (default: matched from the device)")
    s.add_argument("--bench", help="benchmark setup TOML (default: the shipped one for the kernel)")
    s.add_argument("--min-repeats", type=int, default=5)
    s.add_argument("--max-repeats", type=int, default=50)
    s.add_argument("--target-cv", type=float, default=0.02, help="stop repeating below this coefficient of variation")
    s.add_argument("--warmup", type=int, default=3)
    s.add_argument("--ncu", action="store_true", help="also collect Nsight Compute metrics and stall samples")
    s.add_argument("--retry-failed", action="store_true", help="run rows recorded as failed again")
    s.add_argument("--quiet", action="store_true")
    s.set_defaults(func=cmd_record)
    def rank_args(s: argparse.ArgumentParser, model_required: bool) -> None:
        s.add_argument("-m", "--model", required=model_required, help="model file (without one: Ryoo efficiency order)")
        s.add_argument("--kernel", required=True)
        s.add_argument("--gpu", required=True)
        s.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="problem size (repeatable)")
        s.add_argument("--space", action="append", metavar="NAME=VALUES", help="restrict a config parameter's values")
        s.add_argument("--top", type=int, default=10)
        s.add_argument("--screen-bandwidth", action="store_true", help="drop roofline memory-bound configs first")
        s.add_argument("--no-pareto", action="store_true", help="rank every feasible config, not only the Pareto set")
        s.add_argument("--chunk-rows", type=int, default=200_000, help="configs per streamed chunk (bounds memory)")
        s.add_argument("--dask", metavar="ADDRESS", help="run the chunks on this Dask scheduler")
        s.add_argument("--quiet", action="store_true")

    s = sub.add_parser("rank", help="rank a kernel's configuration space: constraints, occupancy, Pareto, model")
    rank_args(s, model_required=False)
    fmt = s.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true")
    fmt.add_argument("--csv", action="store_true")
    s.set_defaults(func=cmd_rank)

    s = sub.add_parser("suggest", help="the next batch of configurations to measure (and whether to stop)")
    rank_args(s, model_required=True)
    s.add_argument("--measured", help="sweep of the runs measured so far")
    s.add_argument("--batch", type=int, default=8)
    s.add_argument("--explore", type=float, default=0.25, help="share of the batch chosen for information")
    s.add_argument("--stop-gain", type=float, default=0.005, help="stop when the expected relative gain is below")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_suggest)

    s = sub.add_parser("replay", help="run the measure-next loop on a recorded exhaustive sweep vs random sampling")
    s.add_argument("data", nargs="+", help="sweep files or dataset names")
    s.add_argument("--kernel", required=True)
    s.add_argument("--gpu", required=True)
    s.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    s.add_argument("--initial", type=int, default=16)
    s.add_argument("--batch", type=int, default=8)
    s.add_argument("--budget", type=int, default=160)
    s.add_argument("--seeds", type=int, default=3)
    s.set_defaults(func=cmd_replay)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hybridperf`` command; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if hasattr(args, "argv"):
        args.argv = list(argv) if argv is not None else None
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
