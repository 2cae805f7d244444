"""predict_rows and train_model called from Python refuse what the command line refuses (each was answered before
with the descriptor's default in place of what the caller meant, or ended in a KeyError / AttributeError)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hybridperf.errors import HybridperfError
from hybridperf.learn.model import load_model, predict_rows, train_model
from tests.paths import TITANV_SWEEP

ROWS = pd.DataFrame({"kernel": ["seed004-matvec"] * 2, "gpu": ["titan-v"] * 2, "size.N": [1024, 16384],
                     "config.BLOCK": [256, 256]})


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    from hybridperf.cli import main

    path = str(tmp_path_factory.mktemp("lib") / "model.json")
    assert main(["train", str(TITANV_SWEEP), "-o", path, "--quiet"]) == 0
    return load_model(path)


@pytest.mark.parametrize("rows, message", [
    (ROWS.drop(columns="size.N"), "no column size.N"),
    (ROWS.rename(columns={"size.N": "N"}), "column 'N' needs its prefix: size.N"),
    (ROWS.assign(**{"size.N": [np.nan, 1024]}), "size.N (a size of seed004-matvec) is empty in data row 1"),
    (ROWS.rename(columns={"config.BLOCK": "config.BLOK"}), "did you mean config.BLOCK?"),
    (ROWS.rename(columns={"config.BLOCK": "config.block"}), "did you mean config.BLOCK?"),
    (ROWS.drop(columns="gpu"), "rows have no column 'gpu'"),
    (ROWS.iloc[:0], "no rows to predict"),
    (ROWS.to_dict("records"), "rows must be a pandas DataFrame"),
])
def test_rows_the_model_would_guess_at_are_refused(model, rows, message: str) -> None:
    with pytest.raises(HybridperfError, match=message.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")):
        predict_rows(model, rows)


@pytest.mark.parametrize("kwargs", [{"coverage": 90}, {"coverage": 0}, {"coverage": "0.9"}, {"levels": [1.5]},
                                    {"levels": [0.8, -1]}])
def test_coverages_outside_zero_one_are_refused(model, kwargs) -> None:
    with pytest.raises(HybridperfError, match=r"must be a number in \(0, 1\)"):
        predict_rows(model, ROWS, **kwargs)


def test_a_model_path_instead_of_a_model_is_refused() -> None:
    with pytest.raises(HybridperfError, match=r"load_model\(path\)"):
        predict_rows("models/default.json", ROWS)  # type: ignore[arg-type]


def test_gpu_and_kernel_aliases_predict_as_the_canonical_names(model) -> None:
    """'TITAN-V' and 'matvec' are the model's titan-v and seed004-matvec: the same times, not an unseen GPU."""
    canonical = predict_rows(model, ROWS)
    alias = predict_rows(model, ROWS.assign(gpu="TITAN-V", kernel="matvec"))
    np.testing.assert_allclose(alias["time_ms"], canonical["time_ms"])
    assert not alias["ood_gpu"].any() and not alias["ood_kernel"].any()


def test_invalid_rows_are_dropped_with_a_warning_and_the_index_kept(model) -> None:
    rows = pd.concat([ROWS, ROWS.assign(**{"config.BLOCK": [300, 256]})], ignore_index=True)
    with pytest.warns(UserWarning, match="1 of 4 rows to predict are invalid: .*BLOCK is not an allowed value"):
        out = predict_rows(model, rows)
    assert list(out.index) == [0, 1, 3]
    np.testing.assert_allclose(out.loc[[0, 1], "time_ms"], predict_rows(model, ROWS)["time_ms"])


def test_train_model_refuses_a_misspelt_parameter_column() -> None:
    """The H200 matvec runs with config.BLOK trained every run at the default BLOCK = 256 (CLI and library alike),
    whatever block each run used."""
    from hybridperf.datasets import load_dataset

    runs = load_dataset("h200-cuda-bench")
    sweep = runs[runs["kernel"] == "seed004-matvec"]
    assert sweep["config.BLOCK"].nunique() > 1
    with pytest.raises(HybridperfError, match=r"training runs: column 'config.BLOK' is no parameter of .*did you "
                                              r"mean config.BLOCK\?"):
        train_model(sweep.rename(columns={"config.BLOCK": "config.BLOK"}))


def _titanv_matvec() -> pd.DataFrame:
    from hybridperf.datasets import load_dataset

    runs = load_dataset("titanv-seed004")
    return runs[runs["kernel"] == "seed004-matvec"]


@pytest.mark.parametrize("change, message", [
    (lambda r: r.drop(columns="size.N"), r"training sweep: duplicate configurations \(same kernel, gpu\) \(17 rows"),
    (lambda r: r.drop(columns="kernel"), "training sweep: missing column 'kernel'"),
    (lambda r: r.rename(columns={"size.N": "N"}), "unknown column 'N'"),
])
def test_train_model_checks_its_table_as_a_sweep_file_is_checked(change, message: str) -> None:
    """Without size.N the 17 matvec runs (N = 256 .. 65536) all trained at the default N = 4096; without a kernel
    column a KeyError."""
    with pytest.raises(HybridperfError, match=message):
        train_model(change(_titanv_matvec()), booster_params={"n_estimators": 5})


def test_train_model_groups_are_one_per_ok_run() -> None:
    runs = _titanv_matvec()
    with pytest.raises(HybridperfError, match="groups holds 40 labels for 17 runs"):
        train_model(runs, groups=np.arange(40), booster_params={"n_estimators": 5})
    # a table without status is a table of ok runs
    train_model(runs.drop(columns=["status", "reason"]), groups=np.arange(17) // 6, booster_params={"n_estimators": 5})


def test_load_model_takes_a_path() -> None:
    with pytest.raises(HybridperfError, match="load_model takes a model file's path, got NoneType"):
        load_model(None)  # type: ignore[arg-type]


def test_an_infeasible_row_says_why(model) -> None:
    """Its reason was left to 'hybridperf analyze'; the same sentence analyze gives, on that row only."""
    from hybridperf.analytical.run import analyze

    rows = pd.DataFrame({"kernel": "kt-convolution", "gpu": "titan-v", "size.W": 4096, "size.H": 4096,
                         "config.block_size_x": 256, "config.block_size_y": [2, 8]})
    out = predict_rows(model, rows)
    assert list(out["feasible"]) == [True, False] and np.isnan(out["time_ms"].iloc[1])
    want = analyze("kt-convolution", "titan-v", {"W": 4096, "H": 4096, "block_size_x": 256, "block_size_y": 8})
    assert out["infeasible_reason"].tolist() == ["", want.reason[0]]
    assert "block_size_x * block_size_y <= 1024" in want.reason[0]


def test_a_descriptor_given_in_memory_is_used_by_the_check(model) -> None:
    """kernels= reached the prediction but not the row check, which dropped every row as an unknown kernel."""
    from hybridperf.kernel import load_kernel

    desc = load_kernel("matvec")
    mine = type(desc)(**{**{f: getattr(desc, f) for f in desc.__dataclass_fields__}, "name": "my-matvec",
                         "aliases": (), "path": ""})
    rows = ROWS.assign(kernel="my-matvec")
    out = predict_rows(model, rows, kernels={"my-matvec": mine})
    assert len(out) == 2 and out["time_ms"].notna().all() and out["ood_kernel"].all()
    np.testing.assert_allclose(out["time_ms"], predict_rows(model, rows, kernels={"my-matvec": mine},
                                                            check=False)["time_ms"])


@pytest.mark.parametrize("params, message", [({"n_estimators": -5}, "n_estimators: -5 is less than the minimum of 1"),
                                             ({"max_dept": 3}, "'max_dept' was unexpected"),
                                             ({"learning_rate": -1}, "learning_rate: -1 is less than")])
def test_booster_params_a_model_file_could_not_keep_are_refused(params, message: str) -> None:
    """n_estimators = -5 trained and was recorded; max_dept was xgboost's warning 35 times; learning_rate = -1 an
    XGBoostError."""
    with pytest.raises(HybridperfError, match=message):
        train_model(_titanv_matvec(), booster_params=params)


def test_a_recording_filtered_to_some_kernels_trains() -> None:
    """The filtered rows keep other kernels' columns, empty (size.ITERS for matvec and the reduction): the name
    check read it as a misspelt K6_ITERS and refused the table."""
    from hybridperf.datasets import load_dataset

    runs = load_dataset("h200-cuda-bench")
    part = runs[runs["kernel"].isin(["seed004-matvec", "bench-reduction"])]
    assert "size.ITERS" in part.columns and part["size.ITERS"].isna().all()
    n = train_model(part, booster_params={"n_estimators": 5}).metadata["n_rows"]
    assert n > 0 and n == train_model(part.drop(columns="size.ITERS"),
                                      booster_params={"n_estimators": 5}).metadata["n_rows"]


class _CountsCopies:
    """An attrs value that counts how often pandas deep-copies it (once per operation on a frame carrying it)."""
    copies = 0

    def __deepcopy__(self, memo):
        type(self).copies += 1
        return self


def test_a_loaded_sweeps_attrs_are_not_copied_through_prediction(model) -> None:
    """A sweep read from a file carries its provenance in ``attrs``, which pandas deep-copies into every frame
    derived from it: predict_rows and analytical_features work on a shallow copy without them, give the same
    numbers, and leave the caller's attrs in place."""
    from hybridperf.learn.features import analytical_features

    plain = predict_rows(model, ROWS)
    rows = ROWS.copy()
    marker = _CountsCopies()
    rows.attrs = {"provenance": {"source": "test"}, "marker": marker}
    _CountsCopies.copies = 0
    tagged = predict_rows(model, rows)
    feats = analytical_features(rows)
    assert _CountsCopies.copies == 0
    pd.testing.assert_frame_equal(tagged, plain)
    pd.testing.assert_frame_equal(feats, analytical_features(ROWS))
    assert rows.attrs["marker"] is marker and not tagged.attrs and not feats.attrs
