"""Throughput weighting: each run weighs its problem's fastest time over its own, as a brute-force loop computes."""
from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.base import BaseEstimator, RegressorMixin
from xgboost import XGBRegressor

from hybridperf.learn.estimator import HybridRegressor


class _Recorder(RegressorMixin, BaseEstimator):
    """A regressor that predicts 0 and remembers the weights of its last fit."""

    def fit(self, X, y, sample_weight=None):
        self.weights_ = None if sample_weight is None else np.asarray(sample_weight)
        return self

    def predict(self, X):
        return np.zeros(len(X))


def _configs(seed: int = 0, n: int = 240) -> tuple[np.ndarray, np.ndarray]:
    """Columns: log baseline, a config parameter, (kernel, GPU) id, kernel id, log2 size; runs of 2 GPUs x 3 sizes."""
    rng = np.random.default_rng(seed)
    gpu = rng.integers(0, 2, n).astype(float)
    size = rng.choice([10.0, 11.0, 12.0], n)
    cfg = rng.integers(1, 9, n).astype(float)
    base = size * 0.7 + 0.1 * gpu
    y = np.exp(base + 0.3 * np.abs(cfg - 5) + rng.normal(0, 0.02, n))
    return np.column_stack([base, cfg, gpu, np.zeros(n), size]), y


def _est(**kw) -> HybridRegressor:
    return HybridRegressor(baseline_column=0, group_columns=[2, 3], extrapolation_columns=[4], coverage=None, **kw)


def test_weights_are_the_fastest_of_the_problem_over_the_run_as_a_loop_computes() -> None:
    X, y = _configs()
    X[::17, 4] = np.nan  # runs of unknown size are one problem per (kernel, GPU), not each its own
    est = _est(regressor=_Recorder(), weighting="throughput").fit(X, y)
    same = lambda a, b: a == b or (np.isnan(a) and np.isnan(b))  # noqa: E731
    want = np.array([min(y[j] for j in range(len(y)) if X[j, 2] == X[i, 2] and same(X[j, 4], X[i, 4])) / y[i]
                     for i in range(len(y))])
    np.testing.assert_allclose(est.regressor_.weights_, want, rtol=1e-12)
    # With sample weights they multiply; uniform weighting passes the caller's weights through untouched.
    sw = np.linspace(0.5, 2.0, len(y))
    np.testing.assert_allclose(_est(regressor=_Recorder(), weighting="throughput").fit(X, y, sample_weight=sw)
                               .regressor_.weights_, sw * want, rtol=1e-12)
    assert _est(regressor=_Recorder()).fit(X, y).regressor_.weights_ is None


def test_held_out_fits_weigh_their_own_rows_only() -> None:
    """A held-out refit equals a fresh fit on its training rows: the weights come from those rows alone (a held-out
    run that is its problem's fastest does not set the training runs' weights)."""
    X, y = _configs(n=200)
    kw = dict(regressor=XGBRegressor(n_estimators=15, max_depth=3, n_jobs=1), weighting="throughput")
    est = _est(**kw).fit(X, y)
    te = np.array([int(np.argmin(np.where((X[:, 2] == g) & (X[:, 4] == 11.0), y, np.inf))) for g in (0.0, 1.0)])
    tr = np.setdiff1d(np.arange(len(y)), te)
    held = est.held_out_log_predict(X, y, [(tr, te)])[te]
    np.testing.assert_allclose(held, np.log(_est(**kw).fit(X[tr], y[tr]).predict(X[te])), rtol=1e-12)
    with pytest.raises(ValueError, match="positive time"):
        est.held_out_log_predict(X, np.where(np.arange(len(y)) == 3, 0.0, y), [(tr, te)])


def test_a_sweep_of_sizes_alone_fits_exactly_as_uniform() -> None:
    """One run per problem (no configurations to rank): every weight is 1, so nothing changes."""
    X, y = _configs()
    _, first = np.unique(X[:, [2, 4]], axis=0, return_index=True)
    X, y = X[first], y[first]
    kw = dict(regressor=XGBRegressor(n_estimators=20, n_jobs=1))
    a = _est(**kw, weighting="throughput").fit(X, y)
    b = _est(**kw).fit(X, y)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))


def test_the_fastest_configurations_are_fitted_better() -> None:
    """The point of the weights: a residual model that cannot represent the curve (a line through a V of
    log time over the config value) spreads its error evenly when uniform; weighted, its error on each
    problem's fastest configurations is smaller (0.69-0.72 of the uniform fit's over seeds 0-5)."""
    from sklearn.linear_model import LinearRegression

    X, y = _configs(seed=1, n=600)
    fast = (X[:, 1] >= 4) & (X[:, 1] <= 6)
    err = {w: np.mean(np.abs(np.log(_est(regressor=LinearRegression(), weighting=w).fit(X, y).predict(X[fast])
                                    / y[fast]))) for w in ("uniform", "throughput")}
    assert err["throughput"] < 0.8 * err["uniform"], err


def test_weighting_survives_the_state_round_trip_and_older_states_load_as_uniform() -> None:
    X, y = _configs()
    est = _est(regressor=XGBRegressor(n_estimators=10, n_jobs=1), weighting="throughput").fit(X, y)
    doc = json.loads(json.dumps(est.to_dict(), allow_nan=False))
    assert HybridRegressor.from_dict(doc).weighting == "throughput"
    del doc["params"]["weighting"]  # a state written before the parameter existed
    back = HybridRegressor.from_dict(doc)
    assert back.weighting == "uniform"
    np.testing.assert_array_equal(back.predict(X), est.predict(X))


def test_unknown_weighting_is_a_value_error() -> None:
    X, y = _configs()
    with pytest.raises(ValueError, match="weighting must be one of uniform, throughput"):
        _est(weighting="fast").fit(X, y)


def test_make_model_weights_the_hybrid_only() -> None:
    from hybridperf.learn.model import make_model

    assert make_model().named_steps["hybrid"].weighting == "throughput"
    assert make_model(weighting="uniform").named_steps["hybrid"].weighting == "uniform"
    assert make_model(mode="calibrated").named_steps["hybrid"].weighting == "uniform"
    with pytest.raises(ValueError, match="weighting must be one of"):
        make_model(weighting="fast")
