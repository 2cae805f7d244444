"""Acquisition: expected improvement, Thompson/EI batch selection and the P(better) stop rule."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.special import ndtr

from hybridperf.errors import HybridperfError
from hybridperf.search.acquisition import expected_improvement, select_batch, stop_rule


def test_expected_improvement_matches_monte_carlo() -> None:
    rng = np.random.default_rng(1)
    mu, s, best = np.log([1.0, 1.2, 0.9]), np.array([0.1, 0.3, 0.05]), 1.0
    p, ei = expected_improvement(mu, s, best)
    draws = np.exp(mu + s * rng.standard_normal((400_000, 3)))
    np.testing.assert_allclose(p, (draws < best).mean(axis=0), atol=3e-3)
    np.testing.assert_allclose(ei, np.maximum(best - draws, 0).mean(axis=0), rtol=0.02, atol=1e-4)
    p_inf, ei_inf = expected_improvement(mu, s, float("inf"))
    assert (p_inf == 1).all() and np.isinf(ei_inf).all()


def test_stop_probability_matches_the_independent_normal_formula() -> None:
    # One member: every draw is that surface plus independent noise, so
    # P(min_i T_i < b / (1 + g)) = 1 - prod_i (1 - Phi((ln(b / (1 + g)) - mu_i) / s)).
    mu = np.log([1.02, 1.05, 1.1, 1.3, 2.0])
    s, best, gain = 0.04, 1.0, 0.01
    exact = 1 - np.prod(1 - ndtr((np.log(best / (1 + gain)) - mu) / s))
    d = stop_rule(mu[None, :], s, best, gain=gain, probability=0.05, draws=20_000, seed=0)
    assert d.p_better == pytest.approx(exact, abs=0.01)
    assert not d.stop and "measure on" in d.reason
    # The verdict compares the chance with the stop probability, and says both as they are (not rounded to 0 %
    # or 100 %); the expected gain follows it.
    assert f"= {100 * d.p_better:.3g}% >= 5%: measure on (expected gain" in d.reason and "> 1% faster" in d.reason
    tight = stop_rule(mu[None, :], s, best, gain=0.015, probability=0.999999, draws=2_000, seed=0)
    assert tight.stop and "> 1.5% faster" in tight.reason and "< 99.9999%: stop" in tight.reason


def test_stop_rule_stops_when_nothing_plausible_is_faster() -> None:
    far = np.log(np.array([[1.5, 2.0, 3.0], [1.6, 1.9, 2.5]]))
    d = stop_rule(far, 0.05, best_ms=1.0)
    assert d.stop and d.p_better < 0.05 and d.expected_gain < 1e-3
    # A member that puts one candidate 20% below the best keeps the loop going.
    split = np.log(np.array([[1.5, 2.0, 3.0], [0.8, 1.9, 2.5]]))
    assert not stop_rule(split, 0.05, best_ms=1.0).stop
    assert stop_rule(np.full((2, 3), np.nan), 0.05, 1.0).stop  # nothing feasible left
    assert not stop_rule(far, 0.05, float("inf")).stop  # nothing measured yet
    with pytest.raises(HybridperfError, match="probability"):
        stop_rule(far, 0.05, 1.0, probability=1.5)


def test_thompson_picks_each_members_fastest_and_explore_picks_the_widest() -> None:
    # member 0 favours candidate 0, member 1 candidate 1; candidate 4 is slow on average but the members
    # disagree about it wildly (largest expected improvement).
    S = np.log(np.array([[0.5, 1.0, 1.2, 1.3, 0.6, np.nan],
                         [1.0, 0.5, 1.2, 1.3, 3.0, np.nan]]))
    pos, why = select_batch(S, 1e-3, best_ms=0.9, batch=3, explore=1 / 3, seed=0)
    assert set(pos[:2]) == {0, 1} and all(w.startswith("thompson") for w in why[:2])
    assert pos[2] == 4 and why[2].startswith("explore")
    pos, _ = select_batch(S, 1e-3, 0.9, batch=10, explore=0.5)
    assert 5 not in pos and len(set(pos)) == len(pos) == 5  # NaN (infeasible) never picked
    with pytest.raises(HybridperfError, match="explore"):
        select_batch(S, 0.1, 1.0, explore=2.0)


def test_predicted_failures_are_never_picked() -> None:
    S = np.log(np.array([[0.5, 1.0, 1.2, 1.3]]))
    pos, _ = select_batch(S, 1e-3, 0.9, batch=4, explore=0.5, p_fail=np.array([0.9, 0.0, 0.2, 0.6]))
    assert sorted(pos) == [1, 2]


def test_ties_are_broken_by_seed_not_by_index() -> None:
    S = np.zeros((3, 100))
    picks = {tuple(select_batch(S, 1e-9, 2.0, batch=4, explore=0, seed=s)[0]) for s in range(5)}
    assert len(picks) > 1


@pytest.mark.parametrize("share, text", [(0.05, "5%"), (0.0496, "4.96%"), (0.015, "1.5%"), (0.9996, "99.96%"),
                                         (0.999999, "99.9999%"), (0.9999999, "99.99999%"), (1e-9, "1e-07%"),
                                         (1.0, "100%"), (0.0, "0%"), (0.123456, "12.3%")])
def test_percent_text_tells_a_share_from_its_neighbours(share: float, text: str) -> None:
    """A chance just under the stop probability must not print as equal to it (0.0496 read '5.0% < 5%: stop')."""
    from hybridperf.learn.domain import percent_text

    assert percent_text(share) == text


def test_percent_text_tells_a_chance_from_the_threshold_it_is_compared_with() -> None:
    from hybridperf.learn.domain import percent_text

    assert percent_text(0.04995) == "5%" and percent_text(0.04995, unlike=0.05) == "4.995%"
    assert percent_text(0.05, unlike=0.05) == "5%" and percent_text(0.0496, unlike=0.05) == "4.96%"
