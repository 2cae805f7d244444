"""SweepFeatures: the fitted transformer (analytical terms, baseline chosen at fit, group ids, domain)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from hybridperf.errors import HybridperfError
from hybridperf.learn.baseline import BASELINE_COLUMN, GROUP_COLUMNS, baseline_column
from hybridperf.learn.features import SweepFeatures, analytical_features
from tests.paths import TITANV_SWEEP


@pytest.fixture(scope="module")
def titanv() -> pd.DataFrame:
    return pd.read_csv(TITANV_SWEEP)


def test_fit_chooses_a_baseline_per_kernel_and_fixes_the_columns(titanv: pd.DataFrame) -> None:
    ft = SweepFeatures().fit(titanv, titanv["time_ms"])
    assert set(ft.baselines_) == set(titanv["kernel"])
    assert ft.columns_[-3:] == [BASELINE_COLUMN, *GROUP_COLUMNS]
    X = ft.transform(titanv)
    assert list(X.columns) == ft.columns_ and (X.dtypes == np.float64).all()
    # Each row's baseline column is its kernel's chosen model's log time.
    feats = analytical_features(titanv)
    for kernel, model in ft.baselines_.items():
        m = (titanv["kernel"] == kernel).to_numpy()
        np.testing.assert_array_equal(X[BASELINE_COLUMN].to_numpy()[m], feats[baseline_column(model)].to_numpy()[m])
    assert ft.domain_["seed004-matvec"]["gpus"] == ["titan-v"]


def test_fallback_baseline_is_the_model_closest_without_calibration(titanv: pd.DataFrame) -> None:
    # A kernel never trained gets no calibration, so its baseline must be meaningful as it stands: the
    # model with the least mean-over-kernels median |log(measured / model)|, computed here by hand.
    ft = SweepFeatures().fit(titanv, titanv["time_ms"])
    feats = analytical_features(titanv)
    logy = np.log(titanv["time_ms"].to_numpy())
    err = {}
    for model in ("mwp-cwp", "gpuperf", "scaled-counts", "roofline"):
        e = np.abs(logy - feats[baseline_column(model)].to_numpy())
        err[model] = np.mean([np.median(e[(titanv["kernel"] == k).to_numpy()]) for k in titanv["kernel"].unique()])
    assert ft.baseline_ == min(err, key=err.get)
    # seed 004's counts (adjusting weight 1) are chosen for two kernels once scaled, never as the fallback
    assert "scaled-counts" in ft.baselines_.values() and ft.baseline_ != "scaled-counts"
    assert err["scaled-counts"] > 2 * err[ft.baseline_]


def test_precomputed_features_give_the_same_matrix(titanv: pd.DataFrame) -> None:
    feats = analytical_features(titanv)
    a = SweepFeatures().fit_transform(titanv, titanv["time_ms"], features=feats)
    b = SweepFeatures().fit(titanv, titanv["time_ms"]).transform(titanv)
    pd.testing.assert_frame_equal(a, b)


def test_fixed_none_and_params_only(titanv: pd.DataFrame) -> None:
    fixed = SweepFeatures(baseline="roofline").fit(titanv)
    assert set(fixed.baselines_.values()) == {"roofline"} and fixed.baseline_ == "roofline"
    none = SweepFeatures(baseline="none", group_ids=False).fit(titanv)
    assert none.baseline_ is None and BASELINE_COLUMN not in none.columns_ and GROUP_COLUMNS[0] not in none.columns_
    params = SweepFeatures(baseline="none", columns="params", group_ids=False).fit(titanv)
    assert params.columns_ and all(c.startswith(("size.", "log2_size.", "gpu_")) for c in params.columns_)


def test_bad_settings_and_input_are_refused(titanv: pd.DataFrame) -> None:
    with pytest.raises(HybridperfError, match="pass y"):
        SweepFeatures().fit(titanv)
    with pytest.raises(HybridperfError, match="unknown baseline"):
        SweepFeatures(baseline="magic").fit(titanv)
    with pytest.raises(HybridperfError, match="columns must be"):
        SweepFeatures(columns="some").fit(titanv, titanv["time_ms"])
    with pytest.raises(HybridperfError, match="DataFrame"):
        SweepFeatures().fit(titanv.to_numpy(), titanv["time_ms"])
    bad = titanv.head(3).assign(**{"size.N": 1e12})  # a launch beyond the GPU's limits
    feats = analytical_features(bad)
    if (feats["feasible"] == 0).any():
        with pytest.raises(HybridperfError, match="infeasible"):
            SweepFeatures().fit(bad, bad["time_ms"])


def test_sklearn_clone_and_state_round_trip(titanv: pd.DataFrame) -> None:
    ft = SweepFeatures(baseline="auto", size_aware=False)
    assert clone(ft).get_params() == ft.get_params()
    ft.fit(titanv, titanv["time_ms"])
    back = SweepFeatures.from_dict(ft.to_dict())
    pd.testing.assert_frame_equal(back.transform(titanv), ft.transform(titanv))
    assert back.domain_ == ft.domain_ and back.baselines_ == ft.baselines_


def test_hierarchy_terms_are_shares_and_the_gpu_enters_as_ratios() -> None:
    from hybridperf.analytical.hierarchy import LEVELS
    from hybridperf.hardware import load_gpu
    from hybridperf.learn.features import analytical_features, gpu_features

    rows = pd.DataFrame({"kernel": "clblast-xgemm", "gpu": ["gtx-680", "titan-rtx"], "size.M": 1024.0,
                         "size.N": 1024.0, "size.K": 1024.0})
    f = analytical_features(rows)
    shares = f[[c for c in f.columns if c.startswith("h_share_")]].to_numpy()
    # every level but the block-launch floor (set on few specs; the limiter code and the bound carry it)
    assert shares.shape[1] == len(LEVELS) - 1 and (shares >= 0).all() and (shares <= 1 + 1e-12).all()
    assert (shares.max(axis=1) > 0.9).all()  # the limiting level: all but the launch overhead and tail
    assert not any(c in f.columns for c in ("gpu_peak_fp32_gflops", "gpu_dram_bandwidth_gbs", "gpu_cc"))
    a100 = load_gpu("a100-pcie-40gb")
    g = gpu_features(a100)
    assert g["gpu_dram_bytes_per_flop"] == pytest.approx(1555 / 19492)
    assert g["gpu_l2_kib_per_sm"] == pytest.approx(40960 / 108) and g["gpu_tdp_w"] == 250
    assert np.isnan(gpu_features(load_gpu("quadro-fx5600"))["gpu_tdp_w"])  # no board power in that spec
    # The share of its peak issue rate the board power sustains: 250 W / (2.24 pJ x 7 nm) over 108 SMs x 4 warp
    # instructions x 32 lanes x 1410 MHz on the A100 (four schedulers per SM); below 1 on the 70 W T4; unknown
    # without board power.
    assert g["gpu_powered_issue_share"] == pytest.approx(250 / (2.24e-12 * 7) / (108 * 4 * 32 * 1410e6))
    assert gpu_features(load_gpu("tesla-t4"))["gpu_powered_issue_share"] < 1
    assert np.isnan(gpu_features(load_gpu("quadro-fx5600"))["gpu_powered_issue_share"])
