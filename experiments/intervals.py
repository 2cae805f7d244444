"""Interval coverage and sharpness per split and GPU: adaptive (Mondrian, normalised) vs constant-width conformal.

Targets (EVALUATION.md, issue 12): nominal 90% intervals cover 85-95% and nominal 80% cover 75-85% on S1, S2
(NeuSight per GPU, seed 004, AIWC), S4 (each held-out GPU) and S6 (each GPU with no runs in training: NeuSight GEMM
and Kernel Tuner convolution), per GPU; measured beside them, NeuSight's elementwise, softmax and layernorm ops
(``neusight-ops``) on S2 and S6; on S1 the median hi/lo ratio stays <= 1.5. Sharpness, beside coverage: the median
hi/lo ratio and the mean interval (Winkler) score in log space (lower is better) of each level, for the product's
adaptive intervals and for the constant-width split-conformal interval of the estimator (``plain_*``: one width
from the random-fold scores, another from the forward scores beyond the trained sizes).

Each case is one fit of the product's model (the hybrid of ``evaluate``: default booster, size-band groups,
seed 0) on the split's training rows; a case with several GPUs in its test rows gets one line per GPU. The
``new-user`` case (split ``default``) fits nothing: the shipped models/default.json predicts the NeuSight GEMM
rows (bmm, linear; /work/shared/data) of the GPUs with a spec that it was not trained on, one line per GPU.

    .venv/bin/python experiments/intervals.py             # every case (results/intervals.md, .csv)
    .venv/bin/python experiments/intervals.py S6 aiwc     # cases whose "case split subset" contains a word
    .venv/bin/python experiments/intervals.py --rows DIR  # also write each case's per-row intervals there
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, SHARED, header, md_table, neusight_ops  # noqa: E402

from hybridperf.datasets import load_dataset  # noqa: E402
from hybridperf.evaluation.evaluate import ape_metrics, interval_metrics  # noqa: E402
from hybridperf.evaluation.splits import split_indices  # noqa: E402
from hybridperf.files import atomic_write_text  # noqa: E402
from hybridperf.hardware import gpu_names  # noqa: E402
from hybridperf.learn.estimator import default_booster  # noqa: E402
from hybridperf.learn.features import analytical_features  # noqa: E402
from hybridperf.learn.intervals import bin_keys  # noqa: E402
from hybridperf.learn.model import TrainedModel, fit_model, load_model, make_model, predict_rows, size_bands  # noqa: E402
from hybridperf.sweep import training_rows  # noqa: E402

SPECS = set(gpu_names())
DEFAULT_MODEL = Path(__file__).resolve().parents[1] / "models" / "default.json"
NEUSIGHT_RAW = SHARED / "neusight" / "scripts" / "asplos" / "data" / "dataset" / "train" / "collect"
LEVELS = (0.8, 0.9)
COLUMNS = ["case", "split", "subset", "n_train", "n", "mape", "cover80", "cover90", "hilo80", "hilo90", "winkler80",
           "winkler90", "plain_cover80", "plain_cover90", "plain_hilo90", "plain_winkler90", "seconds", "bins"]
Case = tuple[str, str, str, Callable[[], pd.DataFrame], dict]


def _with_spec(df: pd.DataFrame) -> pd.DataFrame:
    return df[df.gpu.isin(SPECS)]


def _neusight() -> pd.DataFrame:
    return _with_spec(load_dataset("neusight-gemm"))


def cases() -> Iterator[Case]:
    """(case, split, subset, data loader, split options); subset "each" = one line per GPU of the test rows."""
    gemm_gpus = sorted(_neusight().gpu.unique())
    yield "seed004", "S2", "titan-v", lambda: load_dataset("titanv-seed004"), {}
    yield "aiwc", "S2", "each", lambda: _with_spec(load_dataset("aiwc-opendwarfs")), {"train_max_size": 2}
    for gpu in gemm_gpus:
        yield "neusight", "S2", gpu, lambda g=gpu: _neusight().query("gpu == @g"), {"train_max_size": 512}
    for gpu in sorted(load_dataset("kt-gemm-rtx").gpu.unique()):
        yield "kt-gemm-rtx", "S4", gpu, lambda: load_dataset("kt-gemm-rtx"), {"holdout": gpu, "calibration_runs": 50}
    for gpu in gemm_gpus:
        yield "neusight", "S1", gpu, lambda g=gpu: _neusight().query("gpu == @g"), {}
    for gpu in gemm_gpus:
        yield "neusight", "S6", gpu, _neusight, {"holdout": gpu}
    for gpu in sorted(load_dataset("kt-convolution").gpu.unique()):
        yield "kt-convolution", "S6", gpu, lambda: load_dataset("kt-convolution"), {"holdout": gpu}
    for gpu in gemm_gpus:
        yield "neusight-ops", "S2", gpu, lambda g=gpu: neusight_ops().query("gpu == @g"), {}
    for gpu in gemm_gpus:
        yield "neusight-ops", "S6", gpu, neusight_ops, {"holdout": gpu}
    yield "new-user", "default", "each", new_user_rows, {}


def fit_and_predict(sweep: pd.DataFrame, split: str, seed: int = 0, **opts: object) -> tuple[pd.DataFrame, int]:
    """Fit the product's model on a split's training rows (as ``evaluate``'s hybrid) and predict its
    test rows: per row the measurement, the prediction, the adaptive and the plain intervals at each
    level, and the out-of-domain reasons. Returns (rows, number of training rows)."""
    rows = training_rows(sweep).reset_index(drop=True)
    feats = analytical_features(rows)
    y = rows["time_ms"].to_numpy(dtype=np.float64)
    tr, te = split_indices(rows, split, seed=seed, **opts)
    feasible = feats["feasible"].to_numpy() > 0
    tr, te = tr[feasible[tr]], te[feasible[te]]
    pipe = make_model(regressor=default_booster(seed), random_state=seed)
    model = fit_model(pipe, rows.iloc[tr], y[tr], features=feats.iloc[tr], groups=size_bands(rows.iloc[tr]),
                      random_state=seed)
    return predict_case(model, rows.iloc[te], feats.iloc[te]), len(tr)


def predict_case(model: TrainedModel, test: pd.DataFrame, tf: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per test row: the measurement, the prediction, the adaptive and the plain intervals at each
    level, the out-of-domain reasons and the calibration bin diagnostics (``tf``: the rows' features)."""
    tf = analytical_features(test, kernels=model.descriptors) if tf is None else tf
    out = test[["kernel", "gpu"]].copy()
    out["measured_ms"] = test["time_ms"].to_numpy(dtype=np.float64)
    X = model.features.transform(test, features=tf)
    for cov in LEVELS:
        p = predict_rows(model, test, cov, features=tf, check=False)
        pct = round(cov * 100)
        out["time_ms"] = p["time_ms"].to_numpy()
        out[f"lo{pct}"], out[f"hi{pct}"] = p["lo_ms"].to_numpy(), p["hi_ms"].to_numpy()
        out[f"plain_lo{pct}"], out[f"plain_hi{pct}"] = model.estimator.predict_interval(X, cov)
    for col in p.columns:
        if col.startswith("ood_"):
            out[col] = p[col].to_numpy()
    if model.intervals is not None:  # diagnostics: each row's main bin, its difficulty and the bin's calibration
        ci = model.intervals
        reasons = p[[c for c in p.columns if c.startswith("ood_") and c != "ood_reason"]]
        out["bin"] = [k[0] for k in bin_keys(reasons, test["kernel"])]
        out["sigma"] = ci.sigma(X, reasons)  # as the widths use it (unseen or few-runs GPU: their fixed sigma)
        out["bin_scores"] = [len(ci.scores.get(b, ())) for b in out["bin"]]
        out["bin_q90"] = [ci.quantile(b, 0.9, min_bin=1) for b in out["bin"]]
    return out.reset_index(drop=True)


def new_user_rows() -> pd.DataFrame:
    """NeuSight GEMM rows (bmm, linear) of GPUs with a spec that the shipped default model was not trained on."""
    from hybridperf.importers.neusight import read_neusight

    trained = set(load_model(DEFAULT_MODEL).metadata.get("gpus", {}))
    rows = training_rows(read_neusight(NEUSIGHT_RAW, ops=["bmm", "linear"], progress=False))
    return rows[rows.gpu.isin(SPECS) & ~rows.gpu.isin(trained)].reset_index(drop=True)


def default_model_case(rows: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The shipped default model's intervals on ``rows``, as a new user would get them (no fit here);
    no rows (every NeuSight GPU trained on): an empty table, so no line."""
    model = load_model(DEFAULT_MODEL)
    if not len(rows):
        print("  no NeuSight GEMM rows of GPUs absent from the default model's training", flush=True)
        return pd.DataFrame(columns=["gpu"]), int(model.metadata.get("n_rows", 0))
    return predict_case(model, rows.reset_index(drop=True)), int(model.metadata.get("n_rows", 0))


def diagnose(pred: pd.DataFrame) -> str:
    """The test rows' main bins (over 10% of the rows): share, calibration scores, the bin's 90% score
    quantile and the test rows' own (|log error| / sigma): far apart = not exchangeable."""
    if "bin" not in pred:
        return ""
    score = np.abs(np.log(pred["measured_ms"] / pred["time_ms"])) / pred["sigma"]
    parts = []
    for b, g in pred.assign(score=score).groupby("bin"):
        if len(g) >= 0.1 * len(pred):
            parts.append(f"{b}: {len(g) / len(pred):.0%} of rows, {g['bin_scores'].iloc[0]} scores, "
                         f"q90 {g['bin_q90'].iloc[0]:.3g} vs test {np.quantile(g['score'], 0.9):.3g}")
    return "; ".join(parts)


def summarise(pred: pd.DataFrame) -> dict[str, float]:
    """Accuracy, coverage and sharpness of one set of predicted rows (see the module docstring)."""
    y = pred["measured_ms"].to_numpy()
    rec: dict[str, float] = {"n": len(pred), "mape": ape_metrics(pred["time_ms"].to_numpy(), y)["mape"]}
    for cov in LEVELS:
        pct = round(cov * 100)
        for prefix in ("", "plain_"):
            m = interval_metrics(pred[f"{prefix}lo{pct}"].to_numpy(), pred[f"{prefix}hi{pct}"].to_numpy(), y, cov)
            rec[f"{prefix}cover{pct}"], rec[f"{prefix}hilo{pct}"] = m["cover"], m["hilo"]
            rec[f"{prefix}winkler{pct}"] = m["winkler"]
    return rec


def run_case(case: Case, rows_dir: Path | None = None) -> list[dict]:
    """One fit; a line per GPU when the subset is "each", else one line."""
    name, split, subset, load, opts = case
    t0 = time.perf_counter()
    pred, n_train = default_model_case(load()) if split == "default" else fit_and_predict(load(), split, **opts)
    seconds = time.perf_counter() - t0
    if rows_dir is not None:
        pred.to_parquet(rows_dir / f"{name}_{split}_{subset}.parquet")
    parts = pred.groupby("gpu") if subset == "each" else [(subset, pred)]
    return [{"case": name, "split": split, "subset": str(sub), "n_train": n_train, **summarise(p), "seconds": seconds,
             "bins": diagnose(p)} for sub, p in parts]


def write(new_rows: list[dict], ran: list[tuple[str, str, str]], merge: bool) -> None:
    """results/intervals.csv and .md: the cases run now replace their earlier lines; with ``merge`` the
    other lines are those of the csv as it is now (so that runs of different cases side by side keep
    each other's lines), else none."""
    out_csv = RESULTS / "intervals.csv"
    done = pd.read_csv(out_csv) if merge and out_csv.exists() else pd.DataFrame(columns=COLUMNS)
    new = pd.DataFrame(new_rows, columns=COLUMNS)
    if len(done):
        keep = [not any(r.case == c and r.split == s and (r.subset == sub or sub == "each") for c, s, sub in ran)
                for r in done.itertuples()]
        done = done[keep]
    table = pd.concat([done, new], ignore_index=True) if len(done) else new
    order = {s: i for i, s in enumerate(("S1", "S2", "S4", "S6", "default"))}
    table = table.sort_values(["split", "case", "subset"], key=lambda c: c.map(order) if c.name == "split" else c)
    atomic_write_text(out_csv, table.to_csv(index=False))
    ok90 = table["cover90"].between(85, 95)
    ok80 = table["cover80"].between(75, 85)
    s1 = table[table.split == "S1"]
    text = [header("Prediction intervals: coverage and sharpness", "python experiments/intervals.py"),
            __doc__ or "", f"\n90% within 85-95%: {int(ok90.sum())} of {len(table)}; "
            f"80% within 75-85%: {int(ok80.sum())} of {len(table)}; both: {int((ok90 & ok80).sum())}; "
            f"S1 largest median hi/lo (90%): {s1['hilo90'].max():.3g}\n",
            md_table(table.drop(columns="bins"), floatfmt=".3g"),
            "\n## Calibration bins of the test rows\n\nPer case, each bin holding over 10% of the test rows: its "
            "share, its calibration scores, its 90% quantile of |log error| / sigma and the test rows' own (far apart: "
            "the calibration's held-out fits were not exchangeable with this test).\n",
            md_table(table[["case", "split", "subset", "bins"]].fillna(""))]
    atomic_write_text(RESULTS / "intervals.md", "\n".join(text) + "\n")


def main(argv: list[str]) -> None:
    rows_dir = None
    if "--rows" in argv:
        i = argv.index("--rows")
        rows_dir = Path(argv[i + 1])
        rows_dir.mkdir(parents=True, exist_ok=True)
        argv = argv[:i] + argv[i + 2:]
    words = argv
    new_rows: list[dict] = []
    ran: list[tuple[str, str, str]] = []
    for case in cases():
        name, split, subset = case[:3]
        if words and not any(w in f"{name} {split} {subset}" for w in words):
            continue
        lines = run_case(case, rows_dir)
        new_rows += lines
        ran.append((name, split, subset))
        print(pd.DataFrame(lines, columns=COLUMNS).drop(columns="bins").round(3).to_string(index=False), flush=True)
        write(new_rows, ran, merge=bool(words))  # after every case: a cut-off run keeps what it measured


if __name__ == "__main__":
    main(sys.argv[1:])
