"""Adaptive intervals: monotone in the size shift, wider for each reason, calibrated on held-out fits."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hybridperf.learn.domain import REASON_COLUMNS
from hybridperf.learn.intervals import ConformalIntervals, bin_keys, conformal_half_width, with_fixed_sigma
from hybridperf.learn.model import predict_rows, train_model


def _reasons(n: int, **cols) -> pd.DataFrame:
    base = {"ood_kernel": False, "ood_gpu": False, "ood_few_runs": 0, "ood_size_factor": 1.0, "ood_size_gap": 1.0,
            "ood_config": "", "ood_combination": False,
            "ood_defaulted": "", "ood_regime": False}
    base.update(cols)
    return pd.DataFrame({c: np.broadcast_to(base[c], n) for c in REASON_COLUMNS})


def _scores(scale: float, n: int = 300, seed: int = 0) -> np.ndarray:
    return np.sort(np.abs(np.random.default_rng(seed).normal(0, scale, n)))


def _intervals(**extra) -> ConformalIntervals:
    scores = {"seen|0": _scores(0.05), "seen|1": _scores(0.1, seed=1), "seen|2": _scores(0.2, seed=2),
              "gpu|0": _scores(0.3, seed=3), "few|0": _scores(0.15, seed=4), "kernel|0": _scores(2.0, seed=5),
              "seen|0|config": _scores(0.12, seed=6), "flag:regime": _scores(0.09, seed=7)}
    scores.update(extra)
    return ConformalIntervals(scores=scores, shift_ref={"seen|1": 0.5, "seen|2": 1.5})


def _hw(ci: ConformalIntervals, coverage: float = 0.9, kernel: str = "k", **reasons) -> float:
    return float(ci.half_width(np.zeros((1, 1)), _reasons(1, **reasons), pd.Series([kernel]), coverage)[0])


def test_base_quantile_is_the_conformal_quantile_and_a_kernel_bin_replaces_it() -> None:
    ci = _intervals(**{"kernel:k2": _scores(0.01, seed=8)})
    assert _hw(ci) == pytest.approx(conformal_half_width(ci.scores["seen|0"], 0.9))
    assert _hw(ci, kernel="k2") == pytest.approx(conformal_half_width(ci.scores["kernel:k2"], 0.9))
    small = _intervals(**{"kernel:k2": _scores(0.01, n=10)})  # under min_bin: not used
    assert _hw(small, kernel="k2") == pytest.approx(_hw(small))


def test_width_is_monotone_in_the_size_shift_and_grows_in_proportion_beyond_calibration() -> None:
    ci = _intervals()
    factors = np.array([1.0, 1.2, 1.5, 2.0, 3.0, 4.0, 8.0, 16.0, 64.0])
    hw = ci.half_width(np.zeros((len(factors), 1)), _reasons(len(factors), ood_size_factor=factors),
                       pd.Series(["k"] * len(factors)), 0.9)
    assert (np.diff(hw) >= -1e-12).all() and hw[-1] > hw[5] > hw[0]
    q2 = conformal_half_width(ci.scores["seen|2"], 0.9)
    assert hw[3] == pytest.approx(conformal_half_width(ci.scores["seen|1"], 0.9))  # 2x: band 1
    assert hw[5] == pytest.approx(q2)  # 4x: band 2
    assert hw[-1] == pytest.approx(q2 * np.log2(64) / 1.5)  # beyond band 2: q x shift / its median shift


def test_a_size_between_trained_sizes_is_named_but_keeps_the_in_domain_width() -> None:
    """Measured, not assumed (see ConformalIntervals): widening by the gap overcovered more cases than it mended."""
    ci = _intervals()
    assert _hw(ci, ood_size_gap=2.0) == pytest.approx(_hw(ci))
    assert _hw(ci, ood_size_factor=2.0, ood_size_gap=2.0) == pytest.approx(_hw(ci, ood_size_factor=2.0))


def test_each_reason_widens_the_interval() -> None:
    ci = _intervals()
    base = _hw(ci)
    for col, value in [("ood_gpu", True), ("ood_few_runs", 50), ("ood_kernel", True), ("ood_config", "B=3"),
                       ("ood_defaulted", "B"), ("ood_regime", True), ("ood_size_factor", 3.0)]:
        assert _hw(ci, **{col: value}) > base, col
    assert _hw(ci, ood_gpu=True) == pytest.approx(conformal_half_width(ci.scores["gpu|0"], 0.9))
    assert _hw(ci, ood_few_runs=50) == pytest.approx(conformal_half_width(ci.scores["few|0"], 0.9))
    # A flag with a bin of its own (config), with only the pooled bin (regime), with neither (defaulted: the
    # widest bin, but never the far wider leave-kernel-out one).
    assert _hw(ci, ood_config="B=3") == pytest.approx(conformal_half_width(ci.scores["seen|0|config"], 0.9))
    assert _hw(ci, ood_regime=True) == pytest.approx(conformal_half_width(ci.scores["flag:regime"], 0.9))
    widest = max(conformal_half_width(v, 0.9) for k, v in ci.scores.items() if not k.startswith("kernel"))
    assert _hw(ci, ood_defaulted="B") == pytest.approx(widest)


def test_intervals_are_nested_across_levels() -> None:
    ci = _intervals()
    factors = np.array([1.0, 3.0, 40.0, 1.0, 1.0])
    r = _reasons(5, ood_size_factor=factors, ood_gpu=np.array([False, False, False, True, False]),
                 ood_config=np.array(["", "B=3", "", "", "B=3"]))
    levels = (0.5, 0.8, 0.9, 0.95)
    hw = ci.half_widths(np.zeros((5, 1)), r, pd.Series(["k"] * 5), levels)
    assert (np.diff(hw, axis=1) >= 0).all()
    np.testing.assert_allclose(hw[:, 2], ci.half_width(np.zeros((5, 1)), r, pd.Series(["k"] * 5), 0.9))


def test_round_trip_and_older_layouts_are_refused() -> None:
    from hybridperf.learn.persist import ModelFileError

    ci = _intervals()
    back = ConformalIntervals.from_dict(ci.to_dict(), n_features=1)
    r = _reasons(3, ood_size_factor=np.array([1.0, 3.0, 9.0]), ood_gpu=np.array([False, True, False]))
    np.testing.assert_array_equal(back.half_width(np.zeros((3, 1)), r, pd.Series(["k"] * 3), 0.8),
                                  ci.half_width(np.zeros((3, 1)), r, pd.Series(["k"] * 3), 0.8))
    old = {k: v for k, v in ci.to_dict().items() if k != "version"}
    with pytest.raises(ModelFileError, match="older layout"):
        ConformalIntervals.from_dict(old, n_features=1)


def _synthetic_sweep(seed: int = 0) -> pd.DataFrame:
    """vecadd-like runs: the TITAN V seed 004 shape plus a size-dependent error the baseline misses."""
    rng = np.random.default_rng(seed)
    n = np.geomspace(2**14, 2**26, 400).round()
    t = 1e-6 * n * (1 + 0.4 * np.sin(np.log2(n))) * np.exp(rng.normal(0, 0.05, len(n))) + 0.004
    return pd.DataFrame({"kernel": "seed004-vecadd", "gpu": "titan-v", "size.N": n, "time_ms": t, "status": "ok"})


def test_coverage_holds_on_sizes_the_calibration_never_saw() -> None:
    data = _synthetic_sweep()
    train, test = data[data["size.N"] <= 2**22], data[data["size.N"] > 2**22]  # up to 16x beyond
    model = train_model(train, booster_params={"n_estimators": 60})
    ci = model.intervals  # a kernel never trained takes the training rows' median difficulty, as a new GPU does
    assert ci.sigma_unseen_kernel is not None and ci.sigma_unseen_kernel == ci.sigma_unseen_gpu
    pred = predict_rows(model, test, coverage=0.9)
    y = test["time_ms"].to_numpy()
    inside = (y >= pred.lo_ms.to_numpy()) & (y <= pred.hi_ms.to_numpy())
    assert inside.mean() >= 0.8  # nominal 90%, on a shift beyond what the forward fits saw
    width = np.log(pred.hi_ms / pred.lo_ms).to_numpy()
    assert (np.diff(width[np.argsort(test["size.N"].to_numpy())]) >= -1e-9).all()  # wider further out
    inside_rows = predict_rows(model, train.sample(40, random_state=0), coverage=0.9)
    assert np.median(np.log(inside_rows.hi_ms / inside_rows.lo_ms)) < np.median(width)


def test_a_flag_beyond_its_own_bands_keeps_its_excess_over_the_main_curve() -> None:
    ci = _intervals(**{"seen|1|regime": _scores(0.3, seed=9)})
    ci = ConformalIntervals(scores=ci.scores, shift_ref={"seen|1": 0.5, "seen|2": 1.5, "seen|1|regime": 0.5})
    q1r, q1 = conformal_half_width(ci.scores["seen|1|regime"], 0.9), conformal_half_width(ci.scores["seen|1"], 0.9)
    for factor in (6.0, 40.0):  # bands 3 and 4: beyond the flag's band 1 and the main curve's band 2
        main = _hw(ci, ood_size_factor=factor)
        assert _hw(ci, ood_size_factor=factor, ood_regime=True) == pytest.approx(main * q1r / q1)


def test_a_config_never_trained_raises_the_interval_inside_the_trained_sizes_only() -> None:
    """Beyond the trained sizes a config value never trained takes the main size curve: its bins there come from
    forward fits on the smallest sizes, where every tile is new (see ConformalIntervals)."""
    ci = _intervals(**{"seen|1|config": _scores(0.3, seed=9), "seen|2|config": _scores(0.6, seed=10)})
    assert _hw(ci, ood_config="B=3") == pytest.approx(conformal_half_width(ci.scores["seen|0|config"], 0.9))
    assert _hw(ci, ood_config="B=3") > _hw(ci)
    for factor in (1.5, 3.0, 40.0):  # bands 1, 2 and 4
        assert _hw(ci, ood_size_factor=factor, ood_config="B=3") == pytest.approx(_hw(ci, ood_size_factor=factor))


class _LogSigmaIsColumn0:
    """A difficulty model whose log sigma is the first design column (a stand-in for the booster)."""

    def predict(self, X: np.ndarray) -> np.ndarray:
        return X[:, 0]


def test_a_gpu_never_trained_on_takes_the_typical_difficulty_not_its_own() -> None:
    """The difficulty model never saw an unseen GPU's fields: its rows get sigma_unseen_gpu, others their own."""
    ci = ConformalIntervals(scores=_intervals().scores, difficulty=_LogSigmaIsColumn0(), difficulty_columns=(0,),
                            sigma_unseen_gpu=0.5)
    X = np.log(np.array([[4.0], [4.0], [4.0]]))
    r = _reasons(3, ood_gpu=np.array([False, True, True]), ood_kernel=np.array([False, False, True]))
    hw = ci.half_width(X, r, pd.Series(["k"] * 3), 0.9)
    assert hw[0] == pytest.approx(ci.quantile("seen|0", 0.9) * 4.0)
    assert hw[1] == pytest.approx(ci.quantile("gpu|0", 0.9) * 0.5)
    assert hw[2] == pytest.approx(ci.quantile("kernel|0", 0.9) * 4.0)  # an unseen kernel is its own shift
    plain = ConformalIntervals(scores=ci.scores, difficulty=_LogSigmaIsColumn0(), difficulty_columns=(0,))
    assert plain.half_width(X, r, pd.Series(["k"] * 3), 0.9)[1] == pytest.approx(ci.quantile("gpu|0", 0.9) * 4.0)
    doc = {**_intervals().to_dict(), "sigma_unseen_gpu": 0.5}
    assert ConformalIntervals.from_dict(doc, n_features=1).sigma_unseen_gpu == 0.5
    older = {k: v for k, v in doc.items() if k != "sigma_unseen_gpu"}  # files written before it: own difficulty
    assert ConformalIntervals.from_dict(older, n_features=1).sigma_unseen_gpu is None
    from hybridperf.learn.persist import ModelFileError

    with pytest.raises(ModelFileError, match="sigma_unseen_gpu"):
        ConformalIntervals.from_dict({**doc, "sigma_unseen_gpu": -1.0}, n_features=1)


def test_a_gpu_with_few_runs_takes_its_own_fixed_difficulty() -> None:
    """A few-runs GPU's rows get sigma_few_runs (both fixed values apply, each to its own shift)."""
    ci = ConformalIntervals(scores=_intervals().scores, difficulty=_LogSigmaIsColumn0(), difficulty_columns=(0,),
                            sigma_unseen_gpu=0.5, sigma_few_runs=0.25)
    X = np.log(np.array([[4.0], [4.0], [4.0]]))
    r = _reasons(3, ood_gpu=np.array([False, True, False]), ood_few_runs=np.array([0, 0, 50]))
    hw = ci.half_width(X, r, pd.Series(["k"] * 3), 0.9)
    assert hw[0] == pytest.approx(ci.quantile("seen|0", 0.9) * 4.0)
    assert hw[1] == pytest.approx(ci.quantile("gpu|0", 0.9) * 0.5)
    assert hw[2] == pytest.approx(ci.quantile("few|0", 0.9, min_bin=1) * 0.25)
    np.testing.assert_allclose(ci.sigma(X, r), [4.0, 0.5, 0.25])
    only_gpu = ConformalIntervals(scores=ci.scores, difficulty=_LogSigmaIsColumn0(), difficulty_columns=(0,),
                                  sigma_unseen_gpu=0.5)
    np.testing.assert_allclose(only_gpu.sigma(X, r), [4.0, 0.5, 4.0])
    _check_fixed_sigma_in_files("sigma_few_runs", 0.25)


def _check_fixed_sigma_in_files(key: str, value: float) -> None:
    """A fixed difficulty ``key`` round-trips through the model file, files written before it load as None (the
    row's own difficulty), and a malformed value is refused."""
    from hybridperf.learn.persist import ModelFileError

    doc = {**_intervals().to_dict(), key: value}
    assert getattr(ConformalIntervals.from_dict(doc, n_features=1), key) == value
    older = {k: v for k, v in doc.items() if k != key}
    assert getattr(ConformalIntervals.from_dict(older, n_features=1), key) is None
    for bad in (0.0, -1.0, True, "x"):
        with pytest.raises(ModelFileError, match=key):
            ConformalIntervals.from_dict({**doc, key: bad}, n_features=1)


def test_a_row_beyond_the_trained_sizes_takes_the_fixed_difficulty() -> None:
    """A trained GPU's row beyond the trained sizes gets at least sigma_beyond_sizes (the difficulty model would
    repeat that of the largest trained sizes); inside them, and on an unseen GPU, the other rules hold."""
    ci = ConformalIntervals(scores=_intervals().scores, difficulty=_LogSigmaIsColumn0(), difficulty_columns=(0,),
                            sigma_unseen_gpu=0.5, sigma_beyond_sizes=2.0)
    X = np.log(np.array([[4.0], [1.0], [1.0], [4.0], [1.0]]))
    r = _reasons(5, ood_size_factor=np.array([1.0, 3.0, 40.0, 3.0, 3.0]),
                 ood_gpu=np.array([False, False, False, False, True]))
    np.testing.assert_allclose(ci.sigma(X, r), [4.0, 2.0, 2.0, 4.0, 0.5])  # a harder row keeps its own
    hw = ci.half_width(X, r, pd.Series(["k"] * 5), 0.9)
    assert hw[1] == pytest.approx(ci.quantile("seen|2", 0.9) * 2.0)
    plain = ConformalIntervals(scores=ci.scores, difficulty=_LogSigmaIsColumn0(), difficulty_columns=(0,),
                               sigma_unseen_gpu=0.5)
    np.testing.assert_allclose(plain.sigma(X, r), [4.0, 1.0, 1.0, 4.0, 0.5])
    _check_fixed_sigma_in_files("sigma_beyond_sizes", 0.2)


def test_the_open_last_band_grows_beyond_its_own_scores() -> None:
    """Band 4 holds every factor over 8x: its scores, from fits about 9x out, cover a row 9x out as they are
    and one 32x out in proportion to the log2 shift (the assumption of the other bands beyond their scores)."""
    ci = ConformalIntervals(scores={"seen|0": _scores(0.05), "seen|4": _scores(0.3, seed=1)},
                            shift_ref={"seen|4": np.log2(9.0)})
    q4 = conformal_half_width(ci.scores["seen|4"], 0.9)
    assert _hw(ci, ood_size_factor=9.0) == pytest.approx(q4)
    assert _hw(ci, ood_size_factor=8.5) == pytest.approx(q4)  # below its median shift: the band's level
    assert _hw(ci, ood_size_factor=32.0) == pytest.approx(q4 * 5.0 / np.log2(9.0))
    factors = np.geomspace(8.01, 1024.0, 20)
    hw = ci.half_width(np.zeros((20, 1)), _reasons(20, ood_size_factor=factors), pd.Series(["k"] * 20), 0.9)
    assert (np.diff(hw) >= -1e-12).all()


def test_a_kernel_never_trained_takes_its_own_fixed_difficulty() -> None:
    """The difficulty model never saw an unseen kernel's id or parameters: its rows get sigma_unseen_kernel, both in
    prediction and (through with_fixed_sigma) in the calibration scores of the leave-kernel-out fits."""
    ci = ConformalIntervals(scores=_intervals().scores, difficulty=_LogSigmaIsColumn0(), difficulty_columns=(0,),
                            sigma_unseen_gpu=0.5, sigma_unseen_kernel=0.125)
    X = np.log(np.array([[4.0], [4.0], [4.0]]))
    r = _reasons(3, ood_gpu=np.array([False, True, True]), ood_kernel=np.array([False, False, True]))
    hw = ci.half_width(X, r, pd.Series(["k"] * 3), 0.9)
    assert hw[0] == pytest.approx(ci.quantile("seen|0", 0.9) * 4.0)
    assert hw[1] == pytest.approx(ci.quantile("gpu|0", 0.9) * 0.5)
    assert hw[2] == pytest.approx(ci.quantile("kernel|0", 0.9) * 0.125)
    np.testing.assert_allclose(with_fixed_sigma(np.full(3, 4.0), r, 0.5, None, None, 0.125), [4.0, 0.5, 0.125])
    _check_fixed_sigma_in_files("sigma_unseen_kernel", 0.125)


def test_beyond_the_trained_sizes_a_kernel_with_forward_scores_takes_its_own_curve() -> None:
    """Mondrian by kernel beyond a trained GPU's sizes: a kernel whose own forward scores fill a band and lie above
    the pooled curve takes their quantile there, beyond its last scored band growing as the pooled curve does; one
    whose own scores lie below it, or without enough scores, keeps the pooled curve (widen only: see
    ConformalIntervals)."""
    ci = _intervals(**{"kernel:hard|1": _scores(0.4, seed=9), "kernel:easy|1": _scores(0.02, seed=10),
                       "kernel:rare|1": _scores(0.4, n=10, seed=11)})
    q1, q2 = (conformal_half_width(ci.scores[f"seen|{b}"], 0.9) for b in (1, 2))
    hard = conformal_half_width(ci.scores["kernel:hard|1"], 0.9)
    easy = conformal_half_width(ci.scores["kernel:easy|1"], 0.9)
    assert _hw(ci, kernel="k", ood_size_factor=2.0) == pytest.approx(q1)
    assert _hw(ci, kernel="rare", ood_size_factor=2.0) == pytest.approx(q1)  # 10 scores: under min_bin
    assert _hw(ci, kernel="hard", ood_size_factor=2.0) == pytest.approx(hard) and hard > 2 * q1
    assert easy < q1 and _hw(ci, kernel="easy", ood_size_factor=2.0) == pytest.approx(q1)
    # 4x (band 2, no scores of its own): the band-1 level times the pooled curve's growth from band 1 to band 2
    assert _hw(ci, kernel="hard", ood_size_factor=4.0) == pytest.approx(hard * q2 / q1)
    factors = np.array([1.0, 1.3, 2.0, 3.0, 4.0, 8.0, 64.0])
    for kernel in ("hard", "easy", "k"):
        hw = ci.half_width(np.zeros((len(factors), 1)), _reasons(len(factors), ood_size_factor=factors),
                           pd.Series([kernel] * len(factors)), 0.9)
        assert (np.diff(hw) >= -1e-12).all()


def test_forward_scores_of_a_trained_gpu_also_key_their_kernels_bin() -> None:
    r = _reasons(3, ood_size_factor=np.array([1.0, 3.0, 3.0]), ood_gpu=np.array([False, False, True]))
    keys = bin_keys(r, pd.Series(["a", "a", "a"]))
    assert keys[0] == ["seen|0", "kernel:a"]
    assert keys[1] == ["seen|2", "kernel:a|2"]
    assert keys[2] == ["gpu|2"]  # a GPU never trained on keeps its own curve
