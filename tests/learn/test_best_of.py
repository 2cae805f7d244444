"""The chance that the fastest of n is among the predicted-fastest k, against exact values and brute force."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hybridperf.learn.best_of import RHO_RANGE, best_in_top_k, fit_order_correlation
from hybridperf.learn.shortlist import held_out_hit_curves, hit_probability


def _simulated(rho: float, n: int, ks: list[int], draws: int, seed: int) -> np.ndarray:
    """Brute force: draws of n measured/predicted pairs; how often the measured best is among the k predicted best."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((draws, n))
    p = rho * z + np.sqrt(1 - rho * rho) * rng.standard_normal((draws, n))
    best = z.argmax(axis=1)
    ahead = (p > p[np.arange(draws), best][:, None]).sum(axis=1)  # predicted better than the best
    return np.array([(ahead < k).mean() for k in ks])


@pytest.mark.parametrize("n", [2, 7, 100, 1000])
def test_a_useless_order_keeps_the_fastest_in_proportion(n: int) -> None:
    ks = np.unique(np.linspace(1, n, 6).astype(int))
    np.testing.assert_allclose(best_in_top_k(0.0, n, ks), ks / n, atol=0.003)


@pytest.mark.parametrize(("rho", "n", "ks"), [(0.5, 50, [1, 5, 12]), (0.9, 400, [1, 4, 40]), (0.97, 20, [1, 2]),
                                              (-0.5, 30, [3, 15]), (0.999, 108, [1])])
def test_matches_brute_force_simulation(rho: float, n: int, ks: list[int]) -> None:
    draws = 20_000
    sim = _simulated(rho, n, ks, draws, seed=int(1000 * abs(rho)) + n)
    got = best_in_top_k(rho, n, ks)
    se = np.sqrt(np.maximum(sim * (1 - sim), 1e-4) / draws)
    assert np.all(np.abs(got - sim) < 4 * se + 0.004), (got, sim)


@pytest.mark.parametrize("rho", [-0.5, 0.3, 0.8, 0.95, 0.999])
def test_two_configurations_have_the_closed_form(rho: float) -> None:
    # Of two, the fastest is predicted fastest when the differences of the measured and the predicted values, a
    # bivariate normal pair of correlation rho, share their sign: 1/2 + arcsin(rho) / pi (Sheppard's formula).
    assert best_in_top_k(rho, 2, 1)[0] == pytest.approx(0.5 + np.arcsin(rho) / np.pi, abs=1e-3)


def test_a_useless_order_of_a_huge_space_is_within_the_stated_accuracy() -> None:
    np.testing.assert_allclose(best_in_top_k(0.0, 10**5, [100, 10**4, 5 * 10**4]), [0.001, 0.1, 0.5], atol=0.002)
    with pytest.raises(ValueError, match="below 2"):
        best_in_top_k(0.5, 2**31, 1)


def test_rises_with_accuracy_with_the_share_and_with_the_space_at_a_fixed_share() -> None:
    rhos = np.linspace(0, 0.99, 12)
    assert np.all(np.diff([best_in_top_k(r, 200, 10)[0] for r in rhos]) > 0)
    assert np.all(np.diff(best_in_top_k(0.8, 500, [1, 5, 25, 125, 499])) > 0)
    # Why the halves' rate understates a large space's: the fastest of more configurations lies further out.
    at_tenth = [best_in_top_k(0.8, n, n // 10)[0] for n in (20, 200, 2000, 20000)]
    assert np.all(np.diff(at_tenth) > 0)
    assert best_in_top_k(0.8, 50, 50)[0] == 1.0 and best_in_top_k(0.8, 1, 1)[0] == 1.0
    with pytest.raises(ValueError, match="n must be at least 1"):
        best_in_top_k(0.5, 0, 1)


def test_the_fit_recovers_the_correlation_it_was_given() -> None:
    for rho in (0.3, 0.8, 0.95):
        samples = [(m, ks, best_in_top_k(rho, m, ks), 1.0) for m, ks in ((20, [1, 2, 4, 10]), (150, [1, 3, 15, 75]))]
        assert fit_order_correlation(samples) == pytest.approx(rho, abs=0.01)
    with pytest.raises(ValueError, match="no hit rates"):
        fit_order_correlation([(20, [], [], 1.0)])
    for bad in ([(20, [1, 2], [0.3, np.nan], 1.0)], [(20, [1, 2], [0.3, 0.5], np.nan)], [(20, [1, 2], [0.3, 1.5], 1.0)],
                [(20, [1, 2], [0.3], 1.0)]):
        with pytest.raises(ValueError, match="hit rates must be"):
            fit_order_correlation(bad)


def test_many_group_sizes_pool_into_a_bounded_number_of_fits(monkeypatch) -> None:
    """A kernel whose groups have many sizes is fitted on at most _MAX_POOLS pools (each a fit's cost), each group
    weighing once in all: its pool's weight shared among the shares the pool resolves."""
    import hybridperf.learn.shortlist as shortlist

    seen = []
    monkeypatch.setattr(shortlist, "fit_order_correlation", lambda samples: seen.append(samples) or 0.5)
    rng = np.random.default_rng(5)
    sizes = [5, 6, 7, 9, 12, 20, 35, 60, 110, 300, 800, 2000]
    pools = [(m, np.where(np.floor(np.asarray(shortlist.FRACTIONS) * m) >= 1, rng.uniform(size=9), np.nan))
             for m in sizes for _ in range(2)]
    shortlist._order_correlation(pools)
    samples = seen[-1]
    assert len(samples) <= shortlist._MAX_POOLS
    assert sum(w * len(k) for _, k, _, w in samples) == pytest.approx(len(pools))  # every group once
    few = [p for p in pools if p[0] in (20, 300, 2000)]
    shortlist._order_correlation(few)
    assert sorted(m for m, *_ in seen[-1]) == [20, 300, 2000]  # few sizes: each fitted at its own size


def test_training_curves_carry_a_correlation_near_the_simulated_one() -> None:
    rng = np.random.default_rng(4)
    n = 600
    rows = pd.DataFrame({"kernel": "k", "gpu": "g", "size.N": 1.0}, index=range(n))
    z = rng.standard_normal(n)
    y = -z  # log time: the fastest has the largest z
    for rho in (0.0, 0.7, 0.99):
        pred = -(rho * z + np.sqrt(1 - rho * rho) * rng.standard_normal(n))
        curve = held_out_hit_curves(rows, pred, y)["k"]
        assert curve["rho"] == pytest.approx(rho, abs=0.15)
    perfect = held_out_hit_curves(rows, y, y)["k"]
    assert perfect["rho"] > 0.99 and perfect["rho"] <= RHO_RANGE[1]


def test_hit_probability_uses_the_correlation_for_a_given_space() -> None:
    curve = {"q": [0.01, 0.1, 0.5], "p": [0.2, 0.6, 0.9], "groups": [1.0, 1.0, 1.0], "rho": 0.8}
    assert hit_probability(curve, 0.1, 5000) == pytest.approx(best_in_top_k(0.8, 5000, 500)[0])
    assert hit_probability(curve, 0.1) == pytest.approx(0.6)  # no space size: the curve as measured
    assert np.isnan(hit_probability(curve, 0.005, 5000))  # finer than the halves resolved: still unknown
    assert hit_probability(curve, 1.0, 5000) == 1.0
    old = {k: v for k, v in curve.items() if k != "rho"}  # a model file from before the correlation
    assert hit_probability(old, 0.1, 5000) == pytest.approx(0.6)


def test_the_correlation_survives_the_model_file_and_a_bad_one_is_refused() -> None:
    from hybridperf.learn.intervals import ConformalIntervals
    from hybridperf.learn.persist import ModelFileError

    curves = {"k": {"q": [0.05, 0.1], "p": [0.5, 0.75], "groups": [2.0, 3.0], "rho": 0.83}}
    ci = ConformalIntervals(scores={"seen|0": np.array([0.5, 1.0])}, shortlist_hits=curves)
    assert ConformalIntervals.from_dict(ci.to_dict(), 10).shortlist_hits == curves
    for bad in (1.0, -1.5, "0.8", True, None):
        doc = ci.to_dict()
        doc["shortlist_hits"]["k"]["rho"] = bad
        with pytest.raises(ModelFileError, match="order correlation"):
            ConformalIntervals.from_dict(doc, 10)
