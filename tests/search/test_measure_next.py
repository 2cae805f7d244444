"""Measure-next loop end to end: suggest/update, picks files, and replay against random sampling."""
from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from hybridperf.errors import HybridperfError
from hybridperf.learn.model import predict_rows
from hybridperf.search.acquisition import normal_quantile
from hybridperf.search.ensemble import FeaturePool, log_predict
from hybridperf.search.loop import LoopOptions
from hybridperf.search.measure_next import (
    compare_strategies,
    replay,
    replay_pool,
    space_candidates,
    suggest_next,
    update,
    write_picks,
)
from hybridperf.search.prior import model_prior
from hybridperf.search.rank import rank_configs
from hybridperf.search.start import initial_design

from .conftest import DESCRIPTOR, GPU, SIZES, SMALL


def _measured(sweep: pd.DataFrame, n: int, seed: int = 1) -> pd.DataFrame:
    return sweep[sweep["status"] == "ok"].sample(n, random_state=seed)


def test_suggest_with_a_model_skips_measured_rows(model, small_sweep) -> None:
    res = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, pareto=False, top=200)
    cands = res.rows()
    measured = small_sweep.merge(cands.iloc[:5], on=list(cands.columns))
    sug = suggest_next(model, cands, measured, batch=6, start=3, explore=0.5, seed=0)
    assert len(sug.table) == 6 and sug.n_measured == 5 and sug.n_candidates == 200
    assert sug.best_measured_ms == pytest.approx(measured["time_ms"].min())
    keys = list(cands.columns)
    assert sug.table[keys].merge(measured[keys]).empty
    assert {"time_ms", "lo_ms", "hi_ms", "p_fail", "why"} <= set(sug.table.columns)
    kinds = sug.table["why"].str.split(":").str[0]
    assert (kinds.isin(["thompson", "local"])).sum() == 3 and kinds.eq("local").sum() >= 1
    assert sug.prior.startswith("model")
    assert (sug.table["lo_ms"] < sug.table["time_ms"]).all() and (sug.table["time_ms"] < sug.table["hi_ms"]).all()
    assert sug.stop is not None and 0 <= sug.stop.p_better <= 1
    # Before the start is measured: the start batch (the prior's best and space-filling picks), no stop estimate.
    first = suggest_next(model, res, None, budget=30)
    assert first.stop is None and len(first.table) == 4 and first.table["why"].str.startswith("start").all()


def test_suggest_says_when_the_budget_is_spent_and_counts_rows_it_left_out(model, small_sweep, tmp_path) -> None:
    res = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, pareto=False, top=200)
    cands = res.rows()
    measured = small_sweep.merge(cands.iloc[:5], on=list(cands.columns))
    other = measured.assign(gpu="some-other-gpu")  # runs of another GPU: not candidates of this problem
    sug = suggest_next(model, cands, pd.concat([measured, other]), budget=5, seed=0)
    assert sug.n_measured == 5 and sug.n_ignored == 5
    assert sug.table.empty and sug.stop is not None and sug.stop.stop
    assert "budget of 5 measurements is spent" in sug.stop.reason
    write_picks(sug, tmp_path / "picks.json")  # strict JSON: no chance is estimated, so none is written (not NaN)
    doc = json.loads((tmp_path / "picks.json").read_text(), parse_constant=lambda c: pytest.fail(f"wrote {c}"))
    assert doc["stop"]["stop"] is True and doc["stop"]["p_better"] is None and doc["configurations"] == []
    more = suggest_next(model, cands, measured, budget=8, seed=0)
    assert more.n_ignored == 0 and 1 <= len(more.table) <= 3  # batches sized by the budget, within what is left
    assert more.stop is None or "budget" not in more.stop.reason


def test_suggest_takes_the_models_intervals_to_choose_between_its_best_and_exploring(model, small_sweep) -> None:
    cands = small_sweep[small_sweep["status"] == "ok"].drop(columns=["time_ms", "status", "reason"]).head(300)
    pool = FeaturePool.of(cands)
    prior = model_prior(pool, model)
    pred = predict_rows(model, cands, 0.9)
    expect = np.log(pred["hi_ms"] / pred["lo_ms"]).to_numpy() / (2 * normal_quantile(0.9))
    assert np.allclose(prior.log_sigma[pool.feasible], expect[pool.feasible], rtol=1e-6)
    sug = suggest_next(model, cands, None, budget=60, seed=0)  # start of 7: 4 draws from the intervals
    assert sug.table["why"].str.contains("draw from the prior's intervals").sum() == 4
    # The draws are the predicted best where the intervals are narrow, spread where they are wide.
    rank = pd.Series(prior.log_time).rank(method="first").to_numpy()
    picks = {}
    for scale in (1e-6, 1e3):
        wide = replace(prior, log_sigma=prior.log_sigma * scale)
        pos, _ = initial_design(pool.coords, wide, np.flatnonzero(pool.feasible), 8, seed=0)
        picks[scale] = sorted(rank[pos[:4]])
    assert picks[1e-6] == [1, 2, 3, 4] and np.median(picks[1e3]) > 20


def test_suggest_with_old_sweeps_uses_a_transfer_prior(small_sweep) -> None:
    other = small_sweep.assign(gpu="titan-v", time_ms=small_sweep["time_ms"] * 2)  # the same shape, elsewhere
    cands = small_sweep[small_sweep["status"] == "ok"].drop(columns=["time_ms", "status", "reason"]).head(400)
    sug = suggest_next(other.sample(600, random_state=0), cands, None, budget=20, seed=0)
    assert sug.prior.startswith("transfer") and len(sug.table) == 3
    none = suggest_next(None, cands, None, prior="none", budget=20)
    assert none.prior.startswith("none")
    with pytest.raises(HybridperfError, match="needs a trained model"):
        suggest_next(None, cands, None, prior="model")


def test_picks_are_written_as_rows_or_kernel_tuner_configurations(model, small_sweep, tmp_path) -> None:
    cands = small_sweep[small_sweep["status"] == "ok"].drop(columns=["time_ms", "status", "reason"]).head(300)
    sug = suggest_next(model, cands, _measured(small_sweep.merge(cands), 8), batch=4, seed=0)
    doc = json.loads(write_picks(sug, tmp_path / "picks.json").read_text())
    assert doc["tune_params_keys"] == [c[7:] for c in cands.columns if c.startswith("config.")]
    assert len(doc["configurations"]) == 4 and doc["problem_size"] == {"N": 4096}
    assert all(isinstance(v, int) for v in doc["configurations"][0].values())
    rows = pd.read_csv(write_picks(sug, tmp_path / "picks.csv"))
    assert len(rows) == 4 and {"kernel", "gpu", "size.N", "config.BX"} <= set(rows.columns)
    with pytest.raises(HybridperfError, match=".json"):
        write_picks(sug, tmp_path / "picks.txt")


def test_space_candidates_enumerate_a_restricted_space() -> None:
    rows = space_candidates(str(DESCRIPTOR), GPU, SIZES, space_overrides=SMALL)
    # The descriptor's constraint N % V == 0 rules out V = 3 (a third of SMALL) before the loop sees it.
    assert len(rows) == int(np.prod([len(v) for v in SMALL.values()])) * 2 // 3
    assert (4096 % rows["config.V"] == 0).all()
    with pytest.raises(HybridperfError, match="restrict"):
        space_candidates(str(DESCRIPTOR), GPU, SIZES)  # 10^7 configurations
    with pytest.raises(HybridperfError, match="not among"):
        space_candidates(str(DESCRIPTOR), GPU, SIZES, space_overrides={**SMALL, "BX": [3]})


def test_measured_runs_without_times_are_refused(model, small_sweep) -> None:
    cands = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, pareto=False, top=50).rows()
    measured = small_sweep.merge(cands.iloc[:5], on=list(cands.columns)).drop(columns="time_ms")
    with pytest.raises(HybridperfError, match="the measured runs have no time_ms column"):
        suggest_next(model, cands, measured, batch=4, seed=0)


def test_update_retrains_with_the_new_rows(model, small_sweep) -> None:
    train = _measured(small_sweep, 80, seed=4)
    new = _measured(small_sweep.drop(train.index), 20, seed=5)  # runs not in the training sweep
    m = update(train, new, booster_params={"n_estimators": 20, "n_jobs": 1}, coverage=None)
    assert m.metadata["n_rows"] == 100
    # a configuration measured again replaces its training run (the training table must stay a sweep)
    again = train.head(10).assign(time_ms=train.head(10)["time_ms"] * 1.1)
    m = update(train, pd.concat([new, again]), booster_params={"n_estimators": 20, "n_jobs": 1}, coverage=None)
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


KW = {"kernel": str(DESCRIPTOR), "gpu": GPU, "sizes": SIZES}


def test_replay_trajectory_is_consistent(subspace) -> None:
    opts = LoopOptions(members=2)
    model_run = replay(subspace, budget=24, seed=2, options=opts, prior="analytical", **KW)
    random_run = replay(subspace, strategy="random", budget=24, seed=2, **KW)
    for run in (model_run, random_run):
        s = run.steps
        assert len(s) == 24 and s["index"].is_unique
        assert s["best_ms"].is_monotonic_decreasing and (s["fraction_of_optimum"] <= 1 + 1e-12).all()
        assert run.optimum_ms == pytest.approx(subspace["time_ms"].min())
        assert {"config.BX", "why", "p_better"} <= set(s.columns)
    fitted = model_run.steps["why"].str.startswith(("thompson", "local", "explore"))
    assert model_run.steps.loc[fitted, "p_better"].between(0, 1).all() and fitted.sum() >= 24 - 4
    again = replay(subspace, budget=24, seed=2, options=opts, prior="analytical", **KW)
    assert again.steps["index"].tolist() == model_run.steps["index"].tolist()  # reproducible
    with pytest.raises(HybridperfError, match="strategy"):
        replay(subspace, strategy="greedy", **KW)
    with pytest.raises(HybridperfError, match="no rows"):
        replay(subspace, kernel="nope", gpu=GPU)


def test_replay_with_stop_ends_where_the_rule_says(subspace) -> None:
    full = replay(subspace, budget=60, seed=0, prior="analytical", options=LoopOptions(stop_probability=0.5), **KW)
    assert full.stopped_at is not None and len(full.steps) == 60
    cut = replay(subspace, budget=60, seed=0, prior="analytical", options=LoopOptions(stop_probability=0.5),
                 stop=True, **KW)
    assert len(cut.steps) == full.stopped_at
    assert cut.steps["index"].tolist() == full.steps["index"].iloc[: full.stopped_at].tolist()


def test_compare_strategies_uses_seed_offsets(subspace) -> None:
    comp = compare_strategies(subspace, seeds=2, seed_offset=5, budget=12, prior="none", **KW)
    summary = comp.summary()
    assert sorted(summary["seed"].unique()) == [5, 6] and set(summary["strategy"]) == {"model", "random"}
    steps = comp.steps()
    assert len(steps) == 4 * 12 and list(steps.columns[:2]) == ["strategy", "seed"]
    assert comp.prior.startswith("none")


@pytest.mark.slow
def test_the_loop_beats_random_sampling(subspace) -> None:
    pool = replay_pool(subspace, **KW)
    found, rand = [], []
    for seed in range(10):  # three seeds were too few: one feature more moved two of them below 0.95
        found.append(replay(subspace, budget=36, seed=seed, pool=pool, prior="none", **KW)
                     .steps["fraction_of_optimum"].iloc[-1])
        rand.append(replay(subspace, strategy="random", budget=36, seed=seed, **KW)
                    .steps["fraction_of_optimum"].iloc[-1])
    assert np.median(found) >= np.median(rand) and np.median(found) > 0.95


def test_the_analytical_prior_ranks_by_the_hierarchical_roofline() -> None:
    """Kernel Tuner's convolution cache of the RTX A4000 (4,201 configurations), replayed with no data and no
    model, budget 50: the default analytical prior's first 20 runs hold a configuration within 3% of the
    optimum on seeds 0-2 (0.989 / 0.996 / 0.972; 0.996-1.0 before the convolution's bank conflicts were counted
    per warp, which the GA10x parts do not pay up to 2-way); MWP-CWP's, the default before, reached 0.71-0.79
    (experiments/results/analytical_prior.md)."""
    from hybridperf.datasets import load_dataset
    from hybridperf.search.measure_next import replay, replay_pool
    from hybridperf.search.prior import make_prior

    sweep = load_dataset("kt-convolution")
    rows = sweep[sweep["gpu"] == "rtx-a4000"]
    optimum = rows.loc[rows["status"] == "ok", "time_ms"].min()
    pool = replay_pool(sweep, "kt-convolution", "rtx-a4000")
    prior = make_prior("analytical", pool)
    for seed in range(3):
        steps = replay(sweep, "kt-convolution", "rtx-a4000", budget=50, seed=seed, strategy="model", prior=prior,
                       pool=pool).steps
        assert optimum / steps["time_ms"].iloc[:20].min() >= 0.97
