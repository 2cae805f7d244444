"""Splits S1-S5, accuracy/ranking metrics, and the baselines side by side (EVALUATION.md)."""
from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from hybridperf.errors import HybridperfError
from hybridperf.learn.baseline import (
    BASELINE_COLUMN,
    GROUP_COLUMNS,
    add_baseline,
    add_group_ids,
    choose_baselines,
    size_groups,
)
from hybridperf.learn.estimator import default_booster
from hybridperf.learn.features import BASELINES, size_metric, sweep_features
from hybridperf.learn.model import hybrid_estimator, training_rows

__all__ = ["SPLITS", "Evaluation", "ape_metrics", "evaluate", "size_metric", "split_indices", "topk_scores"]

SPLITS = ("S1", "S2", "S3", "S4", "S5")


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


def split_indices(sweep: pd.DataFrame, split: str, *, test_fraction: float = 0.2, train_max_size: float | None = None,
                  size_fraction: float = 0.25, holdout: str | None = None, calibration_runs: int = 0,
                  budget_fraction: float = 0.01, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Row positions (train, test) of a split, over the given (ok) rows.

    S1 random configurations (``test_fraction``); S2 train on sizes <= ``train_max_size`` or, per
    kernel, <= ``size_fraction`` x its largest size, test on the rest; S3 leave kernel ``holdout``
    out; S4 leave GPU ``holdout`` out, moving ``calibration_runs`` random rows of it into training;
    S5 train on a random ``budget_fraction`` of rows, test on the rest.
    """
    n = len(sweep)
    rng = np.random.default_rng(seed)
    pos = np.arange(n)
    if split == "S1":
        test = rng.random(n) < test_fraction
    elif split == "S2":
        size = size_metric(sweep)
        if train_max_size is not None:
            test = size > train_max_size
        else:
            kmax = pd.Series(size).groupby(sweep["kernel"].to_numpy()).transform("max").to_numpy()
            test = size > kmax * size_fraction
    elif split in ("S3", "S4"):
        col = "kernel" if split == "S3" else "gpu"
        if holdout is None or holdout not in set(sweep[col]):
            raise HybridperfError(f"{split} needs --holdout naming a {col} in the data; have: {', '.join(sorted(set(sweep[col])))}")
        test = (sweep[col] == holdout).to_numpy().copy()  # pandas may hand out a read-only view
        if split == "S4" and calibration_runs:
            cal = rng.choice(pos[test], size=min(calibration_runs, int(test.sum()) - 1), replace=False)
            test[cal] = False
    elif split == "S5":
        k = max(2, int(round(budget_fraction * n)))
        train = rng.choice(n, size=k, replace=False)
        test = np.ones(n, dtype=bool)
        test[train] = False
    else:
        raise HybridperfError(f"unknown split {split!r}; choose from {', '.join(SPLITS)}")
    if test.all() or not test.any():
        raise HybridperfError(f"split {split} leaves {'no training' if test.all() else 'no test'} rows; adjust its options")
    return pos[~test], pos[test]


@dataclass(frozen=True, slots=True)
class Evaluation:
    """One split's results: a row per method, and the per-row predictions of the learned models."""

    split: str
    table: pd.DataFrame
    predictions: pd.DataFrame
    n_train: int
    n_test: int


def _group_keys(sweep: pd.DataFrame, cols: Sequence[str]) -> np.ndarray:
    return sweep[list(cols)].astype(str).agg("|".join, axis=1).to_numpy()


def evaluate(sweep: pd.DataFrame, split: str, *, booster_params: Mapping[str, Any] | None = None,
             methods: Sequence[str] | None = None, seed: int = 0, **split_options: Any) -> Evaluation:
    """Every baseline and the hybrid on one split, side by side, from one feature computation.

    Methods: ``analytical:<model>`` (uncalibrated), ``calibrated:<model>`` (one scale per (kernel,
    gpu) fitted on the training rows; kernel-wide or global scale when the pair is unseen),
    ``boosting`` (xgboost on parameters only, no analytical features, log target), ``boosting+features``
    (xgboost on all features, no baseline), ``hybrid`` (baseline x exp(residual), baseline chosen on
    the training rows). Ranking columns (top-1/top-5 over each (kernel, gpu, sizes) group) and
    interval coverage (80/90%) are filled where meaningful.
    """
    rows = training_rows(sweep).reset_index(drop=True)
    feats = sweep_features(rows)
    y = rows["time_ms"].to_numpy(dtype=np.float64)
    tr, te = split_indices(rows, split, seed=seed, **split_options)
    feasible = feats["feasible"].to_numpy() > 0
    tr, te = tr[feasible[tr]], te[feasible[te]]
    size_cols = [c for c in rows.columns if c.startswith("size.")]
    groups = _group_keys(rows.iloc[te], ["kernel", "gpu", *size_cols])
    pair = _group_keys(rows, ["kernel", "gpu"])
    methods = list(methods or [*(f"analytical:{m}" for m in BASELINES), *(f"calibrated:{m}" for m in BASELINES),
                               "boosting", "boosting+features", "hybrid"])
    param_cols = [c for c in feats.columns if c.startswith(("size.", "config.", "log2_size.", "gpu_"))]
    all_cols = [c for c in feats.columns if c != "feasible"]
    records, preds = [], pd.DataFrame(index=rows.index[te])
    preds["measured_ms"] = y[te]
    for method in methods:
        t0 = time.perf_counter()
        lo = hi = None
        if method.startswith(("analytical:", "calibrated:")):
            kind, model = method.split(":")
            logb = feats[BASELINES[model]].to_numpy()
            if kind == "analytical":
                pred = np.exp(logb[te])
                if model == "scaled-counts":  # seed 004's Eq. 4 is meaningless without its adjusting weight
                    pred = pred * np.nan
            else:
                pred = np.exp(logb[te] + _scales(np.log(y[tr]) - logb[tr], pair[tr], pair[te],
                                                 rows["kernel"].to_numpy()[tr], rows["kernel"].to_numpy()[te]))
        else:
            reg = default_booster(seed)
            if booster_params:
                reg.set_params(**booster_params)
            X = feats
            if method == "hybrid":
                kern = rows["kernel"].astype(str).to_numpy()
                sizes = size_metric(rows) if size_cols else None
                mapping, fallback = choose_baselines(feats.iloc[tr], y[tr], kern[tr], rows["gpu"].to_numpy()[tr],
                                                     None if sizes is None else sizes[tr])
                X = add_group_ids(add_baseline(feats, kern, mapping, fallback), rows)
                base = ",".join(sorted(set(mapping.values()))) if len(mapping) <= 8 else f"per kernel, else {fallback}"
                est = hybrid_estimator(all_cols, regressor=reg, random_state=seed)
                cols = [*all_cols, BASELINE_COLUMN, *GROUP_COLUMNS]
            elif method in ("boosting", "boosting+features"):
                est = hybrid_estimator(all_cols, baseline=False, regressor=reg, random_state=seed)
                cols = param_cols if method == "boosting" else all_cols
            else:
                raise HybridperfError(f"unknown method {method!r}")
            X = X[cols].astype(np.float64)
            bands = size_groups(size_metric(rows)[tr]) if size_cols else None
            est.fit(X.iloc[tr], y[tr], groups=bands)
            pred = est.predict(X.iloc[te])
            lo90, hi90 = est.predict_interval(X.iloc[te], 0.9)
            lo80, hi80 = est.predict_interval(X.iloc[te], 0.8)
            lo, hi = (lo80, lo90), (hi80, hi90)
            if method == "hybrid":
                method = f"hybrid ({base})"
        rec: dict[str, Any] = {"method": method, **ape_metrics(pred, y[te]), **topk_scores(groups, pred, y[te]),
                               "seconds": time.perf_counter() - t0}
        if lo is not None:
            rec["cover80"] = float(np.mean((y[te] >= lo[0]) & (y[te] <= hi[0])) * 100)
            rec["cover90"] = float(np.mean((y[te] >= lo[1]) & (y[te] <= hi[1])) * 100)
        records.append(rec)
        preds[method] = pred
    return Evaluation(split=split, table=pd.DataFrame(records), predictions=preds, n_train=len(tr), n_test=len(te))


def _scales(resid_tr: np.ndarray, pair_tr: np.ndarray, pair_te: np.ndarray, kern_tr: np.ndarray,
            kern_te: np.ndarray) -> np.ndarray:
    """Log-space calibration offsets for test rows: the (kernel, gpu) mean residual, else the kernel's,
    else the global one."""
    by_pair = pd.Series(resid_tr).groupby(pair_tr).mean()
    by_kernel = pd.Series(resid_tr).groupby(kern_tr).mean()
    glob = float(np.mean(resid_tr))
    out = pd.Series(pair_te).map(by_pair)
    out = out.fillna(pd.Series(kern_te).map(by_kernel)).fillna(glob)
    return out.to_numpy(dtype=np.float64)
