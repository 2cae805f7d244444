"""Splits S1-S5, accuracy/ranking metrics, and the baselines side by side (EVALUATION.md)."""
from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from hybridperf.analytical.run import TIME_MODELS
from hybridperf.errors import HybridperfError
from hybridperf.evaluation.splits import split_indices
from hybridperf.kernel import resolve_kernels
from hybridperf.learn.baseline import baseline_column
from hybridperf.learn.domain import size_columns
from hybridperf.learn.estimator import default_booster
from hybridperf.learn.features import analytical_features
from hybridperf.learn.model import TrainedModel, fit_model, make_model, predict_rows, size_bands
from hybridperf.progress import task, track
from hybridperf.rowcheck import drop_bad_rows
from hybridperf.sweep import param_columns, row_keys, training_rows

__all__ = ["Evaluation", "ape_metrics", "evaluate", "interval_metrics", "topk_scores"]

def ape_metrics(pred: np.ndarray, meas: np.ndarray) -> dict[str, float]:
    """MAPE, median and P90 absolute percentage error (in %), and Spearman rho."""
    pred, meas = np.asarray(pred, float), np.asarray(meas, float)
    ok = np.isfinite(pred) & np.isfinite(meas)
    ape = np.abs(pred[ok] - meas[ok]) / meas[ok] * 100
    constant = ok.sum() < 3 or np.ptp(pred[ok]) == 0 or np.ptp(meas[ok]) == 0
    rho = float("nan") if constant else float(spearmanr(pred[ok], meas[ok]).statistic)
    return {"n": int(ok.sum()), "mape": float(np.mean(ape)) if len(ape) else float("nan"),
            "median_ape": float(np.median(ape)) if len(ape) else float("nan"),
            "p90_ape": float(np.percentile(ape, 90)) if len(ape) else float("nan"), "spearman": rho}


def topk_scores(groups: np.ndarray, pred: np.ndarray, meas: np.ndarray, ks: Sequence[int] = (1, 5)) -> dict[str, float]:
    """TenSet top-k score per group (best measured / best measured among the k best predicted),
    averaged over groups (1.0 is perfect)."""
    df = pd.DataFrame({"g": groups, "p": pred, "m": meas}).dropna()
    out: dict[str, list[float]] = {f"top{k}": [] for k in ks}
    for _, g in df.groupby("g", sort=False):
        best = g["m"].min()
        order = g.sort_values("p")
        for k in ks:
            out[f"top{k}"].append(best / order["m"].iloc[:k].min())
    return {k: float(np.mean(v)) if v else float("nan") for k, v in out.items()}


@dataclass(frozen=True, slots=True)
class Evaluation:
    """One split's results: a row per method, and the per-row predictions of the learned models."""

    split: str
    table: pd.DataFrame
    predictions: pd.DataFrame
    n_train: int
    n_test: int


def interval_metrics(lo: np.ndarray, hi: np.ndarray, meas: np.ndarray, coverage: float) -> dict[str, float]:
    """Coverage (%), median hi/lo ratio and the mean interval (Winkler) score of a nominal ``coverage``
    interval, in log space: log(hi/lo) plus 2/alpha times how far the measurement falls outside
    (Winkler, JASA 1972; Gneiting and Raftery, JASA 2007): lower is better. An unbounded interval (lo 0,
    hi inf: a shift training could not measure) covers, with an infinite ratio and score; rows without an
    interval (NaN) count as not covered and are left out of the ratio and score."""
    lo, hi, meas = (np.asarray(v, dtype=np.float64) for v in (lo, hi, meas))
    y = np.isfinite(meas) & (meas > 0)
    has = y & ~np.isnan(lo) & ~np.isnan(hi)
    if not has.any():
        return {"cover": float("nan"), "hilo": float("nan"), "winkler": float("nan")}
    with np.errstate(divide="ignore", invalid="ignore"):
        lg, hg, yg = np.log(lo[has]), np.log(hi[has]), np.log(meas[has])
        alpha = 1.0 - coverage
        score = (hg - lg) + 2 / alpha * (np.maximum(lg - yg, 0.0) + np.maximum(yg - hg, 0.0))
        ratio = np.where(lo[has] > 0, hi[has] / lo[has], np.inf)
    inside = (meas >= lo) & (meas <= hi)
    return {"cover": float(np.mean(inside[y]) * 100), "hilo": float(np.median(ratio)),
            "winkler": float(np.mean(score))}


def _interval_columns(intervals: Mapping[float, tuple[np.ndarray, np.ndarray]], meas: np.ndarray,
                      prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    for cov, (lo, hi) in intervals.items():
        m = interval_metrics(lo, hi, meas, cov)
        pct = round(cov * 100)
        out[f"{prefix}cover{pct}"] = m["cover"]
        if cov == 0.9:
            out[f"{prefix}hilo90"], out[f"{prefix}winkler90"] = m["hilo"], m["winkler"]
    return out


def _fit_method(method: str, rows: pd.DataFrame, y: np.ndarray, feats: pd.DataFrame, tr: np.ndarray,
                te: np.ndarray, bands: np.ndarray | None, seed: int,
                booster_params: Mapping[str, Any] | None) -> tuple[str, np.ndarray, dict[str, float]]:
    """(label, test predictions, interval columns) of one learned method fitted on the training rows."""
    pipe = _method_model(method, seed, booster_params)
    if method == "hybrid":  # the product's model, with its adaptive intervals
        model = fit_model(pipe, rows.iloc[tr], y[tr], features=feats.iloc[tr], groups=bands, random_state=seed)
    else:
        model = TrainedModel(pipeline=pipe.fit(rows.iloc[tr], y[tr], features__features=feats.iloc[tr],
                                               hybrid__groups=bands))
    X = model.features.transform(rows.iloc[te], features=feats.iloc[te])
    est = model.estimator
    pred = est.predict(X)
    if method.startswith("calibrated:"):
        return method, pred, {}
    plain = {cov: est.predict_interval(X, cov) for cov in (0.8, 0.9)}
    if method != "hybrid":
        return method, pred, _interval_columns(plain, y[te])
    out = {cov: predict_rows(model, rows.iloc[te], cov, features=feats.iloc[te], check=False)[["time_ms", "lo_ms",
                                                                                                "hi_ms"]]
           for cov in (0.8, 0.9)}
    pred = out[0.9]["time_ms"].to_numpy()  # with the donor stacks of GPUs with few runs (hybridperf.learn.donors)
    cols = _interval_columns({cov: (o["lo_ms"].to_numpy(), o["hi_ms"].to_numpy()) for cov, o in out.items()}, y[te])
    cols.update(_interval_columns({0.9: plain[0.9]}, y[te], prefix="plain_"))
    ft = model.features
    label = "hybrid (" + (",".join(sorted(set(ft.baselines_.values()))) if len(ft.baselines_) <= 8
                          else f"per kernel, else {ft.baseline_}") + ")"
    return label, pred, cols


def evaluate(sweep: pd.DataFrame, split: str, *, booster_params: Mapping[str, Any] | None = None,
             methods: Sequence[str] | None = None, seed: int = 0, strict: bool = False,
             **split_options: Any) -> Evaluation:
    """Every baseline and the hybrid on one split, side by side, from one feature computation.

    Methods: ``analytical:<model>`` (uncalibrated), ``calibrated:<model>`` (one scale per (kernel,
    gpu) fitted on the training rows; kernel-wide or global scale when the pair is unseen),
    ``boosting`` (xgboost on parameters only, no analytical features, log target), ``boosting+features``
    (xgboost on all features, no baseline), ``hybrid`` (baseline x exp(residual), baseline chosen on
    the training rows). Ranking columns (top-1/top-5 over each (kernel, gpu, sizes) group) and
    interval columns are filled where meaningful: coverage of the nominal 80/90% intervals, the
    median hi/lo ratio and the Winkler score of the 90% interval (:func:`interval_metrics`); for the
    hybrid those of its adaptive intervals, and ``plain_*`` those of a constant-width split-conformal
    interval for comparison. Runs the model cannot use (unknown kernel or GPU, parameters outside their
    descriptor) are skipped with a warning counting them, or stop the evaluation with ``strict``.
    """
    rows = drop_bad_rows(training_rows(sweep), strict=strict, what="runs").reset_index(drop=True)
    with task(f"evaluate {split}: analytical features of {len(rows)} runs"):
        feats = analytical_features(rows)
    y = rows["time_ms"].to_numpy(dtype=np.float64)
    sizes = size_columns(rows, resolve_kernels(rows["kernel"].astype(str).unique())) if split == "S2" else None
    tr, te = split_indices(rows, split, seed=seed, sizes=sizes, **split_options)
    feasible = feats["feasible"].to_numpy() > 0
    tr, te = tr[feasible[tr]], te[feasible[te]]
    groups = row_keys(rows.iloc[te], ["kernel", "gpu", *param_columns(rows, "size.")])
    methods = list(methods or [*(f"analytical:{m}" for m in TIME_MODELS), *(f"calibrated:{m}" for m in TIME_MODELS),
                               "boosting", "boosting+features", "hybrid"])
    bands = size_bands(rows.iloc[tr])
    records, preds = [], pd.DataFrame(index=rows.index[te])
    preds["measured_ms"] = y[te]
    for method in track(methods, f"evaluate {split}: methods"):
        t0 = time.perf_counter()
        kind, _, model = method.partition(":")
        cols: dict[str, float] = {}
        if kind == "analytical":
            pred = np.exp(feats[baseline_column(model)].to_numpy()[te])
            if model == "scaled-counts":  # seed 004's Eq. 4 is meaningless without its adjusting weight
                pred = pred * np.nan
        else:
            method, pred, cols = _fit_method(method, rows, y, feats, tr, te, bands, seed, booster_params)
        records.append({"method": method, **ape_metrics(pred, y[te]), **topk_scores(groups, pred, y[te]), **cols,
                        "seconds": time.perf_counter() - t0})
        preds[method] = pred
    return Evaluation(split=split, table=pd.DataFrame(records), predictions=preds, n_train=len(tr), n_test=len(te))


def _method_model(method: str, seed: int, booster_params: Mapping[str, Any] | None) -> Any:
    """The pipeline of one learned method (see :func:`evaluate`)."""
    kind, _, model = method.partition(":")
    if kind == "calibrated":
        baseline_column(model)
        return make_model(baseline=model, mode="calibrated", calibration="scale", coverage=None, random_state=seed)
    if method not in ("hybrid", "boosting", "boosting+features"):
        raise HybridperfError(f"unknown method {method!r}; use analytical:<model>, calibrated:<model>, boosting, "
                              "boosting+features or hybrid")
    reg = default_booster(seed)
    if booster_params:
        reg.set_params(**booster_params)
    if method == "hybrid":
        return make_model(regressor=reg, random_state=seed)
    return make_model(baseline="none", regressor=reg, random_state=seed, group_ids=False,
                      columns="params" if method == "boosting" else "all")
