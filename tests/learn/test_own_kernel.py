"""A user's own descriptor: trained on by name, kept in the model file, predicted with the model alone; and a
model used on a kernel it never saw says so."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hybridperf.errors import HybridperfError
from hybridperf.grid import grid_rows
from hybridperf.kernel import load_kernel, register_kernel, unregister_kernel
from hybridperf.learn.baseline import baseline_column
from hybridperf.learn.features import analytical_features
from hybridperf.learn.model import load_model, predict_rows, train_model
from hybridperf.learn.persist import ModelFileError
from tests.paths import TITANV_SWEEP

STENCIL = """format_version = 1
name = "test-stencil2d"
description = "5-point 2D stencil, one output per thread"

[sizes]
W = { default = 4096, min = 1 }
H = { default = 4096, min = 1 }

[config]
block_size_x = { values = [16, 32, 64, 128], default = 32 }
block_size_y = { values = [1, 2, 4, 8, 16], default = 4 }

[space]
constraints = ["block_size_x * block_size_y <= 1024", "block_size_x * block_size_y >= 32"]

[launch]
threads_per_block = "block_size_x * block_size_y"
blocks = "ceil(W / block_size_x) * ceil(H / block_size_y)"
registers_per_thread = "16"
smem_per_block_bytes = "0"

[counts]
comp_insts = "COMP"
coal_mem_insts = "6"
uncoal_mem_insts = "0"
fp_insts = "5"
dram_bytes = "8 * W * H"
"""
FAST = {"n_estimators": 30, "n_jobs": 1}


def write(path: Path, comp: str = "12") -> Path:
    path.write_text(STENCIL.replace("COMP", comp))
    return path


def stencil_sweep(desc, gpu: str = "rtx-a4000") -> pd.DataFrame:
    """Every feasible configuration at four sizes, 'measured' as 1.3x the roofline time plus 5 us."""
    rows = grid_rows(desc, gpu, {"W": [512, 1024, 2048, 4096], "H": [1024], "block_size_x": [16, 32, 64, 128],
                                 "block_size_y": [1, 2, 4, 8, 16]})
    ok, _ = desc.constraint_mask({c.split(".", 1)[1]: rows[c].to_numpy() for c in rows.columns if "." in c})
    rows = rows.loc[ok].reset_index(drop=True)
    feats = analytical_features(rows, kernels={rows["kernel"][0]: desc})
    return rows.assign(time_ms=1.3 * np.exp(feats[baseline_column("roofline")]) + 0.005, status="ok")


@pytest.fixture
def own(tmp_path):
    path = write(tmp_path / "stencil.toml")
    yield path
    unregister_kernel("test-stencil2d")


def test_a_model_keeps_the_descriptor_and_predicts_without_the_file(own, tmp_path) -> None:
    desc = register_kernel(own)
    sweep = stencil_sweep(desc)
    assert (sweep["kernel"] == "test-stencil2d").all()  # rows carry the name, not the path
    model = train_model(sweep, booster_params=FAST)
    model.save(tmp_path / "m.json")
    before = predict_rows(model, sweep)
    unregister_kernel("test-stencil2d")
    own.unlink()
    with pytest.raises(HybridperfError, match="unknown kernel 'test-stencil2d'"):
        load_kernel("test-stencil2d")
    back = load_model(tmp_path / "m.json")
    assert back.descriptors["test-stencil2d"].sha256 == desc.sha256
    after = predict_rows(back, sweep)
    pd.testing.assert_frame_equal(before, after)
    assert not after["out_of_domain"].any()
    doc = json.loads((tmp_path / "m.json").read_text())
    assert doc["body"]["features"]["descriptor_texts_"][desc.sha256] == desc.text
    assert doc["body"]["metadata"]["kernels"] == {"test-stencil2d": desc.sha256}


def test_a_different_file_of_the_same_name_is_refused(own, tmp_path) -> None:
    model = train_model(stencil_sweep(register_kernel(own)), booster_params=FAST)
    register_kernel(write(tmp_path / "edited.toml", "14"))
    with pytest.raises(HybridperfError, match="differs from the copy the model was trained with; retrain"):
        predict_rows(model, stencil_sweep(load_kernel("test-stencil2d")).head(3))


def test_an_edited_descriptor_in_the_model_file_is_refused(own, tmp_path) -> None:
    train_model(stencil_sweep(register_kernel(own)), booster_params=FAST).save(tmp_path / "m.json")
    doc = json.loads((tmp_path / "m.json").read_text())
    texts = doc["body"]["features"]["descriptor_texts_"]
    sha = next(iter(texts))
    texts[sha] = texts[sha].replace('comp_insts = "12"', 'comp_insts = "1"')
    doc["sha256"] = hashlib.sha256(json.dumps(doc["body"], sort_keys=True, allow_nan=False).encode()).hexdigest()
    (tmp_path / "m.json").write_text(json.dumps(doc))
    with pytest.raises(ModelFileError, match="descriptor text .* does not match its sha256"):
        load_model(tmp_path / "m.json")


def test_a_kernel_never_trained_is_flagged_and_its_interval_wide(own) -> None:
    titanv = pd.read_csv(TITANV_SWEEP)
    model = train_model(titanv, booster_params=FAST)
    desc = load_kernel(str(own))
    rows = stencil_sweep(desc, gpu="titan-v").drop(columns=["time_ms", "status"])
    pred = predict_rows(model, rows, kernels={rows["kernel"][0]: desc})
    assert pred["ood_kernel"].all() and pred["ood_reason"].str.contains("never trained").all()
    # the fallback baseline is a model meaningful without calibration (not seed 004's unit-weight counts, which
    # put this stencil at minutes), scaled by how far the training runs lie from it: the mean log ratio of the
    # measured times to its own over every training run (these TITAN V times are not kernel-only: about 20x)
    assert model.baseline != "scaled-counts"
    analytical = np.exp(analytical_features(rows, kernels={rows["kernel"][0]: desc})[baseline_column(model.baseline)])
    trained = np.exp(analytical_features(titanv)[baseline_column(model.baseline)]).to_numpy()
    level = np.exp(np.mean(np.log(titanv["time_ms"].to_numpy() / trained)))
    np.testing.assert_allclose(pred["time_ms"] / analytical, level, rtol=1e-6)
    seen = predict_rows(model, titanv)
    width = np.log(pred["hi_ms"] / pred["lo_ms"])
    assert width.min() > np.log(seen["hi_ms"] / seen["lo_ms"]).max()
