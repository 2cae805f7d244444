"""The project's own recordings (datasets/h200-cuda-bench, datasets/h100-cuda-bench, made with
`hybridperf record` on rented GPUs) against physics, the analytical core and the tools that read them.

These are the only real timings of the shipped CUDA benchmark kernels; the expectations are
independent of the models: bytes over the spec's peak bandwidth is a floor no kernel beats, and
the targets of the fidelity issue (configuration ranking of each analytical model) on data no
model was fitted to.
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from hybridperf.analytical.run import analyze
from hybridperf.datasets import load_dataset
from hybridperf.sweep import param_columns, param_name, row_keys
from hybridperf.sweepfile import read_provenance

from .paths import DATASETS

RECORDED = {"h200": "h200-cuda-bench", "h100-sxm": "h100-cuda-bench"}
DEVICE_NAMES = {"h200": "NVIDIA H200", "h100-sxm": "NVIDIA H100 80GB HBM3"}


def _ok(gpu: str, kernel: str | None = None) -> pd.DataFrame:
    d = load_dataset(RECORDED[gpu])
    d = d[d["status"] == "ok"]
    return d if kernel is None else d[d["kernel"] == kernel]


def _hierarchical(gpu: str, part: pd.DataFrame) -> pd.DataFrame:
    cols = [c for c in param_columns(part) if part[c].notna().all()]
    params = part[cols].rename(columns=param_name).reset_index(drop=True)
    kernel = part["kernel"].iloc[0]
    return analyze(kernel, gpu, params, models=["hierarchical"]).terms["hierarchical"]


@pytest.mark.parametrize("gpu", sorted(RECORDED))
def test_recordings_carry_their_device_and_every_kernel(gpu):
    prov = read_provenance(DATASETS / RECORDED[gpu] / "sweep.parquet")
    sessions = prov["recordings"]
    assert sessions and {s["gpu_name"] for s in sessions} == {DEVICE_NAMES[gpu]}
    assert {s["gpu_spec"] for s in sessions} == {gpu}
    ok = _ok(gpu)
    assert set(ok["kernel"]) == {"seed004-vecadd", "seed004-matadd", "seed004-matvec", "seed004-dot",
                                 "seed002-tiled-matmul", "bench-ryoo-matmul", "bench-reduction", "bench-mb"}
    assert (ok["time_ms"] > 0).all() and (ok["time_min_ms"] <= ok["time_ms"]).all()
    assert (ok["time_ms"] <= ok["time_max_ms"]).all() and (ok["repeats"] >= 3).all()  # 3: the N = 8192 matmuls


@pytest.mark.parametrize("gpu", sorted(RECORDED))
@pytest.mark.parametrize("kernel", ["seed004-vecadd", "seed004-matadd", "seed004-dot", "bench-reduction"])
def test_no_streaming_kernel_beats_dram_bytes_over_peak_bandwidth(gpu, kernel):
    # Rows whose data cannot sit in L2 (the model's L2 hit ratio under 5%) read every byte from DRAM:
    # the spec's peak bandwidth is a floor on their time (if a spec's bandwidth were too low, or a
    # descriptor's bytes too high, this fails), and a well-fed stream reaches at least half of it.
    part = _ok(gpu, kernel)
    h = _hierarchical(gpu, part)
    big = h["l2_hit_ratio"].to_numpy() < 0.05
    assert big.sum() >= 10
    ratio = part["time_ms"].to_numpy()[big] / h["dram_ms"].to_numpy()[big]
    assert ratio.min() >= 1.0
    assert ratio.min() <= 3.0


@pytest.mark.parametrize("gpu", sorted(RECORDED))
@pytest.mark.parametrize("kernel", ["bench-ryoo-matmul", "bench-reduction", "bench-mb", "seed002-tiled-matmul"])
def test_hierarchical_roofline_ranks_each_recorded_configuration_sweep(gpu, kernel):
    # Fidelity target (issue 11): the best analytical model alone ranks each configuration sweep with
    # Spearman >= 0.6, here per size on a GPU no model was fitted to; and no configuration is more
    # than 4x off (measured 0.12-2.0x on these sweeps).
    part = _ok(gpu, kernel).reset_index(drop=True)
    pred = _hierarchical(gpu, part)["time_ms"].to_numpy()
    meas = part["time_ms"].to_numpy()
    assert np.all((pred / meas > 0.1) & (pred / meas < 4.0))
    sizes = row_keys(part, param_columns(part, "size."))
    rhos = [spearmanr(pred[sizes == s], meas[sizes == s]).statistic for s in np.unique(sizes)]
    assert np.mean(rhos) >= 0.6, rhos


@pytest.mark.parametrize("gpu", sorted(RECORDED))
def test_matvec_is_timed_by_its_load_store_wavefronts_at_every_recorded_size(gpu):
    """seed004-matvec's lanes read rows apart: each load touches 32 cache lines, one L1 wavefront each. With
    that count (lsu_wavefronts) the hierarchical roofline alone is within 0.85-1.15x of every BLOCK 256 run,
    from N = 1024 to the hold-out's 49152 (two blocks on some SMs: 3x the time of 31744), and ranks the BLOCK
    sizes of each size. Before it, the latency chain set the time: 0.80x, 0.41x at 49152, Spearman 0.66."""
    holdout = {"h200": "h200-cuda-holdout", "h100-sxm": "h100-cuda-holdout"}[gpu]
    fresh = load_dataset(holdout)
    fresh = fresh[(fresh["status"] == "ok") & (fresh["kernel"] == "seed004-matvec")]
    part = pd.concat([_ok(gpu, "seed004-matvec"), fresh])
    part = part.reset_index(drop=True)
    pred = _hierarchical(gpu, part)["time_ms"].to_numpy()
    meas = part["time_ms"].to_numpy()
    block256 = (part["config.BLOCK"] == 256).to_numpy()
    assert 49152.0 in set(part["size.N"][block256])
    assert np.all((pred[block256] / meas[block256] > 0.85) & (pred[block256] / meas[block256] < 1.15))
    sizes = part["size.N"].to_numpy()
    rhos = [spearmanr(pred[sizes == n], meas[sizes == n]).statistic
            for n in np.unique(sizes) if (sizes == n).sum() >= 4]
    assert len(rhos) >= 6 and min(rhos) >= 0.9, rhos
    if gpu == "h200":  # the hold-out's step: 132 blocks (one per SM) ran 4.88 ms, 133 blocks 9.55 ms
        n = part["size.N"].to_numpy()
        one, two = np.flatnonzero(block256 & (n == 33792))[0], np.flatnonzero(block256 & (n == 34048))[0]
        assert meas[two] / meas[one] > 1.8 and abs((pred[two] / pred[one]) / (meas[two] / meas[one]) - 1) < 0.1


def test_row_keys_group_rows_of_kernels_with_different_size_names():
    # bench-mb has sizes N and ITERS, the others N alone: ITERS is NaN on their rows. Each row keeps
    # a key (pandas' astype(str) keeps NaN under its string dtype, which broke "|".join).
    mixed = pd.concat([_ok("h200", "bench-mb").head(3), _ok("h200", "seed004-vecadd").head(3)])
    keys = row_keys(mixed, ["kernel", "gpu", "size.N", "size.ITERS"])
    assert len(keys) == 6 and all(isinstance(k, str) for k in keys)
    assert keys[3].endswith("|") and "nan" not in keys[3]
    assert len(set(keys[:3])) == 1  # same kernel, GPU and sizes
    assert row_keys(mixed, []).tolist() == [""] * 6


@pytest.mark.slow
def test_zero_shot_split_runs_on_sweeps_with_different_size_names():
    # S6 on the two recorded GPUs failed with "TypeError: sequence item 3: expected str instance,
    # float found" and warned "All-NaN slice encountered"; each method now gives a finite error.
    from hybridperf.evaluation import evaluate

    data = pd.concat([_ok("h200"), _ok("h100-sxm")], ignore_index=True)
    data = data[data["kernel"].isin(["bench-mb", "seed004-vecadd", "seed004-matadd"])]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        ev = evaluate(data, "S6", holdout="h200", methods=["analytical:hierarchical", "hybrid"])
    table = ev.table.set_index("method")
    assert ev.n_test == int((data["gpu"] == "h200").sum())
    assert np.isfinite(table["mape"]).all() and (table["n"] == ev.n_test).all()


def _stalls(variant: int) -> str:
    return str(DATASETS / "h200-cuda-bench" / "ncu.parquet.stalls"
               / f"bench-reduction__h200__N=16777216__VARIANT={variant}__BLOCK=256__K6_ITERS=1.csv")


def _gpa(variant: int):
    from hybridperf.advise.benefits import advise, advise_samples

    adv = advise("bench-reduction", "h200", {"N": 16777216, "VARIANT": variant, "BLOCK": 256})
    return advise_samples(adv, _stalls(variant))


def test_gpa_on_a_real_nsight_compute_export_blames_the_modulo_of_reduction_k0():
    # K0's `tid % (2 * s)` compiles to a float-reciprocal division sequence (I2F, MUFU.RCP, F2I):
    # GPA's first suggestion must be strength reduction. K1 is K0 without that modulo (and without its
    # divergent branch); the recorded K0/K1 times bound what removing the modulo alone can give.
    report = _gpa(0)
    first = report.suggestions[0]
    assert first.optimizer == "Strength Reduction"
    assert any("MUFU" in h.src_sass for h in first.hotspots)
    runs = _ok("h200", "bench-reduction")
    at = runs[(runs["size.N"] == 16777216) & (runs["config.BLOCK"] == 256) & (runs["config.K6_ITERS"] == 1)]
    t = at.set_index("config.VARIANT")["time_ms"]
    assert 1.0 < first.speedup <= t[0] / t[1]
    k1 = {s.optimizer: s for s in _gpa(1).suggestions}
    assert k1["Strength Reduction"].speedup == 1.0 and k1["Strength Reduction"].matched_samples == 0


@pytest.mark.slow
def test_a_model_of_one_gpu_gives_no_bounded_interval_on_another_gpu():
    # Trained on the TITAN V seed-004 times alone, a model has no leave-GPU-out fit to size a GPU shift.
    # On the recorded H200 rows it was 19-660x off (the TITAN V times are not kernel-only), inside a 90 %
    # band of hi/lo 1.36 that covered none of them; an interval it cannot calibrate must not be bounded.
    from hybridperf.learn.model import predict_rows, train_model

    model = train_model(load_dataset("titanv-seed004"))
    h200 = _ok("h200")
    rows = h200[h200["kernel"].str.startswith("seed004-")].dropna(axis=1, how="all").reset_index(drop=True)
    pred = predict_rows(model, rows)
    assert pred["ood_gpu"].all()
    assert np.isinf(pred["hi_ms"]).all() and (pred["lo_ms"] == 0).all()
    trained = predict_rows(model, load_dataset("titanv-seed004"))
    assert np.isfinite(trained["hi_ms"]).all() and (trained["lo_ms"] > 0).all()


@pytest.mark.slow
@pytest.mark.parametrize("gpus", [("h200",), ("h200", "h100-sxm")])
def test_kernels_left_out_in_calibration_are_predicted_as_kernels_never_trained(gpus):
    # The recorded matmuls' own baseline is scaled counts (seed 004's counts, meaningful only once calibrated);
    # a kernel never trained is predicted from the fallback baseline. Left-out fits that kept the own baseline
    # scored the matmuls 3.6e5x off (|log| 12.8), which no prediction of a new kernel is; from the fallback
    # (the hierarchical roofline, 0.69-0.79x of measured on them) they are within a few x. With two GPUs the
    # left-out kernel is predicted by the split's transfer fit, whose overall offset must follow the same rule.
    from hybridperf.learn.model import train_model

    model = train_model(pd.concat([_ok(g) for g in gpus], ignore_index=True))
    assert model.features.baselines_["bench-ryoo-matmul"] == "scaled-counts"
    # A GPU without runs takes the transfer fit, which predicts the scaled-counts kernels from the hierarchical
    # roofline: so it is made with one GPU too.
    from hybridperf.learn.baseline import group_id

    ryoo = group_id("bench-ryoo-matmul")
    assert model.estimator.transfer_regressor_ is not None and ryoo in model.estimator.transfer_kernels_
    ivs = model.intervals
    raw = np.asarray(ivs.scores["kernel|0"]) * ivs.sigma_unseen_kernel  # back to |log residual| at its fixed sigma
    assert np.quantile(raw, 0.9) < np.log(10.0)


@pytest.mark.slow
@pytest.mark.parametrize("gpus", [("h200",), ("h200", "h100-sxm")])
def test_a_kernel_never_trained_is_predicted_from_the_fallback_baseline_and_its_own_calibration(gpus):
    # Trained on the H200 runs of every recorded kernel but the reduction (two of the others have the scaled-counts
    # baseline, calibrated 1e-5x), the reduction's runs are predicted within 2x at the median; the overall offset
    # used to be the mean over the rows' own baselines and put them about 90x too fast. With two GPUs they take the
    # transfer fit's path (their (kernel, GPU) group was never trained), whose overall offset follows the same rule.
    from hybridperf.learn.model import predict_rows, train_model

    runs = pd.concat([_ok(g) for g in gpus], ignore_index=True)
    model = train_model(runs[runs["kernel"] != "bench-reduction"].dropna(axis=1, how="all"))
    assert set(model.features.baselines_.values()) >= {"scaled-counts", "hierarchical"}
    held = runs[runs["kernel"] == "bench-reduction"].dropna(axis=1, how="all").reset_index(drop=True)
    pred = predict_rows(model, held)
    assert pred["ood_kernel"].all()
    assert abs(np.median(np.log(pred["time_ms"].to_numpy() / held["time_ms"].to_numpy()))) < np.log(2.0)


def test_the_h200_repeat_times_again_every_configuration_of_the_recordings():
    """datasets/h200-cuda-repeat: pass 1 holds every configuration of h200-cuda-bench and of h200-cuda-holdout
    but its two N = 12288 matmuls, pass 2 every configuration of h200-cuda-bench again, each recorded under the
    h200 spec on an NVIDIA H200; and runs of 0.3 ms and more repeat on one machine to within 5 % (P90 |log| of
    the same configurations, minutes apart), where kernels under 0.05 ms do not (their launch gaps dominate)."""
    from hybridperf.sweep import configuration_key
    from hybridperf.sweepfile import read_sweep

    repeat = load_dataset("h200-cuda-repeat")
    pass2 = read_sweep(DATASETS / "h200-cuda-repeat" / "pass2.parquet")
    bench, holdout = load_dataset("h200-cuda-bench"), load_dataset("h200-cuda-holdout")
    holdout = holdout[~((holdout["size.N"] == 12288) & holdout["kernel"].str.endswith("matmul"))]

    def keys(d):
        d = d.reset_index(drop=True)
        return set(map(tuple, d[configuration_key(d)].astype(str).to_numpy()))

    assert keys(repeat) == keys(pd.concat([bench, holdout], ignore_index=True))
    assert keys(pass2) == keys(bench)
    for d, name in ((repeat, "sweep.parquet"), (pass2, "pass2.parquet")):
        assert set(d["gpu"]) == {"h200"}
        assert {r["gpu_name"] for r in read_provenance(DATASETS / "h200-cuda-repeat" / name)["recordings"]} \
            == {"NVIDIA H200"}
    cols = configuration_key(bench.reset_index(drop=True))
    both = repeat[repeat["status"] == "ok"].astype({c: str for c in cols}).merge(
        pass2[pass2["status"] == "ok"].astype({c: str for c in cols}), on=cols)
    ratio = np.abs(np.log(both["time_ms_y"] / both["time_ms_x"]))
    assert len(both) == 931
    assert ratio[both["time_ms_x"] >= 0.3].quantile(0.9) < 0.05
    assert ratio[both["time_ms_x"] < 0.05].quantile(0.9) > 0.1
