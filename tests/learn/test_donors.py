"""Donor stacks: a GPU with few runs of a kernel predicted through the kernel's well-trained GPUs."""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from hybridperf.datasets import load_dataset
from hybridperf.learn.donors import (
    MIN_STACK_RUNS,
    DonorStack,
    apply_donor_stacks,
    few_run_pairs,
    fit_donor_stack,
    stacks_from_dict,
    stacks_to_dict,
)
from hybridperf.learn.model import TrainedModel, fit_model, load_model, make_model, predict_rows
from hybridperf.learn.persist import ModelFileError
from hybridperf.sweep import training_rows


def test_fit_recovers_known_weights_and_level() -> None:
    rng = np.random.default_rng(0)
    own, d1, d2 = rng.normal(size=(3, 200))
    logy = 0.25 + 0.3 * own + 0.7 * d1 + rng.normal(scale=0.01, size=200)
    weights, level = fit_donor_stack(logy, own, np.column_stack([d1, d2]))
    np.testing.assert_allclose(weights, [0.3, 0.7, 0.0], atol=0.02)
    assert level == pytest.approx(0.25, abs=0.02)


def test_fit_declines_few_rows_and_an_own_prediction_that_explains_all() -> None:
    rng = np.random.default_rng(1)
    own, d1 = rng.normal(size=(2, 100))
    assert fit_donor_stack(own[: MIN_STACK_RUNS - 1], own[: MIN_STACK_RUNS - 1], d1[: MIN_STACK_RUNS - 1, None]) is None
    assert fit_donor_stack(own + 0.1, own, d1[:, None]) is None  # the donor adds nothing: no stack
    # rows a donor cannot predict (NaN) are left out of the fit, not propagated
    d = np.where(np.arange(100) < 5, np.nan, own)
    weights, level = fit_donor_stack(own, 0.5 * own + rng.normal(scale=0.5, size=100), d[:, None])
    assert np.isfinite(weights).all() and weights[1] > 0.9 and abs(level) < 0.05


def test_few_run_pairs_against_counting_by_hand() -> None:
    kernels = np.array(["k"] * 250 + ["j"] * 170)
    gpus = np.array(["a"] * 200 + ["b"] * 12 + ["c"] * 38 + ["a"] * 150 + ["b"] * 9 + ["c"] * 11)
    found = {(k, g): (list(pos), donors) for k, g, pos, donors in few_run_pairs(kernels, gpus)}
    # kernel k: a has 200 runs, a tenth of it 20: b (12) is few, c (38) is not, and both a and c are donors;
    # kernel j: a has 150, a tenth 15: b (9) and c (11) are few, b under MIN_STACK_RUNS; a alone is a donor
    assert MIN_STACK_RUNS == 10
    assert set(found) == {("k", "b"), ("j", "c")}
    assert found[("k", "b")] == (list(range(200, 212)), ["a", "c"])
    assert found[("j", "c")] == (list(range(409, 420)), ["a"])


def test_apply_combines_in_log_space_and_keeps_own_where_a_donor_cannot_predict() -> None:
    rows = pd.DataFrame({"kernel": ["k", "k", "k", "j"], "gpu": ["b", "b", "a", "b"]})
    stack = DonorStack(donors=("a",), weights=(0.25, 0.75), level=0.1)
    own = np.log(np.array([1.0, 2.0, 3.0, 4.0]))
    donor = {0: np.log(4.0), 1: np.nan}  # the second row cannot launch on the donor

    def on_donor(r: pd.DataFrame) -> np.ndarray:
        assert (r["gpu"] == "a").all() and len(r) == 2
        return np.array([donor[0], donor[1]])

    out = apply_donor_stacks({("k", "b"): stack}, rows, own, on_donor)
    assert out[0] == pytest.approx(0.1 + 0.25 * np.log(1.0) + 0.75 * np.log(4.0))
    np.testing.assert_array_equal(out[1:], own[1:])  # NaN donor, another GPU, another kernel: unchanged


def test_stacks_round_trip_and_malformed_ones_refused() -> None:
    stacks = {("k", "b"): DonorStack(donors=("a", "c"), weights=(0.2, 0.5, 0.3), level=-0.04)}
    assert stacks_from_dict(stacks_to_dict(stacks)) == stacks
    good = stacks_to_dict(stacks)[0]
    for bad in ({**good, "weights": [0.2, 0.8]}, {**good, "donors": ["b", "a"]}, {**good, "weights": [0.2, 0.2, 0.2]},
                {**good, "donors": ["a", "a"]}):
        with pytest.raises(ModelFileError):
            stacks_from_dict([bad])
    with pytest.raises(ModelFileError):
        stacks_from_dict([good, good])


@pytest.fixture(scope="module")
def s4_model() -> tuple[TrainedModel, pd.DataFrame, pd.DataFrame]:
    """CLBlast Xgemm as S4 at small scale: 1,500 runs of each RTX 2080 Ti and 3060 laptop, 40 of the TITAN RTX."""
    rows = training_rows(load_dataset("kt-gemm-rtx")).reset_index(drop=True)
    rng = np.random.default_rng(0)
    gpu = rows["gpu"].to_numpy()
    pick = np.concatenate([rng.choice(np.flatnonzero(gpu == g), n, replace=False)
                           for g, n in (("geforce-rtx-2080-ti", 1500), ("geforce-rtx-3060-laptop", 1500),
                                        ("titan-rtx", 40))])
    train = rows.iloc[pick]
    rest = rows.drop(index=pick)
    test = rest[rest["gpu"] == "titan-rtx"].sample(1500, random_state=0)
    model = fit_model(make_model(random_state=0), train, train["time_ms"].to_numpy(), random_state=0)
    return model, test, rest[rest["gpu"] == "geforce-rtx-2080-ti"].sample(200, random_state=0)


@pytest.mark.slow
def test_s4_stack_fitted_and_better_than_the_own_prediction(s4_model, tmp_path) -> None:
    model, test, trained = s4_model
    stacks = model.intervals.donor_stacks
    assert list(stacks) == [("clblast-xgemm", "titan-rtx")]
    stack = stacks[("clblast-xgemm", "titan-rtx")]
    assert stack.donors == ("geforce-rtx-2080-ti", "geforce-rtx-3060-laptop")
    assert sum(stack.weights) == pytest.approx(1.0) and min(stack.weights) >= 0
    own = TrainedModel(pipeline=model.pipeline, intervals=dataclasses.replace(model.intervals, donor_stacks={}))
    y = test["time_ms"].to_numpy()
    stacked, alone = predict_rows(model, test, check=False), predict_rows(own, test, check=False)
    mape = {k: float(np.mean(np.abs(p["time_ms"].to_numpy() / y - 1))) for k, p in (("stacked", stacked),
                                                                                      ("own", alone))}
    # the TITAN RTX and the RTX 2080 Ti are one chip (TU102): its 40 runs do not teach the shape the 2080 Ti's do
    assert mape["stacked"] < 0.8 * mape["own"], mape
    # the stack, recomputed from the model's own predictions of the same rows on each GPU
    parts = [np.log(alone["time_ms"].to_numpy())] + [
        np.log(predict_rows(own, test.assign(gpu=d), check=False)["time_ms"].to_numpy()) for d in stack.donors]
    np.testing.assert_allclose(np.log(stacked["time_ms"].to_numpy()),
                               stack.level + np.column_stack(parts) @ np.asarray(stack.weights), rtol=1e-9)
    # the interval moves with the time
    np.testing.assert_allclose(stacked["hi_ms"] / stacked["time_ms"], stacked["time_ms"] / stacked["lo_ms"],
                               rtol=1e-9)
    # a well-trained GPU's rows keep the model's own prediction
    np.testing.assert_array_equal(predict_rows(model, trained, check=False)["time_ms"],
                                  predict_rows(own, trained, check=False)["time_ms"])
    # the model file keeps the stacks
    back = load_model(model.save(tmp_path / "s4.json"))
    assert back.intervals.donor_stacks == stacks
    np.testing.assert_allclose(predict_rows(back, test, check=False)["time_ms"], stacked["time_ms"], rtol=1e-12)


def _stack_table(rng: np.random.Generator, runs: int) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    """A kernel with donor GPUs ``a``, ``c``, ``d`` (each over 10x the runs) and a GPU ``b`` with ``runs`` runs, each
    held out once (family ``few``): truth z, log time 0.2 + z, the own prediction and the three donors' predictions
    z plus noise of their own. Rows: the donors' runs, then b's."""
    donor_runs = 10 * runs + 10
    rows = pd.DataFrame({"kernel": "k", "gpu": ["a"] * donor_runs + ["c"] * donor_runs + ["d"] * donor_runs
                         + ["b"] * runs})
    z = rng.normal(size=runs)
    logy = np.concatenate([np.zeros(3 * donor_runs), 0.2 + z + rng.normal(scale=0.05, size=runs)])
    own = z + rng.normal(scale=0.3, size=runs)
    table = pd.DataFrame({"family": "few", "row": np.arange(3 * donor_runs, 3 * donor_runs + runs),
                          "residual": logy[3 * donor_runs:] - own})
    for name, sd in (("a", 0.1), ("c", 0.2), ("d", 0.25)):
        table[f"donor:{name}"] = z + rng.normal(scale=sd, size=runs)
    return rows, table, logy


def test_stack_scores_each_run_without_it_so_intervals_cover_fresh_runs() -> None:
    from hybridperf.learn.uncertainty import _donor_stacks

    # conformal validity (Vovk et al. 2005; jackknife+, Barber et al. 2021): the quantile of the runs' scores
    # covers a fresh run of the same GPU 90 % of the time on average over draws. Scored by the stack fitted on
    # them (a level and three weights on 20 runs) the runs look closer than fresh ones and cover about 84 %.
    rng = np.random.default_rng(0)
    runs, cover, insample = 20, [], []
    k = int(np.ceil((runs + 1) * 0.9))  # the conformal rank of a 90 % interval from 20 scores
    for _ in range(300):
        rows, table, logy = _stack_table(rng, runs)
        stacks, out = _donor_stacks(table, rows, logy)
        stack = stacks[("k", "b")]
        assert stack.donors == ("a", "c", "d")
        q = np.sort(np.abs(out["residual"].to_numpy()))[k - 1]
        z = rng.normal(size=5000)  # fresh runs of b, predicted by the stack fitted on all 20
        fresh_y = 0.2 + z + rng.normal(scale=0.05, size=5000)
        parts = [z + rng.normal(scale=sd, size=5000) for sd in (0.3, 0.1, 0.2, 0.25)]
        err = fresh_y - (stack.level + np.column_stack(parts) @ np.asarray(stack.weights))
        cover.append(np.mean(np.abs(err) <= q))
        # the same quantile of the residuals under the stack of all the runs, for contrast
        own = logy[table["row"]] - table["residual"].to_numpy()
        fitted = stack.level + np.column_stack([own, table[["donor:a", "donor:c", "donor:d"]].to_numpy()]) @ np.asarray(
            stack.weights)
        insample.append(np.mean(np.abs(err) <= np.sort(np.abs(logy[table["row"]] - fitted))[k - 1]))
    assert 0.885 <= np.mean(cover) <= 0.93, np.mean(cover)
    assert np.mean(insample) < np.mean(cover) - 0.015, (np.mean(insample), np.mean(cover))


def test_stack_scores_leave_each_run_out_up_to_the_fold_count() -> None:
    from hybridperf.learn.uncertainty import _STACK_SCORE_FOLDS, _donor_stacks

    # brute force: each run's residual under the stack fitted on the other runs alone
    runs = 40
    assert runs <= _STACK_SCORE_FOLDS
    rows, table, logy = _stack_table(np.random.default_rng(3), runs)
    _, out = _donor_stacks(table, rows, logy)
    y = logy[table["row"].to_numpy()]
    own = y - table["residual"].to_numpy()
    donors = table[["donor:a", "donor:c", "donor:d"]].to_numpy()
    expect = []
    for i in range(runs):
        others = np.arange(runs) != i
        weights, level = fit_donor_stack(y[others], own[others], donors[others])
        expect.append(y[i] - (level + np.r_[own[i], donors[i]] @ np.asarray(weights)))
    np.testing.assert_allclose(out["residual"].to_numpy(), expect, rtol=1e-12)
    # beyond the fold count (folds of runs left out) every run still gets one finite score
    rows, table, logy = _stack_table(np.random.default_rng(4), 3 * _STACK_SCORE_FOLDS)
    _, out = _donor_stacks(table, rows, logy)
    assert len(out) == 3 * _STACK_SCORE_FOLDS and np.isfinite(out["residual"]).all()
