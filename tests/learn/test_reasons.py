"""Each out-of-domain reason on real runs: the flag fires where it should, alone, and widens the interval.

A model is trained on a slice of the NeuSight GEMM runs (T4 and V100 with max(M, N, K) <= 1024, no 32-wide
tiles, one MWP-CWP regime; 30 runs of the P4) and probed with real runs that each lie outside it for one reason.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hybridperf.datasets import load_dataset
from hybridperf.learn.domain import DEFAULTED_COLUMN, REASON_COLUMNS, out_of_domain
from hybridperf.learn.features import analytical_features
from hybridperf.learn.model import predict_rows, train_model

pytestmark = pytest.mark.slow
_DIMS = ["size.M", "size.N", "size.K"]
_CLEAR = {"ood_kernel": False, "ood_gpu": False, "ood_few_runs": 0, "ood_size_factor": 1.0, "ood_size_gap": 1.0,
          "ood_config": "",
          "ood_defaulted": "", "ood_regime": False}


@pytest.fixture(scope="module")
def gemm() -> pd.DataFrame:
    data = load_dataset("neusight-gemm")
    data = data[data["status"] == "ok"].reset_index(drop=True)
    return data.assign(regime=analytical_features(data)["regime"].to_numpy())


def _inside(df: pd.DataFrame) -> pd.Series:
    return (df[_DIMS].max(axis=1) <= 1024) & (df["config.TILE_M"] > 32) & (df["regime"] == 22)


@pytest.fixture(scope="module")
def train(gemm: pd.DataFrame) -> pd.DataFrame:
    ok = gemm[_inside(gemm)]
    return pd.concat([ok[ok.gpu == "tesla-t4"].sample(900, random_state=0),
                      ok[ok.gpu == "tesla-v100-pcie-32gb"].sample(900, random_state=1),
                      ok[ok.gpu == "tesla-p4"].sample(30, random_state=2)])


@pytest.fixture(scope="module")
def model(train: pd.DataFrame):
    return train_model(train.drop(columns="regime"), booster_params={"n_estimators": 60, "n_jobs": 1})


def _within_trained_sizes(rows: pd.DataFrame, train: pd.DataFrame) -> pd.Series:
    cols = ["size.B", *_DIMS]
    return ((rows[cols] >= train[cols].min()) & (rows[cols] <= train[cols].max())).all(axis=1)


def _probe(model, rows: pd.DataFrame, reason: str) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """(reasons, 90% half widths, half widths with ``reason`` cleared) of real rows."""
    rows = rows.drop(columns="regime", errors="ignore").reset_index(drop=True)
    feats = analytical_features(rows)
    X = model.features.transform(rows, features=feats)
    reasons = out_of_domain(rows, model.features.domain_, feats["regime"].to_numpy())
    width = model.intervals.half_width(X, reasons, rows["kernel"], 0.9)
    cleared = model.intervals.half_width(X, reasons.assign(**{reason: _CLEAR[reason]}), rows["kernel"], 0.9)
    pred = predict_rows(model, rows, 0.9)
    shown = np.log(pred["hi_ms"] / pred["time_ms"]).to_numpy()
    if reason == "ood_kernel":  # trained on one kernel: no leave-kernel-out fit measured this shift
        assert np.isinf(shown).all()
    else:
        np.testing.assert_allclose(shown, width, rtol=1e-9)
    return reasons, width, cleared


def _only(reasons: pd.DataFrame, reason: str) -> None:
    """``reason`` fires on every row and no other reason on any (the size factor and gap count from 1)."""
    for col in REASON_COLUMNS:
        v = reasons[col]
        if col in ("ood_size_factor", "ood_size_gap"):
            fired = v > 1
        else:
            fired = v.astype(bool) if v.dtype == bool else v != _CLEAR[col]
        assert fired.all() if col == reason else not fired.any(), col


def test_in_domain_rows_have_no_reason(model, gemm) -> None:
    rows = gemm[_inside(gemm) & (gemm.gpu == "tesla-t4")].sample(50, random_state=9)
    pred = predict_rows(model, rows.drop(columns="regime"))
    assert not pred["out_of_domain"].any() and (pred["ood_reason"] == "").all()


def test_size_beyond_the_trained_range(model, gemm) -> None:
    big = gemm[(gemm.gpu == "tesla-t4") & (gemm[_DIMS].max(axis=1) > 1024) & (gemm["config.TILE_M"] > 32)
               & (gemm["regime"] == 22) & (gemm["config.SPLITK"] == 1)].sample(60, random_state=3)
    reasons, width, cleared = _probe(model, big, "ood_size_factor")
    _only(reasons, "ood_size_factor")
    np.testing.assert_allclose(reasons["ood_size_factor"], big[_DIMS].max(axis=1).to_numpy() / 1024, rtol=0.02)
    assert width.mean() > cleared.mean()
    # Beyond the trained sizes a row's difficulty is at least the fixed sigma_beyond_sizes; over its difficulty,
    # the width grows with the size factor alone.
    rows = big.drop(columns="regime").reset_index(drop=True)
    sigma = model.intervals.sigma(model.features.transform(rows, features=analytical_features(rows)), reasons)
    assert (sigma >= model.intervals.sigma_beyond_sizes - 1e-12).all()
    order = np.argsort(reasons["ood_size_factor"].to_numpy())
    assert (np.diff((width / sigma)[order]) >= -1e-9).all()


def test_gpu_never_trained(model, train, gemm) -> None:
    a100 = gemm[_inside(gemm) & (gemm.gpu == "a100-pcie-40gb") & (gemm["config.SPLITK"] == 1)]
    rows = a100[_within_trained_sizes(a100, train)].sample(40, random_state=4)
    reasons, width, cleared = _probe(model, rows, "ood_gpu")
    _only(reasons, "ood_gpu")
    # Scaled by the fixed difficulty of a GPU never trained (sigma_unseen_gpu, the training rows' median), by its
    # bin's quantile, wider than the in-domain bins'. Row by row `cleared` is no in-domain width: it takes the
    # difficulty model's estimate on the A100's fields, which it never saw (the reason for the fixed difficulty).
    ci = model.intervals
    np.testing.assert_allclose(width, ci.quantile("gpu|0", 0.9) * ci.sigma_unseen_gpu, rtol=1e-9)
    in_domain = [q for q in (ci.quantile("seen|0", 0.9), ci.quantile("kernel:neusight-gemm", 0.9)) if np.isfinite(q)]
    assert in_domain and ci.quantile("gpu|0", 0.9) > max(in_domain)
    assert width.mean() > cleared.mean()


def test_gpu_with_few_runs(model, gemm) -> None:
    rows = gemm[_inside(gemm) & (gemm.gpu == "tesla-p4")].sample(40, random_state=5)
    reasons, width, cleared = _probe(model, rows, "ood_few_runs")
    _only(reasons, "ood_few_runs")
    assert (reasons["ood_few_runs"] == 30).all()
    # Calibrated by the GPU's own 30 runs, held out (wider or not, as they say), not by the other GPUs' runs.
    ci = model.intervals
    assert len(ci.scores["few|0"]) >= 30  # its 30 runs from the few-runs folds (and the random folds: again)
    X = model.features.transform(rows.drop(columns="regime"))
    # Scaled by the fixed difficulty of a few-runs GPU, the same in calibration (sigma_few_runs: the training rows'
    # median), not the difficulty model's estimate from the GPU's few residuals.
    assert ci.sigma_few_runs is not None and not np.allclose(ci.sigma(X), ci.sigma_few_runs)
    np.testing.assert_allclose(width, ci.quantile("few|0", 0.9, min_bin=1) * ci.sigma_few_runs, rtol=1e-6)
    assert not np.allclose(width, cleared)


def test_kernel_never_trained(model) -> None:
    rows = load_dataset("titanv-seed004").query("kernel == 'seed004-vecadd'")
    reasons, width, cleared = _probe(model, rows, "ood_kernel")
    _only(reasons, "ood_kernel")
    assert (width > cleared).all()


def test_config_value_never_trained(model, gemm) -> None:
    rows = gemm[(gemm.gpu == "tesla-t4") & (gemm["config.TILE_M"] == 32) & (gemm[_DIMS].max(axis=1) <= 1024)
                & (gemm["regime"] == 22) & (gemm["config.TILE_N"] > 32)].head(30)
    reasons, width, cleared = _probe(model, rows, "ood_config")
    _only(reasons, "ood_config")
    assert reasons["ood_config"].str.contains("TILE_M=32").all() and (width >= cleared).all()
    assert width.mean() > cleared.mean()


def test_config_defaulted_by_the_importer_or_marked(model, gemm) -> None:
    # Real P4 runs whose cuBLAS kernel name carries no tile the importer can read: their config is empty.
    generic = gemm[(gemm.gpu == "tesla-t4") | (gemm.gpu == "tesla-p4")]
    generic = generic[generic["config.TILE_M"].isna() & (generic[_DIMS].max(axis=1) <= 1024)]
    assert len(generic) >= 5
    reasons, width, cleared = _probe(model, generic, "ood_defaulted")
    assert reasons["ood_defaulted"].str.contains("TILE_M").all() and (width >= cleared).all()
    assert width.mean() > cleared.mean()
    # A row whose config values are filled in but marked defaulted by an importer (info.defaulted).
    rows = gemm[_inside(gemm) & (gemm.gpu == "tesla-t4")].sample(20, random_state=6)
    marked = rows.assign(**{DEFAULTED_COLUMN: "THREADS"})
    reasons, width, cleared = _probe(model, marked, "ood_defaulted")
    _only(reasons, "ood_defaulted")
    assert (reasons["ood_defaulted"] == "THREADS").all() and (width > cleared).all()
    assert not _probe(model, rows, "ood_defaulted")[0]["ood_defaulted"].astype(bool).any()


def test_analytical_regime_never_seen(model, gemm) -> None:
    rows = gemm[(gemm.gpu == "tesla-t4") & (gemm["regime"] != 22) & (gemm[_DIMS].max(axis=1) <= 1024)
                & (gemm["config.TILE_M"] > 32)].sample(30, random_state=7)
    reasons, width, cleared = _probe(model, rows, "ood_regime")
    _only(reasons, "ood_regime")
    assert (width >= cleared).all() and width.mean() > cleared.mean()


def test_kernel_never_trained_by_a_model_of_several_kernels_has_the_measured_interval() -> None:
    """The shipped model trained nine kernels: its leave-kernel-out fits measured the shift, so a kernel it
    never trained gets a finite interval (wider than a trained kernel's), not an unbounded one."""
    from pathlib import Path

    from hybridperf.learn.model import load_model

    model = load_model(Path(__file__).resolve().parents[2] / "models" / "default.json")
    assert model.intervals.measured("kernel") and not model.intervals.measured("nothing")
    rows = pd.DataFrame({"kernel": ["kt-pnpoly", "seed004-matvec"], "gpu": "h200", "size.N": [2e7, 2048.0],
                         "size.vertices": [600.0, np.nan], "config.block_size_x": [256.0, np.nan],
                         "config.BLOCK": [np.nan, 256.0]})
    pred = predict_rows(model, rows, 0.9)
    assert pred["ood_kernel"].tolist() == [True, False]
    ratio = (pred["hi_ms"] / pred["lo_ms"]).to_numpy()
    assert np.isfinite(ratio).all() and ratio[0] > ratio[1]


def test_predict_spread_gives_predict_rows_times_and_widths(model, gemm: pd.DataFrame) -> None:
    """The ranking scan's lean path (time and widths only) agrees with predict_rows on rows showing every reason."""
    from hybridperf.learn.model import half_width_column, predict_spread
    from hybridperf.search.optimum import LEVELS

    rows = gemm.drop(columns="regime").sample(3000, random_state=3).reset_index(drop=True)
    full = predict_rows(model, rows, 0.9, levels=LEVELS)
    assert full["out_of_domain"].any() and not full["out_of_domain"].all()
    time_ms, widths = predict_spread(model, rows, LEVELS)
    np.testing.assert_array_equal(time_ms, full["time_ms"].to_numpy())
    np.testing.assert_array_equal(widths, full[[half_width_column(c) for c in LEVELS]].to_numpy())
    # The coverage's own half width, computed in the same pass, is the level's where the level is asked for.
    np.testing.assert_allclose(np.log(full["hi_ms"] / full["time_ms"]), widths[:, LEVELS.index(0.9)], rtol=1e-12)
    bare, none = predict_spread(model, rows, ())
    np.testing.assert_array_equal(bare, time_ms)
    assert none.shape == (len(rows), 0)
