"""Calibrating the product's intervals: held-out residuals for each kind of shift, a difficulty model, bins."""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupKFold

from hybridperf.learn.domain import out_of_domain, training_domain
from hybridperf.learn.folds import forward_shift
from hybridperf.learn.intervals import SHIFT_BANDS, ConformalIntervals

__all__ = ["CALIBRATION_ROWS", "DIFFICULTY_PREFIXES", "fit_difficulty", "fit_intervals"]

# Training rows used at most by each leave-GPU-out / leave-kernel-out fit (a seeded sample above it):
# calibration needs representative errors, not the last bit of accuracy, and training must stay fast.
CALIBRATION_ROWS = 40_000
# The design-matrix columns the difficulty model reads (see ConformalIntervals): parameters, GPU fields, group ids.
DIFFICULTY_PREFIXES = ("size.", "log2_size.", "config.", "gpu_", "id_")
_MIN_DIFFICULTY_ROWS = 50


def _difficulty_model(random_state: int) -> Any:
    from xgboost import XGBRegressor

    return XGBRegressor(n_estimators=150, max_depth=4, learning_rate=0.1, subsample=0.8, min_child_weight=5.0,
                        tree_method="hist", random_state=random_state, n_jobs=1)


def fit_difficulty(X: np.ndarray, residual: np.ndarray, random_state: int = 0) -> tuple[Any, np.ndarray]:
    """A model of log |residual| (the difficulty, Papadopoulos et al. 2008) and cross-fitted
    difficulties of every row of ``X`` (each half predicted by a model fitted on the other half, so a
    calibration score is never normalised by a model that saw it). (None, ones) with too few residuals."""
    ok = np.flatnonzero(np.isfinite(residual))
    if len(ok) < _MIN_DIFFICULTY_ROWS:
        return None, np.ones(X.shape[0])
    target = np.log(np.abs(residual[ok]) + 1e-3)
    half = np.random.default_rng(random_state).random(len(ok)) < 0.5
    a = _difficulty_model(random_state).fit(X[ok[half]], target[half])
    b = _difficulty_model(random_state).fit(X[ok[~half]], target[~half])
    pa, pb = a.predict(X), b.predict(X)
    cross = (pa + pb) / 2  # rows that were not held out: both halves are independent of them
    cross[ok[half]] = pb[ok[half]]
    cross[ok[~half]] = pa[ok[~half]]
    final = _difficulty_model(random_state).fit(X[ok], target)
    return final, np.exp(np.clip(cross, -20.0, 20.0))


def _group_splits(labels: np.ndarray, rng: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """Leave-group-out splits (at most 5 folds) with at most CALIBRATION_ROWS training rows each."""
    n_groups = len(np.unique(labels))
    if n_groups < 2:
        return None
    out = []
    for tr, te in GroupKFold(n_splits=min(5, n_groups)).split(np.zeros((len(labels), 1)), None, labels):
        if len(tr) > CALIBRATION_ROWS:
            tr = np.sort(rng.choice(tr, CALIBRATION_ROWS, replace=False))
        out.append((tr, te))
    return out


def _fold_reasons(rows: pd.DataFrame, regimes: np.ndarray, fold: np.ndarray) -> pd.DataFrame:
    """For each random-fold held-out row, the out-of-domain reasons with respect to its fold's training rows."""
    reasons = []
    for k in np.unique(fold[fold >= 0]):
        test, train = fold == k, fold != k
        dom = training_domain(rows.loc[train], regimes[train])
        reasons.append(out_of_domain(rows.loc[test], dom, regimes[test]))
    return pd.concat(reasons) if reasons else pd.DataFrame()


Found = dict[str, list[tuple[np.ndarray, np.ndarray]]]


def _add(found: Found, name: str, idx: np.ndarray, resid: np.ndarray) -> None:
    keep = np.isfinite(resid)
    if keep.any():
        found.setdefault(name, []).append((idx[keep], resid[keep]))


def _random_bins(found: Found, r: np.ndarray, rows: pd.DataFrame, regimes: np.ndarray, fold: np.ndarray | None) -> None:
    """Random-fold residuals: ``interp``, per kernel, and the rows that showed a config, defaulted or
    regime shift with respect to their fold's training rows."""
    ok = np.flatnonzero(np.isfinite(r))
    _add(found, "interp", ok, r[ok])
    kernels = rows["kernel"].astype(str).to_numpy()
    for kernel in np.unique(kernels[ok]):
        m = ok[kernels[ok] == kernel]
        _add(found, f"kernel:{kernel}", m, r[m])
    if fold is None:
        return
    reasons = _fold_reasons(rows, regimes, fold)
    if len(reasons):
        for name, col in (("config", "ood_config"), ("defaulted", "ood_defaulted"), ("regime", "ood_regime")):
            idx = reasons.index.to_numpy()[reasons[col].astype(bool).to_numpy()]
            _add(found, name, idx, r[idx])


def _forward_bins(found: Found, rf: np.ndarray, shift: np.ndarray, min_shift: float = 1e-9) -> None:
    """Forward (size-band) residuals, binned by how far each row extrapolated (log2 size factor)."""
    sel = np.flatnonzero(np.isfinite(rf) & (shift > min_shift))
    bands = np.searchsorted(SHIFT_BANDS, shift[sel]) + 1
    for band in np.unique(bands):
        _add(found, f"shift:{band}", sel[bands == band], rf[sel[bands == band]])


def _skip_band_splits(groups: np.ndarray, skip: int, rng: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each ordered group predicted from the groups ``skip`` or more below it: forward fits that
    extrapolate further than the adjacent-band fits the estimator makes itself."""
    g = np.asarray(groups, dtype=np.float64)
    bands = np.unique(g[np.isfinite(g)])
    out = []
    for i in range(skip, len(bands)):
        tr, te = np.flatnonzero(g <= bands[i - skip]), np.flatnonzero(g == bands[i])
        if len(tr) >= 20:
            if len(tr) > CALIBRATION_ROWS:
                tr = np.sort(rng.choice(tr, CALIBRATION_ROWS, replace=False))
            out.append((tr, te))
    return out


def _far_forward_bins(found: Found, est: Any, X: pd.DataFrame, y: np.ndarray, groups: np.ndarray | None,
                      rng: np.random.Generator) -> None:
    """Residuals of forward fits that skip a size band, for the shifts beyond one band (log2 factor > 1):
    those fits train on less data than the model does, so their errors at small shifts would
    overstate the model's; at larger shifts they are the only calibration there is."""
    mask = getattr(est, "extrapolation_mask_", None)
    if groups is None or mask is None or not mask.any():
        return
    for skip in (2,):
        splits = _skip_band_splits(groups, skip, rng)
        if splits:
            rf = np.log(np.asarray(y, dtype=np.float64)) - est.held_out_log_predict(X, y, splits)
            shift = forward_shift(X.to_numpy(dtype=np.float64), mask, splits)
            _forward_bins(found, rf, shift, min_shift=SHIFT_BANDS[0])


def fit_intervals(est: Any, X: pd.DataFrame, y: np.ndarray, rows: pd.DataFrame, regimes: np.ndarray, *,
                  groups: np.ndarray | None = None, random_state: int = 0) -> ConformalIntervals | None:
    """Normalised Mondrian conformal intervals for a fitted HybridRegressor (see ConformalIntervals).

    Residuals come from held-out fits of the estimator's own settings: its random folds (bins
    ``interp``, ``kernel:<name>``, and ``config`` / ``defaulted`` / ``regime`` for rows that showed
    that shift with respect to their fold's training rows), its forward size-band fits and, given the
    ordered size ``groups`` it was fitted with, forward fits that skip a band (``shift:<band>``),
    leave-GPU-out fits (``gpu``) and leave-kernel-out fits (``kernel``). ``X`` is the estimator's
    design matrix of the training ``rows`` (times ``y``); ``regimes`` their MWP-CWP regime codes.
    None when the estimator kept no held-out predictions (fitted with coverage=None).
    """
    held = getattr(est, "heldout_", {})
    if "random" not in held:
        return None
    rows = rows.reset_index(drop=True)
    logy = np.log(np.asarray(y, dtype=np.float64))
    rng = np.random.default_rng(random_state)
    found: Found = {}
    r = logy - held["random"]
    _random_bins(found, r, rows, np.asarray(regimes, dtype=np.float64), held.get("fold"))
    if "forward" in held and "shift" in held:
        _forward_bins(found, logy - held["forward"], held["shift"])
    _far_forward_bins(found, est, X, y, groups, rng)
    for name, col in (("gpu", "gpu"), ("kernel", "kernel")):
        splits = _group_splits(rows[col].astype(str).to_numpy(), rng)
        if splits:
            rg = logy - est.held_out_log_predict(X, y, splits)
            _add(found, name, np.arange(len(rg)), rg)
    cols = tuple(i for i, c in enumerate(X.columns) if str(c).startswith(DIFFICULTY_PREFIXES))
    difficulty, sigma = fit_difficulty(X.to_numpy(dtype=np.float64)[:, list(cols)], r, random_state)
    scores = {}
    for name, parts in found.items():
        idx = np.concatenate([p[0] for p in parts])
        res = np.concatenate([p[1] for p in parts])
        scores[name] = np.sort(np.abs(res) / sigma[idx])
    return ConformalIntervals(scores=scores, difficulty=difficulty, difficulty_columns=cols)
