"""Commands that move recorded runs in and out: import, export, record."""
from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_commands"]


def _options(items: list[str], maps: list[str] | None) -> dict[str, Any]:
    from hybridperf.errors import HybridperfError

    options: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise HybridperfError(f"--option {item!r}: write KEY=VALUE")
        options[key.strip().replace("-", "_")] = value
    if maps:
        bad = [m for m in maps if "=" not in m]
        if bad:
            raise HybridperfError(f"--map {bad[0]!r}: write SOURCE=DEST, e.g. --map n=size.N")
        sources = [m.split("=", 1)[0] for m in maps]
        twice = sorted({c for c in sources if sources.count(c) > 1})
        if twice:
            raise HybridperfError(f"--map names column {twice[0]!r} twice; map each source column once")
        options["mapping"] = dict(m.split("=", 1) for m in maps)
    return options


def cmd_import(args: argparse.Namespace) -> int:
    from hybridperf.importers import import_to_file
    from hybridperf.sweep import summarize_sweep

    df = import_to_file(args.source, args.format, args.output, strict=args.strict, **_options(args.option, args.map))
    s = summarize_sweep(df)
    print(f"imported {s.rows} rows ({s.ok} ok, {s.failed} failed, {s.invalid} invalid) of "
          f"{', '.join(s.kernels)} on {', '.join(s.gpus)} -> {args.output}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from hybridperf.datasets import load_sources
    from hybridperf.importers import export_kernel_tuner

    data, _ = load_sources(args.data)
    export_kernel_tuner(data, args.output)
    print(f"wrote {len(data)} rows as a Kernel Tuner cache to {args.output}")
    return 0


def cmd_record(args: argparse.Namespace) -> int:
    from hybridperf.errors import RecordError
    from hybridperf.grid import parse_assignments
    from hybridperf.record import record_sweep

    summary = record_sweep(args.kernel, parse_assignments(args.sizes, "--sizes", RecordError),
                           parse_assignments(args.space or [], "--space", RecordError) or None, args.output,
                           gpu=args.gpu, min_repeats=args.min_repeats, max_repeats=args.max_repeats,
                           target_cv=args.target_cv, warmup=args.warmup, ncu=args.ncu, retry_failed=args.retry_failed,
                           bench=args.bench, progress=True)
    print(summary.describe())
    return 1 if summary.stopped else 0


def add_commands(sub: Any) -> None:
    from hybridperf.cli import argtypes as t

    s = sub.add_parser("import", help="convert recorded runs (Kernel Tuner, KTT, UCI SGEMM, NeuSight, AIWC, CSV) "
                                      "to a sweep",
                       epilog="examples:\n  hybridperf import cache.json --format kernel-tuner -o sweep.parquet\n"
                              "  hybridperf import sgemm_product_dataset.zip --format uci-sgemm -o uci.parquet\n"
                              "  hybridperf import runs.csv --format csv --map n=size.N --map bs=config.BLOCK --map "
                              "t=time_ms --option kernel=seed004-matvec --option gpu=titan-v -o sweep.csv\n"
                              "(docs/sweep-format.md describes every format and option)")
    s.add_argument("source", type=t.input_path, help="file (or folder for neusight) to import")
    s.add_argument("--format", required=True, choices=["kernel-tuner", "ktt", "uci-sgemm", "neusight", "aiwc", "csv"])
    s.add_argument("-o", "--output", required=True, help="sweep to write (.parquet, .csv or .csv.gz)")
    s.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="importer option, e.g. gpu=rtx-a4000, kernel=NAME or kernel=FILE.toml, time_unit=us, "
                        "known_gpus=A,B (repeatable)")
    s.add_argument("--map", action="append", metavar="SRC=DST", help="csv: column mapping, e.g. n=size.N")
    s.add_argument("--strict", action="store_true",
                   help="stop at rows that break their kernel's descriptor instead of leaving them out")
    s.add_argument("--force", action="store_true", help="replace the output even where it is a symbolic link")
    s.set_defaults(func=cmd_import)

    s = sub.add_parser("export", help="write sweeps as a Kernel Tuner cache JSON (to replay picks in Kernel Tuner)",
                       epilog="examples:\n  hybridperf export sweep.parquet -o replay.json\n"
                              "(time is Kernel Tuner's mean of times, where the sweep kept its repeats; "
                              "docs/kernel-tuner-interop.md)")
    s.add_argument("data", nargs="+")
    s.add_argument("-o", "--output", required=True)
    s.add_argument("--force", action="store_true", help="replace the output even where it is a symbolic link")
    s.set_defaults(func=cmd_export)

    s = sub.add_parser("record", help="time a kernel's sizes x configurations on this machine's NVIDIA GPU (CuPy)",
                       epilog="examples (need CuPy and an NVIDIA GPU):\n"
                              "  hybridperf record --kernel seed004-vecadd --sizes N=1e6:1e8:x10 -o vecadd.parquet\n"
                              "  hybridperf record --kernel bench-reduction --sizes N=16777216 --space VARIANT=0,1,2 "
                              "BLOCK=128,256 -o reduction.csv\n"
                              "(docs/record.md: resuming, repeats, Nsight Compute)")
    s.add_argument("--kernel", type=t.kernel, required=True,
                   help="descriptor with a CUDA benchmark setup (see docs/record.md)")
    s.add_argument("--sizes", action="extend", nargs="+", required=True, metavar="NAME=VALUES",
                   help="size values, one or more per flag: --sizes N=1024,2048 M=64 (repeatable)")
    s.add_argument("--space", action="extend", nargs="+", metavar="NAME=VALUES",
                   help="config values (default: the descriptor's), one or more per flag: --space BLOCK=128,256 "
                        "VARIANT=0,1")
    s.add_argument("-o", "--output", required=True, help="sweep file; rows already there are skipped (resume)")
    s.add_argument("--gpu", help="GPU spec to record under (default: matched from the device)")
    s.add_argument("--bench", type=t.input_file, help="benchmark setup TOML (default: the shipped one for the kernel)")
    s.add_argument("--min-repeats", type=t.count(100_000), default=5)
    s.add_argument("--max-repeats", type=t.count(100_000), default=50)
    s.add_argument("--target-cv", type=t.positive_float, default=0.02,
                   help="stop repeating below this coefficient of variation")
    s.add_argument("--warmup", type=t.count(100_000, lo=0), default=3)
    s.add_argument("--ncu", action="store_true", help="also collect Nsight Compute metrics and stall samples")
    s.add_argument("--retry-failed", action="store_true", help="run rows recorded as failed again")
    s.add_argument("--force", action="store_true", help="replace the output even where it is a symbolic link")
    s.set_defaults(func=cmd_record)
