"""Calibration fits: how far each row lies below its kernel's largest trained sizes, the difficulty model, and the
repeated partitions of a GPU's few runs."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hybridperf.datasets import load_dataset
from hybridperf.learn.domain import out_of_domain, training_domain
from hybridperf.learn.uncertainty import _frontier_splits, frontier_gap


def _rows() -> pd.DataFrame:
    return pd.DataFrame({"kernel": ["a"] * 4 + ["b"] * 2, "gpu": "g",
                         "size.B": [1, 1, 1, 1, 8, 2], "size.N": [512, 256, 64, 128, 100, 100]})


def test_gap_per_kernel_in_the_closest_size() -> None:
    gap = frontier_gap(_rows())
    # kernel a: B constant (does not count), N below its 512 by 0, 1, 3, 2 octaves;
    # kernel b: N constant, B 8 and 2 (0 and -2 octaves).
    np.testing.assert_allclose(gap, [0.0, -1.0, -3.0, -2.0, 0.0, -2.0])


def test_no_varying_size() -> None:
    rows = pd.DataFrame({"kernel": ["a", "a"], "gpu": "g", "size.N": [64, 64]})
    assert np.isneginf(frontier_gap(rows)).all()
    assert frontier_gap(rows.drop(columns="size.N")) is None


def test_frontier_split_rows_lie_within_one_octave_beyond_their_fit() -> None:
    rng = np.random.default_rng(0)
    n = 400
    rows = pd.DataFrame({"kernel": "k", "gpu": "g", "size.M": rng.integers(1, 1025, n),
                         "size.N": rng.integers(1, 1025, n)})
    (tr, te), = _frontier_splits(rows, np.random.default_rng(0))
    assert len(np.intersect1d(tr, te)) == 0 and len(tr) + len(te) == n
    factor = out_of_domain(rows.iloc[te], training_domain(rows.iloc[tr]))["ood_size_factor"].to_numpy()
    top = rows.iloc[tr][["size.M", "size.N"]].max().to_numpy()
    assert (top <= 512).all() and (factor > 1).all()  # every held-out row beyond the fit's sizes
    assert (factor <= 1024 / top.min() + 1e-9).all()


def test_difficulty_model_predicts_as_its_loaded_copy_does() -> None:
    """The fitted difficulty model predicts the same values with the same thread setting as the copy a model
    file loads (xgboost's nthread 0: every core), not with the single thread it was fitted with."""
    import json

    from hybridperf.learn.persist import booster_from_json, booster_to_json
    from hybridperf.learn.uncertainty import fit_difficulty

    rng = np.random.default_rng(0)
    X = rng.random((600, 3))
    residual = rng.normal(0.0, 0.1 + X[:, 0], 600)
    final, sigma = fit_difficulty(X, residual)
    loaded = booster_from_json(booster_to_json(final), 3)

    def nthread(reg) -> int:
        return int(json.loads(reg.get_booster().save_config())["learner"]["generic_param"]["nthread"])

    assert nthread(final) == nthread(loaded) == 0
    np.testing.assert_array_equal(final.predict(X), loaded.predict(X))
    assert sigma.shape == (600,) and np.all(sigma > 0)


@pytest.fixture(scope="module")
def few_runs_sweep() -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """Real NeuSight GEMM runs, 1,000 of a V100 beside 60 of a T4 (few by share: under a tenth), and the bins of
    a model of them calibrated with one partition of the T4's runs."""
    from hybridperf.datasets import load_dataset

    data = load_dataset("neusight-gemm").query("status == 'ok'")
    sweep = pd.concat([data[data.gpu == "tesla-v100-pcie-32gb"].sample(1000, random_state=0),
                       data[data.gpu == "tesla-t4"].sample(60, random_state=1)], ignore_index=True)
    with pytest.MonkeyPatch.context() as mp:
        return sweep, _scores(sweep, mp, partitions=1)


def _scores(sweep: pd.DataFrame, mp: pytest.MonkeyPatch, **settings: int) -> dict[str, np.ndarray]:
    """The model's calibration bins, with FEW_RUNS_<NAME> = value for each setting. Calibration fits sample 800 of
    the 1,060 rows (CALIBRATION_ROWS), so that they draw from the generator whose draws the repeats must leave
    alone, and the T4 stays few by share in the few-runs fits (48 of its runs beside 752 others)."""
    from hybridperf.learn import uncertainty
    from hybridperf.learn.model import train_model

    mp.setattr(uncertainty, "CALIBRATION_ROWS", 800)
    for name, value in settings.items():
        mp.setattr(uncertainty, f"FEW_RUNS_{name.upper()}", value)
    model = train_model(sweep, booster_params={"n_estimators": 30, "n_jobs": 1})
    return dict(model.intervals.scores)


def test_a_gpu_with_fewest_runs_keeps_one_score_per_run_from_several_partitions_and_nothing_else_moves(
        few_runs_sweep, monkeypatch) -> None:
    """Under FEW_RUNS_REPEAT_BELOW runs, ``few|0`` keeps as many scores as with one partition (one per run, the
    n of the conformal rank), some of them from the further partitions; every other bin (its flags' bins included)
    keeps the scores it had."""
    from hybridperf.learn.uncertainty import FEW_RUNS_PARTITIONS

    sweep, one = few_runs_sweep
    many = _scores(sweep, monkeypatch, partitions=FEW_RUNS_PARTITIONS)
    assert FEW_RUNS_PARTITIONS > 1 and set(one) == set(many)
    assert len(one["few|0"]) >= 55 and len(many["few|0"]) == len(one["few|0"])
    # About (partitions - 1) / partitions of the 60 runs' scores come from another partition's fit.
    assert len(np.setdiff1d(many["few|0"], one["few|0"])) >= 20
    for key in set(one) - {"few|0"}:
        np.testing.assert_array_equal(one[key], many[key], err_msg=key)


def test_a_gpu_with_as_many_runs_as_the_repeat_limit_is_scored_in_one_partition(few_runs_sweep, monkeypatch) -> None:
    from hybridperf.learn.uncertainty import FEW_RUNS_PARTITIONS

    sweep, one = few_runs_sweep
    many = _scores(sweep, monkeypatch, partitions=FEW_RUNS_PARTITIONS, repeat_below=60)  # the T4 has 60 runs
    assert len(one["few|0"]) >= 50 and set(one) == set(many)
    for key in one:
        np.testing.assert_array_equal(one[key], many[key], err_msg=key)


def test_the_difficulty_learns_from_the_random_folds_errors_with_the_forward_weights(monkeypatch) -> None:
    """Where the estimator keeps weights inside its trained sizes, the difficulty model's target is the random
    folds' error of the prediction with the forward weights (the one made beyond the sizes), not of the one
    inside: a kernel whose residual fits its sizes but does not extrapolate must not look easy beyond them."""
    import hybridperf.learn.uncertainty as unc
    from hybridperf.learn.model import train_model

    seen = {}
    real = unc.fit_difficulty

    def spy(X, residual, random_state=0):
        seen["residual"] = residual.copy()
        return real(X, residual, random_state)

    kept = {}
    real_fit = unc.fit_intervals

    def keep(est, X, y, rows, regimes, **kw):
        kept.update(held=dict(est.heldout_), y=np.asarray(y, dtype=np.float64))
        return real_fit(est, X, y, rows, regimes, **kw)

    monkeypatch.setattr(unc, "fit_difficulty", spy)
    monkeypatch.setattr("hybridperf.learn.model.fit_intervals", keep)
    rows = load_dataset("h100-cuda-bench").query("status == 'ok'")
    train_model(rows[rows["kernel"].isin(["bench-reduction", "seed004-vecadd"])], booster_params={"n_estimators": 60})
    held = kept["held"]
    assert "random_forward" in held
    r = seen["residual"]
    ok = np.isfinite(r)
    np.testing.assert_allclose(r[ok], (np.log(kept["y"]) - held["random_forward"])[ok])
    assert not np.allclose(r[ok], (np.log(kept["y"]) - held["random"])[ok])
