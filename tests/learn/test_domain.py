"""The training domain and the reasons a row lies outside it, one column per reason."""
from __future__ import annotations

import numpy as np
import pandas as pd

from hybridperf.datasets import load_dataset
from hybridperf.kernel import resolve_kernels
from hybridperf.learn.domain import (
    REASON_COLUMNS,
    combination_codes,
    out_of_domain,
    reason_text,
    size_columns,
    training_domain,
)


def _rows(**cols) -> pd.DataFrame:
    return pd.DataFrame(cols)


def _train() -> pd.DataFrame:
    return _rows(kernel=["k"] * 3, gpu=["a", "a", "b"], **{"size.N": [64.0, 128.0, 256.0],
                                                           "config.B": [32.0, 64.0, 128.0]})


def test_domain_records_gpus_sizes_configs_and_regimes() -> None:
    d = training_domain(_train(), regimes=np.array([2.0, 2.0, 3.0]))
    combos = d["k"].pop("combinations")
    assert d == {"k": {"gpus": ["a", "b"], "gpu_rows": {"a": 2, "b": 1}, "sizes": {"size.N": [64.0, 256.0]},
                       "size_values": {"size.N": [64.0, 128.0, 256.0]},
                       "configs": {"config.B": {"values": [32.0, 64.0, 128.0]}}, "regimes": [2.0, 3.0]}}
    # one code per configuration trained, the same for the same values written as integers or in another order
    again = combination_codes(pd.DataFrame({"config.B": [128, 32, 64, 32]}), ["config.B"])
    assert combos == sorted(set(again.tolist())) and len(combos) == 3 and all(0 <= c < 2**53 for c in combos)


def test_a_configuration_trained_at_no_size_is_named_beyond_the_trained_sizes_only() -> None:
    """Tiles of a library's kernel choice, each value trained but not together (cuBLAS's 128x64 tile with 128
    threads first runs above the sizes a model of the V100's NeuSight runs trained on): named beyond the sizes, where
    the forward fits measure it, and not inside them, where a tuned sweep's every configuration is new."""
    train = _rows(kernel=["k"] * 4, gpu=["a"] * 4, **{"size.N": [64.0, 64.0, 128.0, 128.0],
                                                      "config.TM": [128.0, 64.0, 128.0, 64.0],
                                                      "config.T": [256.0, 128.0, 256.0, 128.0]})
    d = training_domain(train)
    probe = _rows(kernel=["k"] * 4, gpu=["a"] * 4, **{"size.N": [512.0, 512.0, 96.0, 512.0],
                                                      "config.TM": [128, 128, 128, 64.0],
                                                      "config.T": [128, 256, 128, np.nan]})
    r = out_of_domain(probe, d)
    assert list(r.ood_combination) == [True, False, False, False]  # 96: inside; an empty T: defaulted instead
    assert list(r.ood_defaulted) == ["", "", "", "T"]
    assert list(r.ood_config) == [""] * 4  # every value was trained
    text = reason_text(r, probe.kernel, probe.gpu)
    assert "config combination never trained" in text[0] and "combination" not in text[1]
    many = _rows(kernel=["k"] * 4097, gpu=["a"] * 4097, **{"size.N": [64.0] * 4097,
                                                           "config.B": np.arange(4097.0)})
    assert "combinations" not in training_domain(many)["k"]  # a tuned sweep's space: none kept
    assert not out_of_domain(probe.assign(**{"config.B": 5.0}), training_domain(many)).ood_combination.any()


def test_a_size_between_trained_sizes_is_measured_from_the_nearest_and_named_from_a_quarter_off() -> None:
    """Real sizes: the H200 reduction sweep trained at N = 2^20, 2^22, 2^24, 2^26, 2^28 (datasets/h200-cuda-bench);
    the fresh hold-out's 2^23 lies 2x from both neighbours, 1.1 x 2^22 lies 1.1x off (inside the tolerance)."""
    rows = load_dataset("h200-cuda-bench").query("kernel == 'bench-reduction' and status == 'ok'")
    d = training_domain(rows)
    assert d["bench-reduction"]["size_values"]["size.N"] == [2.0**e for e in (20, 22, 24, 26, 28)]
    n = [2.0**23, 1.1 * 2**22, 2.0**24, 3 * 2.0**24, 2.0**29]
    config = rows.iloc[0][[c for c in rows.columns if c.startswith("config.")]].to_dict()
    probe = _rows(kernel=["bench-reduction"] * 5, gpu=["h200"] * 5, **{"size.N": n}).assign(**config)
    r = out_of_domain(probe, d)
    np.testing.assert_allclose(r.ood_size_gap, [2.0, 1.1, 1.0, 4 / 3, 1.0])  # 2^29: beyond, not between
    np.testing.assert_allclose(r.ood_size_factor, [1, 1, 1, 1, 2])
    text = reason_text(r, probe.kernel, probe.gpu)
    assert "between trained sizes, 2x from the nearest" in text[0]
    assert text[1] == "" and text[2] == "" and "1.33x from the nearest" in text[3] and "between" not in text[4]
    legacy = {"bench-reduction": {k: v for k, v in d["bench-reduction"].items() if k != "size_values"}}
    assert list(out_of_domain(probe, legacy).ood_size_gap) == [1.0] * 5  # model files written before the values


def test_each_reason_has_its_own_column() -> None:
    d = training_domain(_train(), regimes=np.array([2.0, 2.0, 2.0]))
    probe = _rows(kernel=["k", "k", "k", "k", "other", "k"], gpu=["a", "a", "z", "a", "a", "a"],
                  **{"size.N": [128.0, 1024.0, 128.0, 128.0, 128.0, 16.0],
                     "config.B": [64.0, 64.0, 64.0, 48.0, 64.0, np.nan]})
    r = out_of_domain(probe, d, regimes=np.array([2.0, 2.0, 2.0, 2.0, 2.0, 5.0]))
    assert list(r.columns) == list(REASON_COLUMNS)
    assert list(r.ood_kernel) == [False, False, False, False, True, False]
    assert list(r.ood_gpu) == [False, False, True, False, False, False]
    assert list(r.ood_few_runs) == [0] * 6  # 'b' has 1 run beside 'a''s 2: not under a tenth
    np.testing.assert_allclose(r.ood_size_factor, [1, 4, 1, 1, 1, 4])  # 1024 / 256; 64 / 16
    assert list(r.ood_config) == ["", "", "", "B=48", "", ""]
    # beyond the sizes B=64 was trained (at N=128); an empty B is named defaulted, not a new combination
    assert list(r.ood_combination) == [False] * 6
    assert list(r.ood_defaulted) == ["", "", "", "", "", "B"]
    assert list(r.ood_regime) == [False, False, False, False, False, True]
    text = reason_text(r, probe.kernel, probe.gpu)
    assert text[0] == "" and "GPU z" in text[2] and "B=48" in text[3]
    assert text[4] == "kernel other never trained" and "defaulted" in text[5] and "regime" in text[5]
    # 4x above the largest trained size and 4x below the smallest: the factor is the same, the text says neither
    # "beyond" nor "below" (the factor does not keep the side); a size just outside is not shown as "1x".
    assert "size 4x outside the trained range" in text[1] and "size 4x outside the trained range" in text[5]
    near = out_of_domain(probe.iloc[:1].assign(**{"size.N": 256.0 * 1.00003}), d)
    assert reason_text(near, probe.kernel.iloc[:1], probe.gpu.iloc[:1]) == ["size 1.00003x outside the trained range"]
    for n, text in ((256.0 * (1 + 2.0**-24), "1.00000006x"), (256.0 * 1.005, "1.005x"), (256.0 * 1024, "1,024x")):
        far = out_of_domain(probe.iloc[:1].assign(**{"size.N": n}), d)
        assert reason_text(far, probe.kernel.iloc[:1], probe.gpu.iloc[:1]) == [f"size {text} outside the trained range"]


def test_missing_config_columns_and_importer_marks_count_as_defaulted() -> None:
    d = training_domain(_train())
    probe = _rows(kernel=["k", "k"], gpu=["a", "a"], **{"size.N": [64.0, 64.0]})
    assert list(out_of_domain(probe, d).ood_defaulted) == ["B", "B"]
    marked = _train().assign(**{"info.defaulted": ["", "B", ""]})
    assert list(out_of_domain(marked, d).ood_defaulted) == ["", "B", ""]


def test_a_long_config_list_is_stored_as_a_range_and_two_values_stay_a_set() -> None:
    train = _rows(kernel=["k"] * 300, gpu=["a"] * 300, **{"config.B": [float(i) for i in range(300)]})
    d = training_domain(train)
    assert d["k"]["configs"]["config.B"] == {"range": [0.0, 299.0]}
    r = out_of_domain(_rows(kernel=["k", "k"], gpu=["a", "a"], **{"config.B": [150.5, 400.0]}), d)
    assert list(r.ood_config) == ["", "B=400"]
    two = training_domain(_rows(kernel=["k", "k"], gpu=["a", "a"], **{"config.B": [64.0, 256.0]}))
    assert list(out_of_domain(_rows(kernel=["k"], gpu=["a"], **{"config.B": [128.0]}), two).ood_config) == ["B=128"]


def test_a_gpu_with_few_runs_beside_well_covered_ones_is_flagged_with_its_count() -> None:
    train = _rows(kernel=["k"] * 104, gpu=["a"] * 50 + ["b"] * 50 + ["c"] * 4, **{"size.N": [64.0] * 104})
    d = training_domain(train)
    r = out_of_domain(_rows(kernel=["k"] * 4, gpu=["a", "b", "c", "z"], **{"size.N": [64.0] * 4}), d)
    assert list(r.ood_few_runs) == [0, 0, 4, 0] and list(r.ood_gpu) == [False, False, False, True]
    assert "GPU c trained with only 4 runs" in reason_text(r, pd.Series(["k"] * 4), pd.Series(["a", "b", "c", "z"]))[2]
    legacy = {"k": {key: v for key, v in d["k"].items() if key != "gpu_rows"}}  # models trained before the counts
    assert list(out_of_domain(_rows(kernel=["k"], gpu=["c"], **{"size.N": [64.0]}), legacy).ood_few_runs) == [0]


def test_a_counter_described_kernel_is_sized_by_its_counters_not_its_class_label() -> None:
    """OpenDwarfs' size.class (tiny=1, small=2, medium=3) is a label the aiwc-counted descriptor does not
    read; its sizes are the AIWC counters. Trained on tiny and small, the real medium runs lie about 32x beyond
    in work and footprint (not 1.5x), and a kernel whose counters do not change with the class is inside."""

    rows = load_dataset("aiwc-opendwarfs").query("gpu == 'geforce-gtx-1080'")
    cols = size_columns(rows, resolve_kernels(rows["kernel"].astype(str).unique()))
    assert cols["aiwc-csr-csr"] == ("counter.aiwc_total_instruction_count", "counter.aiwc_workitems",
                                    "counter.aiwc_total_memory_footprint", "counter.aiwc_total_barriers_hit")
    train, test = rows[rows["size.class"] <= 2], rows[rows["size.class"] == 3]
    by_counters = out_of_domain(test, training_domain(train, sizes=cols))["ood_size_factor"]
    by_label = out_of_domain(test, training_domain(train))["ood_size_factor"]
    kernel = test["kernel"].to_numpy()
    assert (by_label[kernel == "aiwc-csr-csr"] == 1.5).all()  # every size.* column: the label's 3 / 2
    for k in ("aiwc-csr-csr", "aiwc-kmeans-kmeanspoint", "aiwc-srad-srad_cuda_1"):
        inst = test.loc[kernel == k, "counter.aiwc_total_instruction_count"].max()
        assert by_counters[kernel == k].iloc[0] >= inst / train.query("kernel == @k")[
            "counter.aiwc_total_instruction_count"].max() > 20
    assert (by_counters[kernel == "aiwc-lud-lud_diagonal"] == 1.0).all()  # same counters at every class


def test_size_columns_prefer_size_columns_and_a_kernel_without_any_has_no_sizes() -> None:
    rows = _rows(kernel=["seed004-vecadd"] * 2, gpu=["a"] * 2, **{"size.N": [1.0, 2.0], "counter.N": [5.0, 6.0]})
    assert size_columns(rows, resolve_kernels(["seed004-vecadd"])) == {"seed004-vecadd": ("size.N",)}
    assert training_domain(rows, sizes={"seed004-vecadd": ()})["seed004-vecadd"]["sizes"] == {}


def test_each_rows_reasons_depend_on_that_row_alone_whatever_the_order_of_kernels_and_gpus() -> None:
    """Real rows of several kernels and two GPUs, shuffled together (the fresh H200 and H100 hold-outs against the
    H200 recording's domain, with the H100 never trained): the batch's reasons equal those of each row alone."""
    from hybridperf.sweep import training_rows

    train = training_rows(load_dataset("h200-cuda-bench"))
    d = training_domain(train, sizes=size_columns(train, resolve_kernels(train["kernel"].unique())))
    ask = pd.concat([training_rows(load_dataset(n)) for n in ("h200-cuda-holdout", "h100-cuda-holdout")])
    ask = ask.sample(60, random_state=3).reset_index(drop=True)
    assert ask["kernel"].nunique() >= 4 and ask["gpu"].nunique() == 2
    batch = out_of_domain(ask, d)
    alone = pd.concat([out_of_domain(ask.iloc[[i]], d) for i in range(len(ask))])
    pd.testing.assert_frame_equal(batch, alone)
    assert batch["ood_gpu"].any() and not batch["ood_gpu"].all()


def test_configuration_codes_keep_the_value_stored_model_files_hold() -> None:
    """Model files store these codes: a pandas release that hashed values differently would make every stored
    configuration look new beyond the trained sizes. The code of (A=128, B=64), written by models/default.json's
    training (pandas 3.1.1), must read the same under whichever pandas runs the tests."""
    rows = pd.DataFrame({"config.A": [128.0, 128], "config.B": [64.0, 64]})
    assert combination_codes(rows, ["config.A", "config.B"]).tolist() == [1503671557175321] * 2
    assert combination_codes(rows, ["config.B", "config.A"]).tolist() != [1503671557175321] * 2  # order is part of it


def test_the_shipped_models_configurations_are_its_training_runs() -> None:
    """models/default.json's NeuSight GEMM configurations, recomputed from the runs it was trained on."""
    from hybridperf.learn.model import load_model
    from hybridperf.sweep import training_rows
    from tests.paths import REPO

    d = load_model(REPO / "models" / "default.json").features.domain_["neusight-gemm"]
    rows = training_rows(load_dataset("neusight-gemm"))
    assert d["combinations"] == np.unique(combination_codes(rows, sorted(d["configs"]))).tolist()
