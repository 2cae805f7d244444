"""The shortlist's odds (the model's held-out curve) and the dropped contenders, against brute-force references."""
from __future__ import annotations

import numpy as np
import pytest

from hybridperf.learn.model import predict_rows
from hybridperf.learn.shortlist import hit_probability
from hybridperf.search.optimum import LEVELS, contenders, width_columns
from hybridperf.search.rank import rank_configs

from .conftest import DESCRIPTOR, GPU, SIZES, SMALL


def _share_odds(model, res):
    """The odds the held-out curve gives at the shares of the union's top-k and of the table, in a space of the
    feasible, unscreened configurations."""
    curve = model.intervals.shortlist_hits[str(DESCRIPTOR)]
    n_sel = res.n_feasible - res.n_screened
    return (hit_probability(curve, int(res.candidates["in_top_k"].sum()) / n_sel, n_sel),
            hit_probability(curve, len(res.table) / n_sel, n_sel))


def test_rank_odds_say_when_the_problem_lies_outside_the_trained_sizes(model) -> None:
    # The curve was measured on training runs at N = 4096 only: at 4x that size the chance is still the curve's,
    # and the note says where it was measured.
    inside = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, top=60, top_k=200)
    assert np.isfinite(inside.p_fastest_kept) and "outside" not in inside.odds_note
    far = rank_configs(model, DESCRIPTOR, GPU, {"N": 4 * SIZES["N"]}, space_overrides=SMALL, top=60, top_k=200)
    assert np.isfinite(far.p_fastest_kept)
    assert far.odds_note.endswith("all at trained sizes: this problem's size lies 4x outside them, where the "
                                  "model's order was never measured")


@pytest.mark.parametrize("top", [3, 60])
def test_rank_odds_are_the_models_held_out_curve_at_the_shortlists_share(model, top: int) -> None:
    res = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, chunk_rows=400, top=top, top_k=200)
    again = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, chunk_rows=100_000, top=top, top_k=200)
    assert res.p_fastest_kept == again.p_fastest_kept and res.n_contenders == again.n_contenders  # chunking exact
    p_kept, p_table = _share_odds(model, res)
    assert res.p_fastest_kept == p_kept and 0 < p_kept <= 1
    curve = model.intervals.shortlist_hits[str(DESCRIPTOR)]
    if top == 3:  # 3 of ~4,000: finer than the 300 training runs (halves of 150) resolve
        assert np.isnan(res.p_fastest_in_table) and np.isnan(p_table) and curve["q"][0] > 3 / res.n_feasible
        assert "among the 3 shown: unknown, a share finer than the held-out runs resolve" in res.describe_odds()
    else:
        assert res.p_fastest_in_table == p_table <= res.p_fastest_kept
    assert "held the fastest of its held-out runs in 1 GPU-and-size group of" in res.describe_odds()
    pruning = res.pruning()
    assert pruning["p_fastest_kept"] == res.p_fastest_kept and pruning["contenders_dropped"] == res.n_contenders


def test_contenders_match_a_brute_force_pass_over_the_space(model) -> None:
    """The dropped configurations that could be the fastest by their intervals, counted over the whole space."""
    res = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, chunk_rows=400, top=3, top_k=20)
    everything = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, prune="none", top=10**6)
    pred = predict_rows(model, everything.rows(), levels=LEVELS)
    could = contenders(pred["time_ms"].to_numpy(), pred[width_columns()].to_numpy())
    dropped = ~np.isin(everything.candidates["index"].to_numpy(), res.candidates["index"])
    assert res.n_contenders == int((could & dropped).sum()) > 0


def test_no_odds_for_ryoos_front_or_a_gpu_the_model_never_ran(model) -> None:
    ryoo = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, prune="ryoo")
    assert np.isnan(ryoo.p_fastest_kept) and "Ryoo's front is not chosen by predicted time" in ryoo.describe_odds()
    other = rank_configs(model, DESCRIPTOR, "a100", SIZES, space_overrides=SMALL)
    assert np.isnan(other.p_fastest_kept) and np.isnan(other.p_fastest_in_table)
    assert "never ran" in other.describe_odds() and "a100" in other.describe_odds()
    import dataclasses

    older = dataclasses.replace(model, intervals=dataclasses.replace(model.intervals, shortlist_hits=None))
    old_file = rank_configs(older, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL)
    assert np.isnan(old_file.p_fastest_kept) and "retrain it" in old_file.describe_odds()
    every = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, prune="none", top=10**6)
    assert every.p_fastest_kept == every.p_fastest_in_table == 1.0  # everything ranked and shown


def test_without_a_model_there_is_no_probability() -> None:
    res = rank_configs(None, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL)
    assert np.isnan(res.p_fastest_kept) and np.isnan(res.p_fastest_in_table) and res.n_contenders == 0


def test_odds_off_ranks_the_same_and_says_so(model, monkeypatch) -> None:
    """Without the odds the scan predicts no widths: same ranking, times and chance, no contenders counted."""
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
    assert not on.odds_skipped and on.pruning()["odds_computed"]
    np.testing.assert_equal(off.p_fastest_kept, on.p_fastest_kept)
    assert off.odds_skipped and off.n_contenders == 0
    assert "could be the fastest" in on.describe_odds() and "could be the fastest" not in off.describe_odds()
    # With prune none nothing is dropped: the contenders are configurations ranked but not returned.
    assert "configurations not returned could be the fastest" in on.describe_odds()
    assert "dropped" not in on.describe_odds()
    assert not off.pruning()["odds_computed"] and off.pruning()["contenders_dropped"] is None
    # By default the odds are computed up to ODDS_MAX_CONFIGS configurations, and not beyond.
    monkeypatch.setattr(rank_mod, "ODDS_MAX_CONFIGS", on.space_size)
    edge = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, prune="none", top=5)
    assert not edge.odds_skipped and edge.n_contenders == on.n_contenders
    monkeypatch.setattr(rank_mod, "ODDS_MAX_CONFIGS", on.space_size - 1)
    auto = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, prune="none", top=5)
    assert auto.odds_skipped and auto.n_contenders == 0
    forced = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, prune="none", top=5, odds=True)
    assert not forced.odds_skipped and forced.n_contenders == on.n_contenders


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
    np.testing.assert_equal(one.p_fastest_kept, two.p_fastest_kept)
    assert one.n_contenders == two.n_contenders
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
