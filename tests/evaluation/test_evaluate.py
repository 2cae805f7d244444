"""Splits S1-S6 and the metrics shared by experiments and the CLI."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hybridperf.errors import HybridperfError
from hybridperf.evaluation.evaluate import ape_metrics, topk_scores
from hybridperf.evaluation.splits import split_indices


def _sweep(n: int = 200) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"kernel": rng.choice(["a", "b"], n), "gpu": rng.choice(["g1", "g2", "g3"], n),
                         "size.N": rng.choice([1, 2, 4, 8, 16], n).astype(float), "time_ms": rng.random(n) + 0.1})


def test_splits_partition_rows() -> None:
    df = _sweep()
    for split, opts in [("S1", {}), ("S2", {}), ("S3", {"holdout": "a"}), ("S4", {"holdout": "g2"}),
                        ("S5", {"budget_fraction": 0.1}), ("S6", {"holdout": "g1"})]:
        tr, te = split_indices(df, split, **opts)
        assert len(set(tr) & set(te)) == 0 and len(tr) + len(te) == len(df), split


def test_s2_trains_on_small_sizes_only() -> None:
    df = _sweep()
    tr, te = split_indices(df, "S2")
    assert df["size.N"].iloc[tr].max() <= 4 < df["size.N"].iloc[te].min()
    tr, te = split_indices(df, "S2", train_max_size=2)
    assert df["size.N"].iloc[tr].max() <= 2 < df["size.N"].iloc[te].min()


def test_s2_by_default_sizes_a_counter_described_kernel_by_its_counters() -> None:
    """AIWC's size.class (1, 2, 3) is a label: a quarter of the largest class trained nothing (the default S2
    refused the dataset; each kernel's smallest size now always trains, which leaves the label tiny alone).
    By the descriptor's sizes (the AIWC counters) each kernel trains on the classes whose work is at most a
    quarter of its largest, and a kernel whose work never changes trains whole."""
    from hybridperf.datasets import load_dataset
    from hybridperf.kernel import resolve_kernels
    from hybridperf.learn.domain import size_columns

    rows = load_dataset("aiwc-opendwarfs").query("gpu == 'geforce-gtx-1080'").reset_index(drop=True)
    tr, _ = split_indices(rows, "S2")
    assert set(rows["size.class"].iloc[tr]) == {1.0} | set(rows.loc[rows["kernel"] == "aiwc-fft-fftradix4kernel",
                                                                     "size.class"])  # fftradix4 ran small only
    sizes = size_columns(rows, resolve_kernels(rows["kernel"].astype(str).unique()))
    tr, te = split_indices(rows, "S2", sizes=sizes)
    work = rows["counter.aiwc_total_instruction_count"].to_numpy()
    kernel = rows["kernel"].to_numpy()
    assert set(kernel[tr]) == set(kernel)  # every kernel trains on something
    for k in set(kernel[te]):
        largest = work[kernel == k].max()
        smallest = work[kernel == k].min()  # always trains, even above a quarter of the largest
        assert work[te][kernel[te] == k].min() > largest / 4
        assert work[tr][kernel[tr] == k].max() <= max(largest / 4, smallest)
    csr = rows.index[kernel == "aiwc-csr-csr"]
    assert sorted(rows.loc[csr.intersection(te), "size.class"]) == [3.0]  # medium: 32x small's work
    assert "aiwc-lud-lud_diagonal" not in set(kernel[te])  # the same counters at every class


def test_s4_moves_calibration_runs_of_the_new_gpu_into_training() -> None:
    df = _sweep()
    tr, te = split_indices(df, "S4", holdout="g3", calibration_runs=5)
    assert (df.gpu.iloc[te] == "g3").all()
    assert (df.gpu.iloc[tr] == "g3").sum() == 5


def test_s6_keeps_every_run_of_the_new_gpu_out_of_training() -> None:
    df = _sweep()
    tr, te = split_indices(df, "S6", holdout="g3", calibration_runs=5)  # S6 ignores calibration runs
    assert (df.gpu.iloc[te] == "g3").all() and (df.gpu.iloc[tr] != "g3").all()
    assert len(te) == (df.gpu == "g3").sum()


def test_bad_split_options() -> None:
    with pytest.raises(HybridperfError, match="needs --holdout"):
        split_indices(_sweep(), "S3", holdout="zzz")
    with pytest.raises(HybridperfError, match="unknown split"):
        split_indices(_sweep(), "S9")
    one_gpu = _sweep().assign(gpu="titan-v")
    for split in ("S4", "S6"):  # holding out the only GPU leaves nothing to train on: say why, not "adjust"
        with pytest.raises(HybridperfError, match=f"split {split} holds out every row: the data have one gpu"):
            split_indices(one_gpu, split, holdout="titan-v")


def test_metrics_against_hand_computation() -> None:
    m = ape_metrics(np.array([1.1, 1.8, 3.0]), np.array([1.0, 2.0, 3.0]))
    assert m["mape"] == pytest.approx((10 + 10 + 0) / 3)
    assert m["median_ape"] == pytest.approx(10)
    s = topk_scores(np.array(["x"] * 3), pred=np.array([3.0, 1.0, 2.0]), meas=np.array([1.0, 2.0, 4.0]), ks=(1, 2))
    assert s["top1"] == pytest.approx(0.5) and s["top2"] == pytest.approx(0.5)


def test_s5_on_too_few_runs_says_so() -> None:
    """One ok run: numpy's 'Cannot take a larger sample than population' (exit 70); two: no test row."""
    from hybridperf.datasets import load_dataset

    runs = load_dataset("titanv-seed004")
    for n in (1, 2):
        with pytest.raises(HybridperfError, match=rf"the data hold {n} ok runs: give three or more"):
            split_indices(runs.head(n), "S5")
    train, test = split_indices(runs.head(3), "S5", budget_fraction=0.99)
    assert len(train) == 2 and len(test) == 1
