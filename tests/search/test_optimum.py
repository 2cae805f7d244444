"""P(the fastest configuration is in the shortlist), against Monte-Carlo and brute-force references."""
from __future__ import annotations

import numpy as np
import pytest

from hybridperf.learn.model import predict_rows
from hybridperf.search.optimum import LEVELS, probability_fastest_in, width_columns
from hybridperf.search.rank import rank_configs

from .conftest import DESCRIPTOR, GPU, SIZES, SMALL


def _sample_log_times(time_ms: np.ndarray, widths: np.ndarray, draws: int, rng: np.random.Generator) -> np.ndarray:
    """Draws of each configuration's log time by inverting the documented CDF of |log error|: the
    levels at their widths, linear from 0, the last segment continued up to probability 1; random sign."""
    c = np.asarray(LEVELS)
    out = np.empty((draws, len(time_ms)))
    for i, (t, w) in enumerate(zip(time_ms, widths)):
        w = np.maximum.accumulate(w)
        end = w[-1] + (w[-1] - w[-2]) * (1 - c[-1]) / (c[-1] - c[-2])
        size = np.interp(rng.random(draws), np.r_[0.0, c, 1.0], np.r_[0.0, w, end])
        out[:, i] = np.log(t) + np.where(rng.random(draws) < 0.5, -size, size)
    return out


def _monte_carlo(time_ms: np.ndarray, widths: np.ndarray, in_set: np.ndarray, draws: int = 40_000,
                 seed: int = 0) -> float:
    samples = _sample_log_times(time_ms, widths, draws, np.random.default_rng(seed))
    return float(np.mean(in_set[np.argmin(samples, axis=1)]))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_probability_matches_monte_carlo(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 40
    time_ms = np.exp(rng.normal(0, 0.15, n))
    # Each configuration's widths: a heavy-tailed profile scaled by its own difficulty.
    profile = np.quantile(np.abs(rng.standard_t(3, 5000)), LEVELS) * 0.05
    widths = profile[None, :] * np.exp(rng.normal(0, 0.5, n))[:, None]
    in_set = time_ms <= np.sort(time_ms)[4]  # the five fastest predicted
    p = probability_fastest_in(time_ms, widths, in_set)
    ref = _monte_carlo(time_ms, widths, in_set)
    assert 0.05 < ref < 0.999
    assert p == pytest.approx(ref, abs=4 * np.sqrt(ref * (1 - ref) / 40_000) + 2e-3)


def test_edge_cases() -> None:
    w = np.tile(np.linspace(0.01, 0.1, len(LEVELS)), (3, 1))
    t = np.array([1.0, 1.05, 10.0])
    assert probability_fastest_in(t, w, np.array([True, True, True])) == 1.0
    assert probability_fastest_in(t, w, np.array([False, False, False])) == 0.0
    assert probability_fastest_in(t, w, np.array([False, False, True])) == 0.0  # 10x slower: never fastest
    assert np.isnan(probability_fastest_in(t, np.where(w > 0.09, np.inf, w), np.array([True, False, False])))
    # Two identical configurations: each is the fastest half of the time.
    assert probability_fastest_in(t[:1].repeat(2), w[:2], np.array([True, False])) == pytest.approx(0.5, abs=2e-3)


@pytest.mark.parametrize("top", [3])
def test_rank_probability_matches_a_brute_force_pass_over_the_space(model, top: int) -> None:
    res = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, chunk_rows=400, top=top, top_k=20)
    again = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, chunk_rows=100_000, top=top, top_k=20)
    assert res.p_fastest_kept == again.p_fastest_kept and res.n_contenders == again.n_contenders  # chunking exact
    assert 0 < res.p_fastest_in_table <= res.p_fastest_kept <= 1
    everything = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, prune="none", top=10**6)
    pred = predict_rows(model, everything.rows(), levels=LEVELS)
    time_ms, widths = pred["time_ms"].to_numpy(), pred[width_columns()].to_numpy()
    index = everything.candidates["index"].to_numpy()
    kept = np.isin(index, res.candidates["index"])
    shown = np.isin(index, res.table["index"])
    assert probability_fastest_in(time_ms, widths, kept) == pytest.approx(res.p_fastest_kept, abs=1e-9)
    for in_set, p in ((kept, res.p_fastest_kept), (shown, res.p_fastest_in_table)):
        ref = _monte_carlo(time_ms, widths, in_set, draws=20_000)
        assert p == pytest.approx(ref, abs=4 * np.sqrt(max(ref * (1 - ref), 1e-3) / 20_000) + 3e-3)
    pruning = res.pruning()
    assert pruning["p_fastest_kept"] == res.p_fastest_kept and pruning["contenders_dropped"] == res.n_contenders


def test_without_a_model_there_is_no_probability() -> None:
    res = rank_configs(None, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL)
    assert np.isnan(res.p_fastest_kept) and np.isnan(res.p_fastest_in_table) and res.n_contenders == 0


def test_odds_off_ranks_the_same_and_says_so(model, monkeypatch) -> None:
    """Without the odds the scan predicts no widths: same ranking and times, no probability, a note saying why."""
    import hybridperf.learn.model as model_mod
    import hybridperf.search.rank as rank_mod

    asked: list[int] = []
    spread = model_mod.predict_spread

    def spy(m, rows, levels, **kw):  # the scan's predictions: how many widths each chunk asked for
        asked.append(len(levels))
        return spread(m, rows, levels, **kw)

    monkeypatch.setattr(model_mod, "predict_spread", spy)
    on = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, prune="none", top=5, chunk_rows=300)
    assert asked and set(asked) == {len(LEVELS)}
    asked.clear()
    off = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, prune="none", top=5, chunk_rows=300,
                       odds=False)
    assert asked and set(asked) == {0}  # no chunk predicted a width
    assert on.table["index"].tolist() == off.table["index"].tolist()
    np.testing.assert_array_equal(on.table["time_ms"], off.table["time_ms"])
    np.testing.assert_array_equal(on.table["hi_ms"], off.table["hi_ms"])  # the shown rows keep their intervals
    assert np.isfinite(on.p_fastest_kept) and not on.odds_skipped and on.pruning()["odds_computed"]
    assert np.isnan(off.p_fastest_kept) and off.odds_skipped and off.n_contenders == 0
    assert "not computed (asked not to;" in off.describe_odds() and not off.pruning()["odds_computed"]
    # By default the odds are computed up to ODDS_MAX_CONFIGS configurations, and not beyond.
    monkeypatch.setattr(rank_mod, "ODDS_MAX_CONFIGS", on.space_size)
    edge = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, prune="none", top=5)
    assert not edge.odds_skipped and edge.p_fastest_kept == on.p_fastest_kept
    monkeypatch.setattr(rank_mod, "ODDS_MAX_CONFIGS", on.space_size - 1)
    auto = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, prune="none", top=5)
    assert auto.odds_skipped and np.isnan(auto.p_fastest_kept)
    assert f"a space of more than {on.space_size - 1:,} configurations" in auto.describe_odds()
    forced = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, prune="none", top=5, odds=True)
    assert forced.p_fastest_kept == on.p_fastest_kept


def test_threaded_scan_gives_the_same_result_and_restores_booster_threads(model) -> None:
    import json

    def threads() -> list[str]:
        return [json.loads(r.get_booster().save_config())["learner"]["generic_param"]["nthread"]
                for r in model.regressors()]

    before = threads()
    one = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, prune="none", top=5, chunk_rows=200)
    two = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, prune="none", top=5, chunk_rows=200,
                       jobs=2)
    assert one.table["index"].tolist() == two.table["index"].tolist()
    assert one.p_fastest_kept == two.p_fastest_kept and one.n_contenders == two.n_contenders
    assert threads() == before and len(before) >= 2


def test_prediction_threads_nest_and_overlap_and_restore(model) -> None:
    """Overlapping users (threads of one scan, Dask tasks sharing a model) leave the thread count as it was."""
    import json

    from hybridperf.learn.booster import prediction_threads

    def threads() -> list[str]:
        return [json.loads(r.get_booster().save_config())["learner"]["generic_param"]["nthread"]
                for r in model.regressors()]

    before = threads()
    a, b = prediction_threads(model.regressors(), 1), prediction_threads(model.regressors(), 1)
    a.__enter__()
    b.__enter__()
    assert set(threads()) == {"1"}
    a.__exit__(None, None, None)  # the other user still predicts: the count stays
    assert set(threads()) == {"1"}
    b.__exit__(None, None, None)
    assert threads() == before
    with pytest.raises(RuntimeError), prediction_threads(model.regressors(), 1):
        raise RuntimeError("scan failed")
    assert threads() == before


def test_an_unbounded_interval_has_no_support_and_warns_nothing() -> None:
    """Infinite widths (a bin too small for the coverage): no support, not a contender, and no RuntimeWarning."""
    import warnings

    from hybridperf.search.optimum import LEVELS, contenders, support_ms

    w = np.tile(np.linspace(0.1, 1.0, len(LEVELS)), (3, 1))
    w[1] = np.inf
    t = np.array([1.0, 2.0, 3.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lo, hi = support_ms(t, w)
        keep = contenders(t, w)
    assert np.isfinite(lo[[0, 2]]).all() and not np.isfinite(lo[1]) and not np.isfinite(hi[1])
    assert keep.tolist() == [True, False, True]
