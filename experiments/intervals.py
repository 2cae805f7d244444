"""Interval coverage and sharpness per split and GPU: adaptive (Mondrian, normalised) vs constant-width conformal.

Targets (EVALUATION.md, issue 12): nominal 90% intervals cover 85-95% and nominal 80% cover 75-85% on S1,
S2 (NeuSight per GPU, seed 004, AIWC), S4 (each held-out GPU) and S6 (each GPU with no runs in training);
on S1 the median hi/lo ratio stays <= 1.5. Sharpness: the median hi/lo ratio and the Winkler score of the
90% interval (log space, lower is better), beside those of a constant-width split-conformal interval.

    .venv/bin/python experiments/intervals.py             # every case (results/intervals.md, .csv)
    .venv/bin/python experiments/intervals.py neusight   # cases whose name contains the word
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, header, md_table  # noqa: E402

from hybridperf.datasets import load_dataset  # noqa: E402
from hybridperf.evaluation.evaluate import evaluate  # noqa: E402
from hybridperf.hardware import gpu_names  # noqa: E402

SPECS = set(gpu_names())
COLUMNS = ["case", "split", "subset", "n_train", "n", "mape", "cover80", "cover90", "hilo90", "winkler90",
           "plain_cover90", "plain_hilo90", "plain_winkler90", "seconds"]


def _with_spec(df: pd.DataFrame) -> pd.DataFrame:
    return df[df.gpu.isin(SPECS)]


def _neusight() -> pd.DataFrame:
    return _with_spec(load_dataset("neusight-gemm"))


def cases() -> Iterator[tuple[str, str, str, Callable[[], pd.DataFrame], dict]]:
    """(case, split, subset, data loader, split options)."""
    gemm_gpus = sorted(_neusight().gpu.unique())
    for gpu in gemm_gpus:
        yield "neusight", "S1", gpu, lambda g=gpu: _neusight().query("gpu == @g"), {}
        yield "neusight", "S2", gpu, lambda g=gpu: _neusight().query("gpu == @g"), {"train_max_size": 512}
    yield "seed004", "S1", "titan-v", lambda: load_dataset("titanv-seed004"), {}
    yield "seed004", "S2", "titan-v", lambda: load_dataset("titanv-seed004"), {}
    yield "aiwc", "S2", "NVIDIA GPUs", lambda: _with_spec(load_dataset("aiwc-opendwarfs")), {"train_max_size": 2}
    for gpu in gemm_gpus:
        yield "neusight", "S4", gpu, _neusight, {"holdout": gpu, "calibration_runs": 50}
        yield "neusight", "S6", gpu, _neusight, {"holdout": gpu}
    for name in ("kt-gemm-rtx", "kt-convolution", "kt-dedispersion"):
        for gpu in sorted(load_dataset(name).gpu.unique()):
            yield name, "S4", gpu, lambda n=name: load_dataset(n), {"holdout": gpu, "calibration_runs": 50}
            yield name, "S6", gpu, lambda n=name: load_dataset(n), {"holdout": gpu}


def main(words: list[str]) -> None:
    out_csv = RESULTS / "intervals.csv"
    done = pd.read_csv(out_csv) if out_csv.exists() and words else pd.DataFrame(columns=COLUMNS)
    rows = []
    for case, split, subset, load, opts in cases():
        if words and not any(w in f"{case} {split} {subset}" for w in words):
            continue
        t0 = time.perf_counter()
        ev = evaluate(load(), split, methods=["hybrid"], **opts)
        rec = {"case": case, "split": split, "subset": subset, "n_train": ev.n_train,
               **ev.table.iloc[0].to_dict(), "seconds": time.perf_counter() - t0}
        rows.append({c: rec.get(c) for c in COLUMNS})
        print(pd.DataFrame(rows[-1:]).round(3).to_string(header=len(rows) == 1, index=False), flush=True)
    new = pd.DataFrame(rows, columns=COLUMNS)
    keys = ["case", "split", "subset"]
    if len(done):
        done = done.merge(new[keys], on=keys, how="left", indicator=True).query("_merge == 'left_only'")[COLUMNS]
    table = pd.concat([done, new], ignore_index=True) if len(done) else new
    table.to_csv(out_csv, index=False)
    ok90 = table["cover90"].between(85, 95)
    ok80 = table["cover80"].between(75, 85)
    text = [header("Prediction intervals: coverage and sharpness", "python experiments/intervals.py"),
            __doc__ or "", f"\n90% within 85-95%: {int(ok90.sum())} of {len(table)}; "
            f"80% within 75-85%: {int(ok80.sum())} of {len(table)}\n", md_table(table, floatfmt=".3g")]
    (RESULTS / "intervals.md").write_text("\n".join(text) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
