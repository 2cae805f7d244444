"""A bagged ensemble of small boosted trees over a pool of rows whose features are computed once."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from hybridperf.arrays import FloatArray
from hybridperf.learn.features import analytical_features
from hybridperf.learn.model import TrainedModel
from hybridperf.learn.predict import stacked_times
from hybridperf.sweep import param_columns

__all__ = ["LOOP_BOOSTER", "LOOP_ROUNDS", "SIGMA_DEFAULT", "Bag", "FeaturePool", "fit_bag", "log_predict",
           "param_grid_coordinates"]

# The loop's members: refitted every batch on tens of rows, so small and cheap (xgboost's native API,
# exact splits: on so few rows the histogram sketch costs more than it saves).
LOOP_BOOSTER: dict[str, Any] = {"max_depth": 4, "eta": 0.3, "subsample": 1.0, "colsample_bytree": 0.8,
                                "min_child_weight": 1.0, "lambda": 1.0, "tree_method": "exact", "nthread": 1}
LOOP_ROUNDS = 40
SIGMA_DEFAULT = 0.3  # log-space spread assumed when there is nothing to estimate it from


@dataclass(frozen=True, slots=True)
class FeaturePool:
    """Rows (sweep format) and their features (``analytical_features``), computed once, reused by every refit.

    ``X`` is the design matrix (float32, every feature column but ``feasible``; NaN where the
    analytical models give none), ``varying`` the loop's design matrix (the columns of ``X`` that
    vary over the pool: GPU fields and sizes are constant within one tuning problem), ``feasible``
    the descriptor's verdict per row, ``coords`` the
    rows' :func:`param_grid_coordinates` (for space-filling). ``matrices`` caches a
    :class:`TrainedModel`'s design matrix per (baseline choice, columns).
    """

    rows: pd.DataFrame
    feats: pd.DataFrame
    X: npt.NDArray[np.float32] = field(repr=False)
    columns: tuple[str, ...]
    feasible: npt.NDArray[np.bool_] = field(repr=False)
    coords: npt.NDArray[np.float64] = field(repr=False)
    varying: npt.NDArray[np.float32] = field(repr=False)
    matrices: dict[Any, npt.NDArray[np.float64]] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, rows: pd.DataFrame, feats: pd.DataFrame | None = None) -> FeaturePool:
        """The pool of ``rows`` (features computed here unless given, aligned with ``rows``)."""
        rows = rows.reset_index(drop=True)
        feats = (analytical_features(rows) if feats is None else feats).reset_index(drop=True)
        columns = tuple(c for c in feats.columns if c != "feasible")
        X = feats[list(columns)].to_numpy(dtype=np.float32, na_value=np.nan)
        feasible = feats["feasible"].to_numpy() > 0
        F, nan = X[feasible], np.isnan(X[feasible])
        spread = np.where(nan, -np.inf, F).max(axis=0, initial=-np.inf) > \
            np.where(nan, np.inf, F).min(axis=0, initial=np.inf)
        return cls(rows=rows, feats=feats, X=X, columns=columns, feasible=feasible,
                   coords=param_grid_coordinates(rows), varying=np.ascontiguousarray(X[:, spread]))

    def design(self, feats: pd.DataFrame) -> npt.NDArray[np.float32]:
        """Other rows' features as this pool's design matrix (columns it lacks are NaN)."""
        return feats.reindex(columns=list(self.columns)).to_numpy(dtype=np.float32, na_value=np.nan)

    def matrix(self, model: TrainedModel) -> npt.NDArray[np.float64]:
        """A model's design matrix for every pool row (predict_rows' steps, features not rebuilt)."""
        ft = model.features
        key = (ft.baseline_, tuple(sorted(ft.baselines_.items())), tuple(ft.columns_))
        if key not in self.matrices:
            if len(self.matrices) > 4:  # bounded: a few baseline choices at most
                self.matrices.clear()
            self.matrices[key] = ft.transform(self.rows, features=self.feats).to_numpy(dtype=np.float64)
        return self.matrices[key]


def param_grid_coordinates(rows: pd.DataFrame) -> npt.NDArray[np.float64]:
    """Each config parameter as its value's rank among the parameter's values, scaled to [0, 1]
    (parameters are mostly powers of two or flags: the rank is their natural spacing)."""
    cols = param_columns(rows, "config.")
    out = np.zeros((len(rows), len(cols)))
    for j, c in enumerate(cols):
        v = pd.to_numeric(rows[c], errors="coerce").to_numpy(dtype=np.float64)
        _, inv = np.unique(np.nan_to_num(v, nan=-np.inf), return_inverse=True)
        out[:, j] = inv / max(inv.max(initial=0), 1)
    return out


def log_predict(model: TrainedModel, pool: FeaturePool, idx: npt.ArrayLike) -> FloatArray:
    """log of predict_rows' ``time_ms`` for pool rows ``idx``."""
    idx = np.asarray(idx, dtype=np.int64)
    X = pd.DataFrame(pool.matrix(model)[idx], columns=list(model.feature_columns))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(stacked_times(model, pool.rows.iloc[idx], model.estimator.predict(X)))


@dataclass(frozen=True, slots=True)
class Bag:
    """Bootstrap members (xgboost boosters) of log time around an offset, and their out-of-bag spread.

    Each member is one plausible response surface: Thompson sampling draws a member, the stop
    rule draws surfaces from them. ``sigma_oob`` is the robust spread (median |residual| / 0.6745)
    of out-of-bag predictions: how far a member misses a configuration it did not see.
    """

    boosters: tuple[Any, ...]
    sigma_oob: float
    constant: float | None = None  # fewer than 3 rows: every member predicts the offset + this

    def predict(self, X: npt.NDArray[np.float32], offset: FloatArray) -> FloatArray:
        """Member predictions of log time, shape (members, rows)."""
        if self.constant is not None:
            return np.broadcast_to(offset + self.constant, (max(len(self.boosters), 1), len(offset))).copy()
        return np.stack([offset + b.inplace_predict(X) for b in self.boosters])


def fit_bag(X: npt.NDArray[np.float32], y: FloatArray, offset: FloatArray, *, members: int, seed: int,
            params: Mapping[str, Any] | None = None, rounds: int | None = None) -> Bag:
    """Fit ``members`` boosters of ``y - offset`` (log time minus the prior's) on bootstrap samples of the rows
    (``rounds`` boosting rounds each, default :data:`LOOP_ROUNDS`; ``params`` override :data:`LOOP_BOOSTER`)."""
    import xgboost as xgb

    n = len(y)
    r = np.asarray(y, dtype=np.float64) - offset
    if n < 3:
        return Bag(boosters=(None,) * members, sigma_oob=SIGMA_DEFAULT, constant=float(np.mean(r)) if n else 0.0)
    rng = np.random.default_rng(seed)
    cfg = {**LOOP_BOOSTER, **dict(params or {})}
    oob_sum, oob_n = np.zeros(n), np.zeros(n)
    boosters = []
    for i in range(members):
        take = rng.integers(0, n, n)
        d = xgb.DMatrix(X[take], label=r[take], nthread=1)
        b = xgb.train({**cfg, "seed": seed + i, "base_score": float(np.mean(r[take]))}, d, rounds or LOOP_ROUNDS)
        boosters.append(b)
        oob = np.setdiff1d(np.arange(n), take)
        if oob.size:
            oob_sum[oob] += b.inplace_predict(X[oob])
            oob_n[oob] += 1
    seen = oob_n > 0
    resid = oob_sum[seen] / np.maximum(oob_n[seen], 1) - r[seen]
    sigma = float(np.median(np.abs(resid)) / 0.6745) if seen.sum() >= 5 else SIGMA_DEFAULT
    return Bag(boosters=tuple(boosters), sigma_oob=max(sigma, 1e-3))
