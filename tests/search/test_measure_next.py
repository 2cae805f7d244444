"""Measure-next loop: selection math, stop rule, suggest/update, and replay against random sampling."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hybridperf.errors import HybridperfError
from hybridperf.learn.model import predict_rows
from hybridperf.search.acquisition import expected_improvement, select_batch, should_stop
from hybridperf.search.ensemble import FeaturePool, log_predict
from hybridperf.search.measure_next import replay, replay_pool, suggest_next, update
from hybridperf.search.rank import rank_configs

from .conftest import DESCRIPTOR, GPU, SIZES, SMALL


def test_expected_improvement_matches_monte_carlo() -> None:
    rng = np.random.default_rng(1)
    mu, s, best = np.log([1.0, 1.2, 0.9]), np.array([0.1, 0.3, 0.05]), 1.0
    p, ei = expected_improvement(mu, s, best)
    draws = np.exp(mu + s * rng.standard_normal((400_000, 3)))
    np.testing.assert_allclose(p, (draws < best).mean(axis=0), atol=3e-3)
    np.testing.assert_allclose(ei, np.maximum(best - draws, 0).mean(axis=0), rtol=0.02, atol=1e-4)
    p_inf, ei_inf = expected_improvement(mu, s, float("inf"))
    assert (p_inf == 1).all() and np.isinf(ei_inf).all()


def test_select_batch_exploits_then_explores() -> None:
    mu = np.log([1.0, 1.1, 1.2, 1.3, 5.0, np.nan, 1.25])
    sigma = np.array([0.01, 0.01, 0.01, 0.01, 2.0, 0.01, 0.01])
    pos, why = select_batch(mu, sigma, best_ms=1.05, batch=3, explore=1 / 3, seed=0)
    assert pos[:2].tolist() == [0, 1] and why[0].startswith("exploit")
    assert pos[2] == 4 and why[2].startswith("explore")  # wide interval reaching below the best
    pos, _ = select_batch(mu, sigma, 1.05, batch=10, explore=0.5)
    assert 5 not in pos and len(set(pos)) == len(pos) == 6  # NaN (infeasible) never picked
    with pytest.raises(HybridperfError, match="explore"):
        select_batch(mu, sigma, 1.0, explore=2.0)


def test_ties_are_broken_by_seed_not_by_index() -> None:
    mu = np.zeros(100)
    picks = {tuple(select_batch(mu, 0.1, 2.0, batch=4, explore=0, seed=s)[0]) for s in range(5)}
    assert len(picks) > 1


def test_stop_rule() -> None:
    assert should_stop(np.log([2.0, 3.0]), 0.01, best_ms=1.0).stop
    go = should_stop(np.log([0.9, 3.0]), 0.1, best_ms=1.0)
    assert not go.stop and go.expected_gain > 0.05 and go.p_improve > 0.8
    assert should_stop(np.log([0.5]), 0.1, 1.0, n_measured=10, budget=10).reason.startswith("budget")
    assert should_stop(np.array([np.nan]), 0.1, 1.0).stop


def _measured(sweep: pd.DataFrame, n: int, seed: int = 1) -> pd.DataFrame:
    return sweep[sweep["status"] == "ok"].sample(n, random_state=seed)


def test_suggest_with_a_model_skips_measured_rows(model, small_sweep) -> None:
    res = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, pareto=False, top=200)
    cands = res.rows()
    measured = small_sweep.merge(cands.iloc[:5], on=list(cands.columns))
    sug = suggest_next(model, cands, measured, batch=6, explore=0.5, seed=0)
    assert len(sug.table) == 6 and sug.n_measured == 5 and sug.n_candidates == 200
    assert sug.best_measured_ms == pytest.approx(measured["time_ms"].min())
    keys = list(cands.columns)
    assert sug.table[keys].merge(measured[keys]).empty
    assert {"time_ms", "lo_ms", "hi_ms", "p_improve", "expected_gain_ms", "why"} <= set(sug.table.columns)
    assert sug.table["why"].str.startswith("exploit").sum() == 3
    assert isinstance(sug.stop.stop, bool)
    # A RankResult is accepted as the candidate list.
    assert len(suggest_next(model, res, None, batch=2).table) == 2


def test_suggest_from_a_training_sweep_gives_each_candidate_its_own_spread(small_sweep) -> None:
    train = _measured(small_sweep, 60, seed=3)
    cands = small_sweep[small_sweep["status"] == "ok"].drop(columns=["time_ms", "status", "reason"]).head(400)
    sug = suggest_next(train, cands, None, batch=4, explore=0.5, members=3, seed=0)
    width = np.log(sug.table["hi_ms"] / sug.table["lo_ms"])
    assert len(sug.table) == 4 and np.isfinite(width).all() and width.nunique() > 1


def test_update_retrains_with_the_new_rows(model, small_sweep) -> None:
    train = _measured(small_sweep, 80, seed=4)
    new = _measured(small_sweep, 20, seed=5)
    m = update(train, new, booster_params={"n_estimators": 20, "n_jobs": 1}, coverage=None)
    assert m.metadata["n_rows"] == 100
    with pytest.raises(HybridperfError, match="needs candidates"):
        update(model, new)
    slow = new.assign(time_ms=new["time_ms"] * 3)  # the GPU turned out 3x slower than the model says
    cands = small_sweep[small_sweep["status"] == "ok"].drop(columns=["time_ms", "status", "reason"])
    m2 = update(model, slow, candidates=cands, pseudo_rows=300, booster_params={"n_estimators": 40, "n_jobs": 1},
                coverage=None)
    before = predict_rows(model, slow)["time_ms"].to_numpy()
    after = predict_rows(m2, slow)["time_ms"].to_numpy()
    assert np.median(np.abs(np.log(after / slow["time_ms"]))) < np.median(np.abs(np.log(before / slow["time_ms"])))


def test_fast_path_predictions_equal_predict_rows(model, small_sweep) -> None:
    rows = small_sweep[small_sweep["status"] == "ok"].head(50)
    pool = FeaturePool.of(rows)
    np.testing.assert_allclose(np.exp(log_predict(model, pool, np.arange(50))),
                               predict_rows(model, rows)["time_ms"].to_numpy(), rtol=1e-9)


@pytest.fixture(scope="module")
def subspace(small_sweep) -> pd.DataFrame:
    keep = small_sweep["config.PAD"].eq(0) & small_sweep["config.V"].eq(1)
    return small_sweep.loc[keep].reset_index(drop=True)  # 768 configurations


def test_replay_trajectory_is_consistent(subspace) -> None:
    kw = {"kernel": str(DESCRIPTOR), "gpu": GPU, "sizes": SIZES, "initial": 12, "batch": 6, "budget": 24, "seed": 2}
    model_run = replay(subspace, members=2, **kw)
    random_run = replay(subspace, strategy="random", **kw)
    for run in (model_run, random_run):
        s = run.steps
        assert len(s) == 24 and s["index"].is_unique
        assert s["best_ms"].is_monotonic_decreasing and (s["fraction_of_optimum"] <= 1 + 1e-12).all()
        assert run.optimum_ms == pytest.approx(subspace["time_ms"].min())
    # Same initial sample for both strategies (fair comparison).
    assert model_run.steps["index"].iloc[:12].tolist() == random_run.steps["index"].iloc[:12].tolist()
    assert model_run.steps["expected_gain"].iloc[12:].notna().all()
    with pytest.raises(HybridperfError, match="strategy"):
        replay(subspace, strategy="greedy", **kw)
    with pytest.raises(HybridperfError, match="no rows"):
        replay(subspace, kernel="nope", gpu=GPU)


@pytest.mark.slow
def test_the_loop_beats_random_sampling(subspace) -> None:
    pool = replay_pool(subspace, str(DESCRIPTOR), GPU, SIZES)
    found, rand = [], []
    for seed in range(3):
        kw = {"kernel": str(DESCRIPTOR), "gpu": GPU, "sizes": SIZES, "initial": 12, "batch": 8, "budget": 36,
              "seed": seed}
        found.append(replay(subspace, members=2, pool=pool, **kw).steps["fraction_of_optimum"].iloc[-1])
        rand.append(replay(subspace, strategy="random", **kw).steps["fraction_of_optimum"].iloc[-1])
    assert np.median(found) >= np.median(rand) and np.median(found) > 0.95


def test_measured_files_may_omit_a_constant_parameter(model, small_sweep) -> None:
    ok = small_sweep[small_sweep["status"] == "ok"].sample(50, random_state=0)
    cands = ok.drop(columns=["time_ms", "status", "reason"])
    measured = ok.head(3).drop(columns=["size.N"])  # N is the same for every candidate
    sug = suggest_next(model, cands, measured, batch=2)
    assert sug.n_measured == 3 and sug.best_measured_ms == pytest.approx(measured["time_ms"].min())
    with pytest.raises(HybridperfError, match="lacks column 'config.BX'"):
        suggest_next(model, cands, measured.drop(columns=["config.BX"]), batch=2)
