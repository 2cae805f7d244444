"""The held-out shortlist curves (the odds `rank` states), against exact expectations and the model file."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hybridperf.learn.shortlist import FRACTIONS, MIN_GROUP_RUNS, held_out_hit_curves, hit_probability


def _rows(n: int, kernel: str = "k", gpu: str = "g", size: float = 1.0) -> pd.DataFrame:
    return pd.DataFrame({"kernel": kernel, "gpu": gpu, "size.N": size}, index=range(n))


def test_a_perfect_order_always_keeps_the_fastest_and_a_reversed_one_never_does() -> None:
    y = np.random.default_rng(0).normal(size=400)
    perfect = held_out_hit_curves(_rows(400), y, y)["k"]
    assert perfect["p"] == [1.0] * len(perfect["q"])
    reversed_ = held_out_hit_curves(_rows(400), -y, y)["k"]
    assert reversed_["p"] == [0.0] * len(reversed_["q"])  # the fastest is predicted slowest: never in a half's top half
    # Halves of 200 runs resolve a share down to 1 run of 200; the curve holds the shares measured, k / 200.
    np.testing.assert_allclose(perfect["q"], [np.floor(f * 200) / 200 for f in FRACTIONS if np.floor(f * 200) >= 1])


def test_a_random_order_keeps_the_fastest_in_proportion_to_the_share() -> None:
    """Over random predictions the fastest of a half is equally likely at any predicted rank: the chance that the
    predicted-fastest k of m hold it is k / m, the share the curve records (halves of 150 runs: 1/150, 3/150, ...)."""
    rng = np.random.default_rng(1)
    n, draws = 300, 300
    curves = [held_out_hit_curves(_rows(n), rng.normal(size=n), rng.normal(size=n), random_state=i,
                                  correlation=False)["k"] for i in range(draws)]
    expected = np.asarray(curves[0]["q"])
    np.testing.assert_allclose(expected, [np.floor(f * 150) / 150 for f in FRACTIONS if np.floor(f * 150) >= 1])
    got = np.mean([c["p"] for c in curves], axis=0)
    spread = np.std([c["p"] for c in curves], axis=0) / np.sqrt(draws)
    assert np.all(np.abs(got - expected) < 4 * spread + 1e-3)


def test_small_groups_do_not_count_and_groups_pool_per_kernel() -> None:
    rng = np.random.default_rng(2)
    rows = pd.concat([_rows(MIN_GROUP_RUNS - 1, kernel="tiny"), _rows(40, size=1.0), _rows(12, size=2.0),
                      _rows(40, gpu="h")], ignore_index=True)
    y = rng.normal(size=len(rows))
    curves = held_out_hit_curves(rows, y, y)
    assert set(curves) == {"k"}  # "tiny" has no group of MIN_GROUP_RUNS runs
    c = curves["k"]
    # Halves of 20 resolve 5% and up; the 12-run group (halves of 6) only 20% and up, where it measured 1 in 6.
    assert c["q"][0] == pytest.approx(0.05) and c["groups"][:3] == [2.0, 2.0, 3.0]  # at 5 %, 10 %, 20 %
    assert c["q"][2] == pytest.approx((0.2 + 0.2 + 1 / 6) / 3) and np.all(np.diff(c["q"]) > 0)
    # Kernels with other size columns (NaN in each other's): each still forms its groups.
    other = pd.DataFrame({"kernel": "m", "gpu": "g", "size.M": 8.0}, index=range(30))
    both = pd.concat([rows, other], ignore_index=True)
    yb = rng.normal(size=len(both))
    assert set(held_out_hit_curves(both, yb, yb)) == {"k", "m"}
    # Rows without a held-out prediction are left out.
    pred = y.copy()
    pred[: len(pred) // 2] = np.nan
    assert held_out_hit_curves(rows, pred, y)["k"]["groups"][-1] < c["groups"][-1]


def test_a_default_shortlist_of_a_small_space_is_resolved() -> None:
    # rank's default keeps 10% of the feasible configurations, rounded down: 10 of 108 (9.3 %). Groups of 30 runs
    # (halves of 15) measure the predicted-fastest 1 of 15 at f = 10 %, a share of 6.7 %: the curve reads 9.3 %.
    y = np.random.default_rng(3).normal(size=60)
    rows = pd.concat([_rows(30, size=1.0), _rows(30, size=2.0)], ignore_index=True)
    curve = held_out_hit_curves(rows, y, y)["k"]
    assert curve["q"][0] == pytest.approx(1 / 15) and hit_probability(curve, 10 / 108) == 1.0


def test_each_fraction_at_least_doubles_the_one_before() -> None:
    # What keeps a curve's measured shares strictly increasing (held_out_hit_curves; the model file refuses others):
    # once a group's k = floor(f m) is 1, doubling f adds a run.
    assert all(b >= 2 * a for a, b in zip(FRACTIONS, FRACTIONS[1:]))


def test_hit_probability_reads_the_curve() -> None:
    curve = {"q": [0.01, 0.1, 0.5], "p": [0.2, 0.6, 0.9], "groups": [1.0, 1.0, 1.0]}
    assert np.isnan(hit_probability(curve, 0.005))  # finer than measured
    assert np.isnan(hit_probability(None, 0.3))
    assert hit_probability(curve, 0.01) == pytest.approx(0.2) and hit_probability(curve, 0.1) == pytest.approx(0.6)
    assert hit_probability(curve, np.sqrt(0.01 * 0.1)) == pytest.approx(0.4)  # linear in log share
    assert hit_probability(curve, 0.75) == pytest.approx(0.95) and hit_probability(curve, 1.0) == 1.0
    shares = np.geomspace(0.01, 1, 50)
    assert np.all(np.diff([hit_probability(curve, s) for s in shares]) >= 0)


def test_the_curves_survive_the_model_file_and_malformed_ones_are_refused(tmp_path) -> None:
    from hybridperf.learn.intervals import ConformalIntervals
    from hybridperf.learn.persist import ModelFileError

    curves = {"k": {"q": [0.05, 0.1], "p": [0.5, 0.75], "groups": [2.0, 3.0]}}
    ci = ConformalIntervals(scores={"seen|0": np.array([0.5, 1.0])}, shortlist_hits=curves)
    assert ConformalIntervals.from_dict(ci.to_dict(), 10).shortlist_hits == curves
    old = ci.to_dict()
    del old["shortlist_hits"]  # a file written before the curves: none, so rank says to retrain
    assert ConformalIntervals.from_dict(old, 10).shortlist_hits is None
    empty = ConformalIntervals(scores=ci.scores, shortlist_hits={})  # measured, no group large enough
    assert ConformalIntervals.from_dict(empty.to_dict(), 10).shortlist_hits == {}
    for bad in ({"k": {"q": [0.1, 0.05], "p": [0.5, 0.75], "groups": [1, 1]}},
                {"k": {"q": [0.05, 0.1], "p": [0.8, 0.7], "groups": [1, 1]}},
                {"k": {"q": [0.05], "p": [1.5], "groups": [1]}},
                {"k": {"q": [0.05], "p": [0.5]}}, ["k"]):
        doc = {**ci.to_dict(), "shortlist_hits": bad}
        with pytest.raises(ModelFileError):
            ConformalIntervals.from_dict(doc, 10)
