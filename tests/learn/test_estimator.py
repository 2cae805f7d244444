"""HybridRegressor: the scikit-learn contract, modes, intervals and the out-of-domain flag."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks
from xgboost import XGBRegressor

from hybridperf.learn.estimator import HybridRegressor


@parametrize_with_checks([HybridRegressor(regressor=XGBRegressor(n_estimators=30, n_jobs=1))])
def test_sklearn_contract(estimator, check) -> None:
    check(estimator)


def test_plain_default_fits_and_predicts_positive() -> None:
    rng = np.random.default_rng(0)
    X = rng.random((200, 3))
    y = np.exp(X @ [1.0, 2.0, -1.0])
    est = HybridRegressor().fit(X, y)
    assert (est.predict(X) > 0).all()


def _synthetic(n=400, seed=0):
    # time = 3 * size^1.5 * config effect; baseline knows the size scaling but not the config effect.
    rng = np.random.default_rng(seed)
    size = np.exp(rng.uniform(np.log(1e3), np.log(1e6), n))
    cfg = rng.integers(1, 5, n).astype(float)
    y = 3.0 * size**1.5 * (1 + 0.3 * (cfg - 2.5) ** 2) * np.exp(rng.normal(0, 0.02, n))
    X = np.column_stack([1.5 * np.log(size), cfg, np.log(size)])
    return X, y, size


def test_hybrid_extrapolates_where_boosting_cannot() -> None:
    X, y, size = _synthetic()
    train, test = size < 1e5, size >= 2e5
    hyb = HybridRegressor(baseline_column=0, coverage=None).fit(X[train], y[train])
    boost = HybridRegressor(mode="boosting", coverage=None).fit(X[train], y[train])
    ape = lambda est: np.median(np.abs(est.predict(X[test]) / y[test] - 1))  # noqa: E731
    assert ape(hyb) < 0.1 < ape(boost)


def test_ablation_modes() -> None:
    X, y, _ = _synthetic()
    ana = HybridRegressor(baseline_column=0, mode="analytical", coverage=None).fit(X, y)
    np.testing.assert_allclose(ana.predict(X), np.exp(X[:, 0]))
    cal = HybridRegressor(baseline_column=0, mode="calibrated", coverage=None).fit(X, y)
    np.testing.assert_allclose(cal.predict(X), np.exp(X[:, 0] + np.mean(np.log(y) - X[:, 0])))
    with pytest.raises(ValueError, match="needs baseline_column"):
        HybridRegressor(mode="analytical").fit(X, y)
    with pytest.raises(ValueError, match="mode must be"):
        HybridRegressor(mode="magic").fit(X, y)
    with pytest.raises(ValueError, match="positive times"):
        HybridRegressor().fit(X, -y)


def test_conformal_interval_covers_about_nominal() -> None:
    X, y, _ = _synthetic(n=1200, seed=1)
    est = HybridRegressor(baseline_column=0, coverage=0.9).fit(X[:800], y[:800])
    lo, hi = est.predict_interval(X[800:])
    cover = np.mean((y[800:] >= lo) & (y[800:] <= hi))
    assert 0.8 <= cover <= 0.99
    assert (lo <= est.predict(X[800:])).all() and (est.predict(X[800:]) <= hi).all()
    assert est.interval_half_width(0.8) <= est.interval_half_width(0.9)


def test_out_of_domain_flags_range_and_unseen_categories() -> None:
    X, y, _ = _synthetic()
    est = HybridRegressor(baseline_column=0, coverage=None, categorical_columns=[1]).fit(X, y)
    probe = np.array([X[0], X[0], X[0]])
    probe[1, 2] = X[:, 2].max() + 5  # beyond the range of column 2
    probe[2, 1] = 7.0  # a config value never seen
    flag, cols = est.out_of_domain(probe)
    assert list(flag) == [False, True, True]
    assert 2 in cols[1] and 1 in cols[2]
