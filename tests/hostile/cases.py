"""The hostile cases: every command x every input kind, generated; each an argv run in the workspace folder.

A case expects ``error`` (exit 2, one ``hybridperf: error:`` line, nothing written) or ``ok`` (exit 0, only
its ``outputs`` written, and its ``check`` in :mod:`tests.hostile.checks` passing on the output).
"""
from __future__ import annotations

from typing import Any

from tests.hostile.models import KEY, REHASHED, TREE_EDITS
from tests.hostile.workspace import GPU_VARIANTS, KERNEL_VARIANTS

Case = dict[str, Any]

ANALYZE = ["analyze", "--gpu", "titan-v", "--kernel", "matvec"]
PREDICT = ["predict", "-m", "model_ok.json", "--kernel", "seed004-matvec", "--gpu", "titan-v"]
RANK = ["rank", "--kernel", "matvec", "--gpu", "titan-v", "--set", "N=4096", "--quiet"]
SUGGEST = ["suggest", "-m", "model_ok.json", "--kernel", "matvec", "--gpu", "titan-v", "--set", "N=4096", "--quiet"]
REPLAY = ["replay", "sweep_ok.csv", "--kernel", "seed004-matvec", "--gpu", "titan-v"]
EVALUATE = ["evaluate", "sweep_ok.csv", "--split", "S2"]
SPECIAL_FILES = ["/dev/zero", "fifo.{ext}", "adir.{ext}", "loop.toml", "missing.{ext}", "sparse.{ext}", "empty.{ext}"]


def _case(category: str, name: str, argv: list[str], expect: str = "error", **extra: Any) -> Case:
    return {"id": f"{category}/{name}", "category": category, "argv": argv, "expect": expect, **extra}


def option_cases() -> list[Case]:
    """Option values out of range or of the wrong kind, and unknown choices, per command."""
    out: list[Case] = []
    probabilities = ["2", "0", "1", "-0.1", "nan", "inf", "-inf", "abc", "", "1e999", "0x1"]
    for v in probabilities:
        out.append(_case("options", f"train-coverage={v}", ["train", "sweep_ok.csv", "-o", "out/m.json",
                                                            "--coverage", v]))
        out.append(_case("options", f"predict-coverage={v}", [*PREDICT, "--set", "N=1024", "--coverage", v]))
    for v in ["-1", "1.5", "abc", "4294967296", "1e3", "", "99999999999999999999999"]:
        out.append(_case("options", f"train-seed={v}", ["train", "sweep_ok.csv", "-o", "out/m.json", "--seed", v]))
        out.append(_case("options", f"evaluate-seed={v}", [*EVALUATE, "--seed", v]))
        out.append(_case("options", f"suggest-seed={v}", [*SUGGEST, "--seed", v]))
    positive = {"rank --top": RANK + ["--top"], "rank --chunk-rows": RANK + ["--chunk-rows"],
                "suggest --batch": SUGGEST + ["--batch"], "replay --initial": REPLAY + ["--initial"],
                "replay --budget": REPLAY + ["--budget"], "replay --seeds": REPLAY + ["--seeds"],
                "advise --top": ["advise", "--gpu", "titan-v", "--kernel", "matvec", "--top"],
                "advise --threads-per-block": ["advise", "--gpu", "titan-v", "--kernel", "matvec",
                                               "--threads-per-block"],
                "evaluate --calibration-runs": [*EVALUATE, "--calibration-runs"],
                "record --min-repeats": ["record", "--kernel", "matvec", "--sizes", "N=1024", "-o", "out/r.csv",
                                         "--min-repeats"],
                "train --tune": ["train", "sweep_ok.csv", "-o", "out/m.json", "--tune"]}
    for what, argv in positive.items():
        for v in ["0", "-5", "2.5", "x", "1e12", "10000000000"]:
            if what == "train --tune" and v == "0":
                continue  # 0 trials is valid (no tuning)
            out.append(_case("options", f"{what}={v}", [*argv, v]))
    for v in ["0", "1.5", "-1", "nan"]:
        out.append(_case("options", f"evaluate-budget={v}", [*EVALUATE, "--budget", v]))
        out.append(_case("options", f"evaluate-train-max-size={v if v != '1.5' else 'inf'}",
                         [*EVALUATE, "--train-max-size", v if v != "1.5" else "inf"]))
    for v in ["-0.1", "1.1", "nan"]:
        out.append(_case("options", f"suggest-explore={v}", [*SUGGEST, "--explore", v]))
    for v in ["-1", "inf"]:
        out.append(_case("options", f"suggest-stop-gain={v}", [*SUGGEST, "--stop-gain", v]))
    for v in ["0", "-1", "nan"]:
        out.append(_case("options", f"record-target-cv={v}", ["record", "--kernel", "matvec", "--sizes", "N=1",
                                                               "-o", "out/r.csv", "--target-cv", v]))
    out += [
        _case("options", "advise-row-out-of-range", ["advise", "--gpu", "titan-v", "--kernel", "matvec", "--set",
                                                     "N=1024", "--chart", "out/c.png", "--row", "5"]),
        _case("options", "advise-chart-format", ["advise", "--gpu", "titan-v", "--kernel", "matvec", "--set",
                                                 "N=1024", "--chart", "out/c.xyz"]),
        _case("options", "import-format", ["import", "csv_ok.csv", "--format", "xyz", "-o", "out/x.csv"]),
        _case("options", "evaluate-split", ["evaluate", "sweep_ok.csv", "--split", "S9"]),
        _case("options", "train-baseline", ["train", "sweep_ok.csv", "-o", "out/m.json", "--baseline", "nope"]),
        _case("options", "analyze-model", [*ANALYZE, "--model", "nope"]),
        _case("options", "unknown-command", ["frobnicate"]),
        _case("options", "unknown-flag", [*ANALYZE, "--frobnicate"]),
        _case("options", "predict-no-model", ["predict", "--set", "N=1"]),
        _case("options", "import-no-format", ["import", "csv_ok.csv", "-o", "out/x.csv"]),
        _case("options", "analyze-no-gpu", ["analyze", "--kernel", "matvec"]),
        _case("options", "predict-json-and-csv", [*PREDICT, "--json", "--csv"]),
        _case("options", "dask-bad-address", [*RANK, "--dask", "nonsense:::address"]),
        _case("options", "rank-space-product", [*RANK, "--space", "BLOCK=1:100000", "--space", "X=1:100000"]),
        _case("options", "unknown-kernel", ["analyze", "--gpu", "titan-v", "--kernel", "no-such-kernel"]),
        _case("options", "unknown-gpu", ["analyze", "--gpu", "gtx-9999", "--kernel", "matvec"]),
        _case("options", "evaluate-holdout", ["evaluate", "sweep_ok.csv", "--split", "S3", "--holdout", "nokernel"]),
        _case("options", "calibrate-param", ["calibrate", "sweep_ok.csv", "--gpu", "titan-v", "--param", "nope"]),
        _case("options", "train-study-fifo", ["train", "sweep_ok.csv", "-o", "out/m.json", "--study", "fifo.json"]),
        _case("options", "train-study-dir", ["train", "sweep_ok.csv", "-o", "out/m.json", "--study", "adir.json"]),
        _case("options", "train-study-nodir", ["train", "sweep_ok.csv", "-o", "out/m.json", "--study", "no/s.db"]),
    ]
    return out


SET_BAD = ["N", "=5", "N=", "N=abc", "N=nan", "N=inf", "N=-inf", "N=1e999", "N=1:2:3:4", "N=1:inf", "N=1:1e9:1",
           "N=1:1e12:x1.0000001", "N=1:10:0", "N=1:10:-1", "N=1:10:x1", "N=1:10:x0.5", "N=-1:10:x2", "N=0:10:x2",
           "N=10:1", "N=1,,2", "N=1;2", "N=0x10", "N=1:2:x", "N=::", "N=1:nan:1", "N=1:10:nan", "N=1:10:xnan",
           "1N=5", "N.x=5", "Q=1", "N=-5", "N=0", "N=" + ",".join(["1"] * 100_001)]


def set_cases() -> list[Case]:
    """The NAME=VALUES grammar of --set (and --space, --sizes) through every command that takes it."""
    out = [_case("set", f"analyze {v[:40]}", [*ANALYZE, "--set", v]) for v in SET_BAD]
    out += [_case("set", f"predict {v[:40]}", [*PREDICT, "--set", v]) for v in SET_BAD[:24]]
    out += [_case("set", f"advise {v[:40]}", ["advise", "--gpu", "titan-v", "--kernel", "matvec", "--set", v])
            for v in SET_BAD[4:16]]
    out += [_case("set", f"rank {v[:40]}", [c if c != "N=4096" else v for c in RANK]) for v in SET_BAD[3:11]]
    out += [_case("set", f"rank --space {v[:40]}", [*RANK, "--space", v.replace("N", "BLOCK", 1)])
            for v in ("N=nan", "N=1:2:3:4", "N=1:1e9:1", "N=abc")]
    out += [_case("set", f"record --sizes {v[:40]}", ["record", "--kernel", "matvec", "--sizes", v, "-o",
                                                      "out/r.csv"]) for v in ("N=nan", "N=1:2:3:4", "N=1:1e9:1")]
    out += [
        _case("set", "duplicate name", [*ANALYZE, "--set", "N=1", "--set", "N=2"]),
        _case("set", "product over the grid limit", ["analyze", "--gpu", "titan-v", "--kernel", "neusight-gemm",
                                                     "--set", "M=1:1000", "--set", "N=1:1000"]),
        _case("set", "replay two values", [*REPLAY, "--set", "N=1,2"]),
        _case("set", "rank two values", [c if c != "N=4096" else "N=1024,2048" for c in RANK]),
    ]
    valid = [("N=1024:4096:x2", [1024, 2048, 4096]), ("N=1024:4096:1024", [1024, 2048, 3072, 4096]),
             ("N=1e3", [1000]), ("N=4096, 1024", [4096, 1024]), ("N=1024:1024", [1024]),
             ("N=2:8:2", [2, 4, 6, 8])]
    for text, values in valid:
        out.append(_case("set", f"valid {text}", [*ANALYZE, "--set", text, "--json"], expect="ok",
                         check="analyze_values", values=values))
    out.append(_case("set", "valid true/false", ["analyze", "--gpu", "titan-v", "--kernel", "kt-convolution",
                                                 "--set", "use_padding=true,false", "--json"], expect="ok",
                     check="analyze_param", param="use_padding", values=[1, 0]))
    return out


def gpu_cases() -> list[Case]:
    """GPU spec files: every hostile variant through analyze, a subset through advise, rank and predict."""
    out = [_case("gpu-spec", f"analyze gpu_{n}", ["analyze", "--gpu", f"gpu_{n}.toml", "--kernel", "matvec"])
           for n in GPU_VARIANTS]
    for path in ["/dev/zero", "fifo.toml", "adir.toml", "loop.toml", "missing.toml", "binary.csv", "latin1.csv"]:
        out.append(_case("gpu-spec", f"analyze {path}", ["analyze", "--gpu", path, "--kernel", "matvec"]))
    some = ["inf", "nan", "bigint", "e999", "deep", "big", "syntax"]
    for n in some:
        out.append(_case("gpu-spec", f"advise gpu_{n}", ["advise", "--gpu", f"gpu_{n}.toml", "--kernel", "matvec"]))
        out.append(_case("gpu-spec", f"rank gpu_{n}", [c if c != "titan-v" else f"gpu_{n}.toml" for c in RANK]))
        out.append(_case("gpu-spec", f"predict gpu_{n}", ["predict", "-m", "model_ok.json", "--kernel",
                                                          "seed004-matvec", "--gpu", f"gpu_{n}.toml"]))
    out.append(_case("gpu-spec", "valid copy of titan-v", ["analyze", "--gpu", "gpu_ok.toml", "--kernel", "matvec",
                                                           "--set", "N=1024,8192", "--json"], expect="ok",
                     check="same_as_shipped", shipped=["--gpu", "titan-v"]))
    return out


def kernel_cases() -> list[Case]:
    """Kernel descriptors: every hostile variant through analyze, a subset through advise and rank."""
    out = [_case("descriptor", f"analyze kern_{n}", ["analyze", "--gpu", "titan-v", "--kernel", f"kern_{n}.toml"])
           for n in KERNEL_VARIANTS]
    for path in ["/dev/zero", "fifo.toml", "adir.toml", "loop.toml", "missing.toml"]:
        out.append(_case("descriptor", f"analyze {path}", ["analyze", "--gpu", "titan-v", "--kernel", path]))
    for n in ["neg_count", "neg_threads", "div_zero", "overflow", "deep_formula", "import", "deep", "huge_space"]:
        out.append(_case("descriptor", f"advise kern_{n}", ["advise", "--gpu", "titan-v", "--kernel",
                                                            f"kern_{n}.toml"]))
        out.append(_case("descriptor", f"rank kern_{n}", [c if c != "matvec" else f"kern_{n}.toml" for c in RANK]))
    out.append(_case("descriptor", "valid copy of matvec", ["analyze", "--gpu", "titan-v", "--kernel", "kern_ok.toml",
                                                            "--set", "N=1024,8192", "--json"], expect="ok",
                     check="same_as_shipped", shipped=["--kernel", "matvec"]))
    return out


IMPORTS: dict[str, list[tuple[str, list[str]]]] = {
    "kernel-tuner": [(f, []) for f in ("kt_trunc.json", "kt_list.json", "kt_deep.json", "kt_containers.json",
                                       "kt_bigint.json", "kt_nokeys.json",
                                       "kt_bomb.json.gz", "kt_trunc.json.gz", "empty.json", "binary.csv")]
    + [("kt_ok.json", ["--option", "gpu=nope-gpu"]), ("kt_ok.json", ["--option", "evil=1"])],
    "ktt": [(f, []) for f in ("ktt_trunc.json", "ktt_list.json", "ktt_deep.json", "ktt_bomb.json.gz", "empty.json")]
    + [("ktt_ok.json", ["--option", "sizes=grid=-5"]), ("ktt_ok.json", ["--option", "sizes=grid=nan"]),
       ("ktt_ok.json", ["--option", "time_unit=parsecs"])],
    "uci-sgemm": [(f, []) for f in ("uci_bomb.zip", "uci_corrupt.zip", "uci_nocsv.zip", "uci_dupcol.csv",
                                    "empty.csv", "binary.csv")],
    "neusight": [(f, []) for f in ("neusight_empty", "neusight_bad", "empty.csv")],
    "aiwc": [(f, []) for f in ("aiwc_dupcol.csv", "aiwc_trunc.csv", "empty.csv", "binary.csv")],
    "csv": [("csv_dupcol.csv", ["--map", "n=size.N", "--map", "time=time_ms"]),
            ("csv_negtime.csv", ["--map", "n=size.N", "--map", "bs=config.BLOCK", "--map", "time=time_ms"]),
            ("csv_naninf.csv", ["--map", "n=size.N", "--map", "bs=config.BLOCK", "--map", "time=time_ms"]),
            ("csv_bomb.csv.gz", ["--map", "n=size.N", "--map", "bs=config.BLOCK", "--map", "time=time_ms"]),
            ("csv_ok.csv", ["--map", "nope"]), ("csv_ok.csv", ["--map", "zz=size.N"]),
            ("csv_ok.csv", ["--map", "bs=config.BLOCK", "--map", "time=time_ms", "--option", "sizes=N=-5"]),
            ("csv_ok.csv", ["--map", "bs=config.BLOCK", "--map", "time=time_ms", "--option", "sizes=N=nan"]),
            ("csv_ok.csv", ["--map", "bs=config.BLOCK", "--map", "time=time_ms", "--option", "sizes=N=inf"]),
            ("csv_ok.csv", ["--map", "bs=config.BLOCK", "--map", "time=time_ms", "--option", "sizes=N"]),
            ("csv_ok.csv", ["--option", "novalue"]), ("latin1.csv", []), ("binary.csv", []), ("sweep_cells.csv", [])],
}


def import_cases() -> list[Case]:
    """Every import format with malformed, hostile and oversized sources, plus the special files."""
    out = []
    for fmt, items in IMPORTS.items():
        for i, (src, opts) in enumerate(items):
            argv = ["import", src, "--format", fmt, "-o", f"out/imp_{fmt}_{i}.csv", "--option", "kernel=seed004-matvec",
                    "--option", "gpu=titan-v"] if fmt == "csv" else ["import", src, "--format", fmt, "-o",
                                                                       f"out/imp_{fmt}_{i}.csv"]
            out.append(_case(f"import:{fmt}", f"{src} {' '.join(opts)}".strip(), [*argv, *opts]))
        for special in SPECIAL_FILES:
            src = special.format(ext="csv" if fmt in ("csv", "aiwc", "uci-sgemm") else "json")
            out.append(_case(f"import:{fmt}", f"special {src}", ["import", src, "--format", fmt, "-o",
                                                                 "out/special.csv"]))
    out.append(_case("import:csv", "valid csv", ["import", "csv_ok.csv", "--format", "csv", "-o", "out/csv_ok.parquet",
                                                 "--map", "n=size.N", "--map", "bs=config.BLOCK", "--map",
                                                 "time=time_ms", "--option", "kernel=seed004-matvec", "--option",
                                                 "gpu=titan-v"], expect="ok", outputs=["out/csv_ok.parquet"],
                     check="imported_csv"))
    for name, word in (("kt_nan", "nan"), ("kt_neg", "-3.5"), ("kt_big", "inf")):
        # Kernel Tuner marks failures with sentinel times: the row is kept as failed, with the reason.
        out.append(_case("import:kernel-tuner", f"failure sentinel {name}", ["import", f"{name}.json", "--format",
                                                                            "kernel-tuner", "-o", f"out/{name}.csv"],
                         expect="ok", outputs=[f"out/{name}.csv", f"out/{name}.csv.meta.json"], check="kt_failed_row",
                         source=f"{name}.json", word=word))
    out.append(_case("import:uci-sgemm", "negative run time", ["import", "uci_negtime.csv", "--format", "uci-sgemm",
                                                               "-o", "out/uci_neg.parquet"], expect="ok",
                     outputs=["out/uci_neg.parquet"], check="uci_left_out"))
    out.append(_case("import:kernel-tuner", "valid cache", ["import", "kt_ok.json", "--format", "kernel-tuner", "-o",
                                                            "out/kt_ok.csv"], expect="ok",
                     outputs=["out/kt_ok.csv", "out/kt_ok.csv.meta.json"], check="imported_kt"))
    return out


SWEEP_BAD = ["sweep_dupcol.csv", "sweep_negsize.csv", "sweep_infsize.csv", "sweep_inftime.csv", "sweep_negtime.csv",
             "sweep_strtime.csv", "sweep_unknown_gpu.csv", "sweep_nocol.csv", "sweep_header.csv", "sweep_dups.csv",
             "sweep_ragged.csv", "sweep_bomb.csv.gz", "sweep_trunc.csv.gz", "sweep_cells.csv", "sweep_bad.parquet",
             "sweep_sidecar.csv", "sweep_sidecar_deep.csv", "sweep_sidecar_fifo.csv", "sparse.csv", "sparse.parquet",
             "empty.csv", "binary.csv", "latin1.csv", "fifo.csv", "adir.csv", "dangling.csv", "/dev/zero"]
ROWS_BAD = ["rows_nan.csv", "rows_inf.csv", "rows_neg.csv", "rows_str.csv", "rows_dupcol.csv", "rows_nogpu.csv",
            "rows_blank.csv", "rows_unknown_kernel.csv", "sparse.csv", "fifo.csv", "adir.csv", "/dev/zero",
            "empty.csv", "sweep_bomb.csv.gz"]


def sweep_cases() -> list[Case]:
    """Sweep files read by train (all), evaluate, calibrate, replay, export (subsets); rows for predict."""
    out = [_case("sweep-files", f"train {s}", ["train", s, "-o", "out/m.json"]) for s in SWEEP_BAD]
    for s in SWEEP_BAD[::3]:
        out.append(_case("sweep-files", f"evaluate {s}", ["evaluate", s, "--split", "S2"]))
        out.append(_case("sweep-files", f"calibrate {s}", ["calibrate", s, "--gpu", "titan-v", "-o", "out/cal.toml"]))
        out.append(_case("sweep-files", f"replay {s}", ["replay", s, "--kernel", "seed004-matvec", "--gpu", "titan-v"]))
        out.append(_case("sweep-files", f"export {s}", ["export", s, "-o", "out/export.json"]))
        out.append(_case("sweep-files", f"suggest --measured {s}", [*SUGGEST, "--measured", s]))
    out += [_case("sweep-files", f"predict --rows {r}", ["predict", "-m", "model_ok.json", "--rows", r])
            for r in ROWS_BAD]
    out.append(_case("sweep-files", "valid rows", ["predict", "-m", "model_ok.json", "--rows", "rows_ok.csv", "--json"],
                     expect="ok", check="predict_rows"))
    return out


def model_cases(names: list[str]) -> list[Case]:
    """Model files: every hostile variant through predict, a subset through evaluate, rank and suggest."""
    variants = [f"model_{n}.json" for n in names if not n.startswith("signed")] + ["model_sparse.json"]
    variants += ["/dev/zero", "fifo.json", "adir.json", "missing.json", "empty.json"]
    out = [_case("model-files", f"predict {v}", ["predict", "-m", v, "--set", "N=1024", "--kernel", "seed004-matvec",
                                                 "--gpu", "titan-v"]) for v in variants]
    some = ["model_re_n_estimators.json", "model_re_booster_empty.json", "model_tree_child_oob.json",
            "model_tree_child_cycle.json", "model_deep.json", "/dev/zero", "fifo.json"]
    for v in some:
        out.append(_case("model-files", f"evaluate -m {v}", ["evaluate", "-m", v, "sweep_ok.csv", "--split", "S2"]))
        out.append(_case("model-files", f"rank -m {v}", [*RANK, "-m", v]))
        out.append(_case("model-files", f"suggest -m {v}", [c if c != "model_ok.json" else v for c in SUGGEST]))
    key = {"HYBRIDPERF_MODEL_KEY": KEY}
    out += [
        _case("model-files", "unsigned with key set", [*PREDICT, "--set", "N=1024"], env=key),
        _case("model-files", "signed with another key", [*PREDICT[:2], "model_signed_other.json", *PREDICT[3:],
                                                         "--set", "N=1024"], env=key),
        _case("model-files", "signed then tampered", [*PREDICT[:2], "model_signed_tampered.json", *PREDICT[3:],
                                                      "--set", "N=1024"], env=key),
        _case("model-files", "valid signed with key", [*PREDICT[:2], "model_signed.json", *PREDICT[3:], "--set",
                                                       "N=2048,8192", "--json"], env=key, expect="ok",
              check="predict_signed"),
        _case("model-files", "valid coverage 0.5", [*PREDICT, "--set", "N=2048", "--coverage", "0.5", "--json"],
              expect="ok", check="predict_coverage"),
    ]
    assert len(REHASHED) + len(TREE_EDITS) > 30
    return out


def output_cases() -> list[Case]:
    """Output paths of every command that writes: devices, folders, links, inputs, missing folders."""
    writers = {
        "train": lambda o: ["train", "sweep_ok.csv", "-o", o],
        "import": lambda o: ["import", "csv_ok.csv", "--format", "csv", "-o", o, "--map", "n=size.N", "--map",
                             "bs=config.BLOCK", "--map", "time=time_ms", "--option", "kernel=seed004-matvec",
                             "--option", "gpu=titan-v"],
        "export": lambda o: ["export", "sweep_ok.csv", "-o", o],
        "calibrate": lambda o: ["calibrate", "sweep_ok.csv", "--gpu", "titan-v", "--param", "dram_latency_cycles",
                                "-o", o],
        "advise": lambda o: ["advise", "--gpu", "titan-v", "--kernel", "matvec", "--set", "N=1024", "--chart", o],
    }
    targets = {"directory": "out", "dev-full": "/dev/full", "dev-null": "/dev/null", "fifo": "fifo.csv",
               "symlink": "link.json", "missing-dir": "nodir/x.json", "dot": ".", "long-name": "out/" + "x" * 300,
               "read-only": "/sys/hybridperf-out.json", "input": "sweep_ok.csv"}
    out = []
    for cmd, argv in writers.items():
        for what, target in targets.items():
            if cmd in ("import", "advise") and what == "input":
                target = "csv_ok.csv" if cmd == "import" else "kern_ok.toml"
            if cmd == "advise" and what == "input":
                argv2 = ["advise", "--gpu", "titan-v", "--kernel", "kern_ok.toml", "--chart", target]
                out.append(_case("output-paths", f"{cmd} -> {what}", argv2))
                continue
            out.append(_case("output-paths", f"{cmd} -> {what}", argv(target)))
    out.append(_case("output-paths", "train -o model input", ["train", "sweep_ok.csv", "-o", "model_ok.json",
                                                               "--study", "model_ok.json"]))
    out.append(_case("output-paths", "export --force over symlink", ["export", "sweep_one.csv", "-o", "link.json",
                                                                     "--force"], expect="ok",
                     outputs=["link.json"], check="forced_link"))
    return out


def all_cases(model_names: list[str]) -> list[Case]:
    cases = (option_cases() + set_cases() + gpu_cases() + kernel_cases() + import_cases() + sweep_cases()
             + model_cases(model_names) + output_cases())
    ids = [c["id"] for c in cases]
    assert len(ids) == len(set(ids)), [i for i in ids if ids.count(i) > 1][:5]
    return cases
