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
    # Halves of 200 runs resolve a share down to 1 run of 200 (rounded down, never a larger share than asked).
    assert perfect["q"] == [q for q in FRACTIONS if np.floor(q * 200) >= 1]


def test_a_random_order_keeps_the_fastest_in_proportion_to_the_share() -> None:
    """Over random predictions the fastest of a half is equally likely at any predicted rank: k / m."""
    rng = np.random.default_rng(1)
    n, draws = 400, 300
    curves = [held_out_hit_curves(_rows(n), rng.normal(size=n), rng.normal(size=n), random_state=i)["k"]
              for i in range(draws)]
    q = np.asarray(curves[0]["q"])
    expected = np.floor(q * (n // 2)) / (n // 2)
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
    # Halves of 20 resolve 5% and up; the 12-run group (halves of 6) only 20% and up: it counts there alone.
    assert c["q"][0] == 0.05 and c["groups"][0] == 2 and c["groups"][c["q"].index(0.2)] == 3
    # Kernels with other size columns (NaN in each other's): each still forms its groups.
    other = pd.DataFrame({"kernel": "m", "gpu": "g", "size.M": 8.0}, index=range(30))
    both = pd.concat([rows, other], ignore_index=True)
    yb = rng.normal(size=len(both))
    assert set(held_out_hit_curves(both, yb, yb)) == {"k", "m"}
    # Rows without a held-out prediction are left out.
    pred = y.copy()
    pred[: len(pred) // 2] = np.nan
    assert held_out_hit_curves(rows, pred, y)["k"]["groups"][-1] < c["groups"][-1]


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
