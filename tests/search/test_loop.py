"""The loop's parts: start size and design, priors, the failure classifier, and one step."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from hybridperf.errors import HybridperfError
from hybridperf.search.ensemble import FeaturePool, fit_bag
from hybridperf.search.loop import LoopOptions, failure_probability, next_batch, prior_offset, prospective_error
from hybridperf.search.prior import analytical_prior, make_prior, no_prior, transfer_prior
from hybridperf.search.start import batch_size, initial_design, prior_ties, start_size


@pytest.fixture(scope="module")
def subspace(small_sweep) -> pd.DataFrame:
    keep = small_sweep["config.PAD"].eq(0) & small_sweep["config.V"].eq(1)
    return small_sweep.loc[keep].reset_index(drop=True)  # 768 configurations


@pytest.fixture(scope="module")
def pool(subspace) -> FeaturePool:
    return FeaturePool.of(subspace)


def _times(pool: FeaturePool) -> np.ndarray:
    return np.where(pool.rows["status"].eq("ok"), pool.rows["time_ms"], np.nan)


def test_start_and_batch_scale_with_the_budget() -> None:
    sizes = [start_size(b) for b in (10, 20, 30, 50, 100, 1000)]
    assert sizes == sorted(sizes) and sizes[0] == 3 and sizes[-1] == 16
    assert start_size(50, informative=False) > start_size(50, informative=True)
    assert start_size(2) == 2 and start_size(None) == 8  # never more than the budget
    assert [batch_size(b) for b in (10, 50, 100, 1000)] == [2, 5, 8, 8]
    with pytest.raises(HybridperfError, match="budget"):
        start_size(0)


def test_pool_drops_constant_columns_and_maps_parameters_to_grid_coordinates(pool) -> None:
    assert pool.varying.shape[1] < pool.X.shape[1]  # GPU fields and the size are constant here
    assert pool.coords.min() == 0 and pool.coords.max() == 1
    bx = pool.rows["config.BX"].to_numpy()
    col = pool.coords[:, 0]  # BX: 4 values -> 0, 1/3, 2/3, 1 in value order
    assert np.all(np.diff(col[np.argsort(bx, kind="stable")]) >= 0)
    assert sorted(np.unique(col)) == pytest.approx([0, 1 / 3, 2 / 3, 1])


def test_initial_design_takes_the_priors_best_then_fills_space(pool) -> None:
    cand = np.flatnonzero(pool.feasible)
    prior = analytical_prior(pool)
    picks, why = initial_design(pool.coords, prior, cand, 8, seed=0)
    assert len(set(picks)) == 8 and set(picks) <= set(cand) and len(why) == 8 and "exploit" in why[0]
    fourth = np.sort(prior.log_time[cand])[3]
    assert (prior.log_time[picks] <= fourth).sum() >= 4  # the prior's best four (ties broken at random)
    # Without a prior: farthest-point picks are more spread than random ones.
    spread, _ = initial_design(pool.coords, no_prior(pool), cand, 8, seed=0)

    def min_dist(ix: np.ndarray) -> float:
        c = pool.coords[ix]
        d = np.abs(c[:, None, :] - c[None, :, :]).sum(axis=2)
        return float(d[np.triu_indices(len(ix), 1)].min())
    rng = np.random.default_rng(0)
    randoms = [min_dist(rng.choice(cand, 8, replace=False)) for _ in range(20)]
    assert min_dist(spread) > np.median(randoms)


def test_the_priors_intervals_decide_between_its_best_and_exploring(pool) -> None:
    cand = np.flatnonzero(pool.feasible)
    base = analytical_prior(pool)
    base = replace(base, log_time=base.log_time + 1e-9 * np.arange(len(pool.rows)))  # no exact ties
    order = cand[np.argsort(base.log_time[cand], kind="stable")]
    sure = replace(base, log_sigma=np.full(len(pool.rows), 1e-12))  # every interval clear of the others
    unsure = replace(base, log_sigma=np.full(len(pool.rows), 50.0))  # every interval overlaps the best's
    assert list(prior_ties(sure, cand)) == [order[0]] and prior_ties(unsure, cand).size == cand.size
    assert prior_ties(base, cand) is None  # no intervals: the prior's best 5% stand in
    rank = {int(r): i for i, r in enumerate(order)}
    exploit, why = initial_design(pool.coords, sure, cand, 8, seed=0)
    assert sorted(rank[int(p)] for p in exploit[:4]) == [0, 1, 2, 3] and "draw" in why[0]
    # Wide intervals: the four draws spread over the rows (expected rank ~ half the space), the rest too.
    explore, why = initial_design(pool.coords, unsure, cand, 8, seed=0)
    assert np.median([rank[int(p)] for p in explore[:4]]) > 0.1 * cand.size
    assert any("overlaps" in w for w in why)


def test_transfer_prior_carries_the_shape_and_the_failures(small_sweep, pool) -> None:
    other = small_sweep.loc[small_sweep["config.PAD"].eq(1)].copy()  # the same kernel, different rows
    other["time_ms"] = other["time_ms"] * 3.0  # another GPU: 3x slower, same shape
    bad = other["config.BX"].eq(256) & other["status"].eq("ok")
    other.loc[bad, ["time_ms", "status", "reason"]] = [np.nan, "failed", "RuntimeFailedConfig"]
    prior = transfer_prior(pool, other, seed=0)
    t = _times(pool)
    ok = np.isfinite(t) & np.isfinite(prior.log_time)
    assert prior.name == "transfer" and spearmanr(prior.log_time[ok], t[ok]).statistic > 0.8
    assert abs(float(np.nanmedian(prior.log_time))) < 1e-9  # centred
    big = pool.rows["config.BX"].eq(256).to_numpy() & pool.feasible
    assert prior.p_fail[big].mean() > 0.8 and prior.p_fail[~big & pool.feasible].mean() < 0.2
    with pytest.raises(HybridperfError, match="no run of kernel"):
        transfer_prior(pool, other.assign(kernel="other"))
    with pytest.raises(HybridperfError, match="prior must be"):
        make_prior("magic", pool)
    assert make_prior("auto", pool).name == "analytical" and make_prior("auto", pool, prior_rows=other).name == \
        "transfer"


def test_transfer_prior_reads_the_same_configurations_measured_elsewhere(pool) -> None:
    rows = pool.rows
    a = rows.assign(gpu="a100-pcie-40gb", time_ms=rows["time_ms"] * 3.0)  # another GPU: 3x slower, same shape
    b = rows.assign(gpu="rtx-a4000", time_ms=rows["time_ms"] * np.exp(0.2 * rows["config.U"]))  # U costs there
    fail = rows.index[rows["status"].eq("ok")][:5]
    b.loc[fail, ["time_ms", "status"]] = [np.nan, "failed"]
    b = b.drop(columns="config.PAD")  # a sweep that did not vary PAD: empty = the descriptor's default (0)
    prior = transfer_prior(pool, pd.concat([a, b], ignore_index=True), seed=0)
    # Independent expectation: per sweep, log time minus its median; per configuration, the mean over sweeps.
    def rel(df: pd.DataFrame) -> pd.Series:
        lt = np.log(df["time_ms"].where(df["status"].eq("ok")))
        return lt - lt.median()
    expect = pd.concat([rel(a), rel(b)], axis=1).mean(axis=1).to_numpy()
    ok = pool.feasible & np.isfinite(expect)
    got = prior.log_time[ok] - np.median(prior.log_time[ok])
    assert np.allclose(got, expect[ok] - np.median(expect[ok]), atol=1e-9)
    assert np.allclose(prior.p_fail[fail], 0.5) and prior.p_fail[pool.feasible].sum() == pytest.approx(2.5)
    assert "measured there" in prior.note


def test_prior_scale_is_fitted_and_shrunk(pool) -> None:
    prior = analytical_prior(pool)
    idx = np.flatnonzero(pool.feasible)[:40]
    y = 0.5 * prior.log_time[idx] + 1.0  # the GPU's times vary half as much as the prior says
    b = prior_offset(prior, idx, y)
    assert 0.5 < b < 1.0  # pulled towards 0.5 by the data, towards 1 by the pseudo-rows
    assert prior_offset(prior, idx[:1], y[:1]) == 1.0  # too few rows: the prior as is
    assert prior_offset(no_prior(pool), idx, y) == 0.0


def test_failures_measured_teach_the_classifier(pool) -> None:
    cand = np.flatnonzero(pool.feasible)
    big = pool.rows["config.BX"].eq(256).to_numpy()
    rng = np.random.default_rng(0)
    idx = np.concatenate([rng.choice(cand[big[cand]], 6, replace=False),
                          rng.choice(cand[~big[cand]], 30, replace=False)])
    failed = big[idx]
    p = failure_probability(pool, no_prior(pool), idx, failed, cand, seed=0)
    assert p[big[cand]].mean() > 0.6 and p[~big[cand]].mean() < 0.2
    assert not failure_probability(pool, no_prior(pool), idx, np.zeros(idx.size, bool), cand).any()


def test_bag_members_differ_and_know_their_error(pool) -> None:
    idx = np.flatnonzero(pool.feasible)[::10]
    y = np.log(_times(pool)[idx])
    keep = np.isfinite(y)
    bag = fit_bag(pool.varying[idx[keep]], y[keep], np.zeros(keep.sum()), members=4, seed=0)
    S = bag.predict(pool.varying, np.zeros(len(pool.rows)))
    assert S.shape == (4, len(pool.rows)) and np.ptp(S, axis=0).max() > 0
    assert 0 < bag.sigma_oob < 1
    tiny = fit_bag(pool.varying[:2], np.array([0.0, 1.0]), np.zeros(2), members=3, seed=0)
    assert np.allclose(tiny.predict(pool.varying[:5], np.zeros(5)), 0.5)  # too few rows: their mean


def test_the_stop_rule_checks_the_members_on_the_runs_they_did_not_see(pool) -> None:
    idx = np.flatnonzero(pool.feasible)[::12][:30]
    y = np.log(_times(pool)[idx])
    keep = np.isfinite(y)
    idx, y = idx[keep], y[keep]
    opts = LoopOptions(members=3)
    base = prospective_error(pool, no_prior(pool), idx, y, opts, seed=0, free=0.2, k=5)
    off = y.copy()
    off[-5:] += 2.0  # the last batch ran e^2 = 7.4x slower than anything like it: the members cannot know
    assert prospective_error(pool, no_prior(pool), idx, off, opts, seed=0, free=0.2, k=5) > base + 1.0
    assert prospective_error(pool, no_prior(pool), idx[:8], y[:8], opts, seed=0, free=0.2, k=5) == 0.0


def test_next_batch_starts_then_fits(pool) -> None:
    t = _times(pool)
    prior = analytical_prior(pool)
    opts = LoopOptions(members=3)
    first = next_batch(pool, prior, [], [], budget=40, options=opts, seed=0)
    assert first.stop is None and len(first.positions) == start_size(40) and first.why[0].startswith("start")
    m = list(first.positions)
    step = next_batch(pool, prior, m, np.log(t[m]), budget=40, options=opts, seed=1)
    assert step.stop is not None and len(step.positions) == batch_size(40)
    assert not set(step.positions) & set(m) and pool.feasible[step.positions].all()
    assert np.isfinite(step.log_mu).all() and (step.log_sigma > 0).all()
    near_end = next_batch(pool, prior, m, np.log(t[m]), budget=len(m) + 1, options=opts)
    assert len(near_end.positions) == 1  # never past the budget
    with pytest.raises(HybridperfError, match="explore"):
        LoopOptions(explore=1.5)
    with pytest.raises(HybridperfError, match="stop probability"):
        LoopOptions(stop_probability=0.0)
