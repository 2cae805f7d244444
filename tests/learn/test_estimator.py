"""HybridRegressor: the scikit-learn contract, modes, intervals, and a save/load round trip of its state."""
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


@pytest.mark.parametrize("seed", range(12))
def test_state_round_trip_keeps_every_parameter_and_prediction(seed: int) -> None:
    """Random estimators (mode, calibration, groups, coverage, shrinking, booster) survive to_dict/from_dict."""
    import json

    rng = np.random.default_rng(seed)
    X, y, size = _synthetic(n=300, seed=seed)
    groups_col = rng.integers(0, 3, len(y)).astype(float)
    X = np.column_stack([X, groups_col, np.floor(groups_col / 2)])
    mode = ["hybrid", "analytical", "calibrated", "boosting"][seed % 4]
    est = HybridRegressor(
        regressor=XGBRegressor(n_estimators=int(rng.integers(5, 30)), max_depth=int(rng.integers(2, 6)), n_jobs=1),
        baseline_column=0, mode=mode, coverage=[None, 0.8, 0.9][seed % 3], n_splits=int(rng.integers(2, 6)),
        random_state=int(rng.integers(0, 100)), group_columns=[3, 4] if seed % 2 else None,
        shrink_residual=bool(seed % 3 == 0), calibration=["scale", "affine"][seed % 2],
        extrapolation_columns=[2] if seed % 2 else None)
    est.fit(X, y, groups=np.digitize(np.log(size), [8, 10, 12]) if seed % 2 else None)
    doc = json.loads(json.dumps(est.to_dict(), allow_nan=False))  # through real JSON text
    back = HybridRegressor.from_dict(doc)
    want, got = est.get_params(deep=False), back.get_params(deep=False)
    for key in want:
        if key == "regressor":
            assert got[key].get_params() == want[key].get_params()
        else:
            assert got[key] == want[key], key
    np.testing.assert_array_equal(back.predict(X), est.predict(X))
    for cov in (0.5, 0.9):
        for a, b in zip(back.predict_interval(X, cov), est.predict_interval(X, cov)):
            np.testing.assert_array_equal(a, b)


def test_state_of_an_unfitted_or_foreign_regressor_is_refused() -> None:
    from sklearn.exceptions import NotFittedError
    from sklearn.linear_model import LinearRegression

    from hybridperf.learn.persist import ModelFileError

    with pytest.raises(NotFittedError):
        HybridRegressor().to_dict()
    X, y, _ = _synthetic(n=100)
    with pytest.raises(ModelFileError, match="XGBRegressor"):
        HybridRegressor(regressor=LinearRegression(), baseline_column=0).fit(X, y).to_dict()
    with pytest.raises(ModelFileError, match="unknown parameter"):
        HybridRegressor.from_dict({"params": {"nope": 1}})
