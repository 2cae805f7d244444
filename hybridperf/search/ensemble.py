"""A bagged ensemble of hybrid models over a pool of rows whose features are computed once."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from hybridperf.arrays import FloatArray
from hybridperf.learn.estimator import default_booster
from hybridperf.learn.features import analytical_features
from hybridperf.learn.model import TrainedModel, make_model

__all__ = ["LOOP_BOOSTER", "SIGMA_DEFAULT", "FeaturePool", "bag_predict", "fit_bag", "log_predict"]

# A lighter booster for the loop's bagged members: refitted every batch, on a few hundred rows.
LOOP_BOOSTER: dict[str, Any] = {"n_estimators": 100, "learning_rate": 0.1, "max_depth": 5, "n_jobs": 1}
SIGMA_DEFAULT = 0.3  # log-space spread assumed when there is nothing to estimate it from


@dataclass(frozen=True, slots=True)
class FeaturePool:
    """Rows (sweep format) and their features (``analytical_features``), computed once, reused by every refit.

    ``matrices`` caches the full design matrix per (baseline choice, feature columns): refits
    that pick the same baselines reuse it, so each refit only runs the boosters.
    """

    rows: pd.DataFrame
    feats: pd.DataFrame
    matrices: dict[Any, npt.NDArray[np.float64]] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, rows: pd.DataFrame) -> FeaturePool:
        rows = rows.reset_index(drop=True)
        return cls(rows=rows, feats=analytical_features(rows).reset_index(drop=True))

    def matrix(self, model: TrainedModel) -> npt.NDArray[np.float64]:
        """The model's design matrix for every pool row (predict_rows' steps, features not rebuilt)."""
        ft = model.features
        key = (ft.baseline_, tuple(sorted(ft.baselines_.items())), tuple(ft.columns_))
        if key not in self.matrices:
            if len(self.matrices) > 4:  # bounded: a few baseline choices at most
                self.matrices.clear()
            self.matrices[key] = ft.transform(self.rows, features=self.feats).to_numpy(dtype=np.float64)
        return self.matrices[key]


def log_predict(model: TrainedModel, pool: FeaturePool, idx: npt.ArrayLike) -> FloatArray:
    """log of predict_rows' ``time_ms`` for pool rows ``idx``."""
    X = pd.DataFrame(pool.matrix(model)[np.asarray(idx, dtype=np.int64)], columns=list(model.feature_columns))
    with np.errstate(divide="ignore"):
        return np.log(model.estimator.predict(X))


def _fit_member(pool: FeaturePool, idx: npt.NDArray[np.int64], seed: int,
                booster_params: Mapping[str, Any] | None) -> TrainedModel:
    """One hybrid model on pool rows ``idx`` (repeats allowed): the product's pipeline (per-kernel
    baseline, per-group scales, boosted residual) from the precomputed features, with a lighter
    booster and without the out-of-fold refits train_model spends on intervals and the stacking
    weight: the bag provides the spread instead."""
    rows, feats = pool.rows.iloc[idx], pool.feats.iloc[idx]
    y = rows["time_ms"].to_numpy(dtype=np.float64)
    reg = default_booster(seed, n_jobs=1)
    reg.set_params(**{**LOOP_BOOSTER, **dict(booster_params or {})})
    pipe = make_model(regressor=reg, coverage=None, random_state=seed, calibration="scale", shrink_residual=False,
                      size_aware=False)
    return TrainedModel(pipeline=pipe.fit(rows, y, features__features=feats))


def fit_bag(pool: FeaturePool, train: npt.NDArray[np.int64], members: int, seed: int,
             booster_params: Mapping[str, Any] | None) -> tuple[list[TrainedModel], float]:
    """Bootstrap members on pool rows ``train``, and the out-of-bag log error spread (a robust
    sigma: median |residual| / 0.6745)."""
    rng = np.random.default_rng(seed)
    n = len(train)
    y = np.log(pool.rows["time_ms"].to_numpy(dtype=np.float64)[train])
    oob_sum, oob_n = np.zeros(n), np.zeros(n)
    bag = []
    for i in range(members):
        take = rng.integers(0, n, n)
        m = _fit_member(pool, train[take], seed + i, booster_params)
        bag.append(m)
        oob = np.setdiff1d(np.arange(n), take)
        if oob.size:
            oob_sum[oob] += log_predict(m, pool, train[oob])
            oob_n[oob] += 1
    seen = oob_n > 0
    resid = oob_sum[seen] / np.maximum(oob_n[seen], 1) - y[seen]
    sigma = float(np.median(np.abs(resid)) / 0.6745) if seen.sum() >= 5 else SIGMA_DEFAULT
    return bag, max(sigma, 1e-3)


def bag_predict(bag: Sequence[TrainedModel], pool: FeaturePool, idx: npt.ArrayLike,
                 sigma_oob: float) -> tuple[FloatArray, FloatArray]:
    """Mean log prediction and per-candidate sigma: the OOB sigma, scaled up where the members' spread
    exceeds its median."""
    logs = np.stack([log_predict(m, pool, idx) for m in bag])
    mu = logs.mean(axis=0)
    spread = logs.std(axis=0)
    med = float(np.nanmedian(spread)) if np.isfinite(spread).any() else 0.0
    # Never more confident than the typical out-of-bag error; wider where the members disagree more.
    sigma = sigma_oob * np.maximum(spread / med, 1.0) if med > 0 else np.full_like(mu, sigma_oob)
    return mu, sigma
