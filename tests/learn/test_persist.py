"""Model files: identical predictions after a round trip; damaged files are refused clearly."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hybridperf.errors import HybridperfError
from hybridperf.learn.model import load_model, predict_rows, save_model, train_model
from hybridperf.learn.persist import ModelFileError, decode_array, encode_array
from tests.paths import TITANV_SWEEP

SWEEP = TITANV_SWEEP


@pytest.fixture(scope="module")
def model_file(tmp_path_factory) -> Path:
    model = train_model(pd.read_csv(SWEEP), booster_params={"n_estimators": 60})
    path = tmp_path_factory.mktemp("m") / "model.json"
    save_model(model, path)
    return path


@pytest.mark.parametrize("mode", ["hybrid", "boosting", "calibrated", "analytical"])
def test_round_trip_identical_predictions(tmp_path: Path, mode: str) -> None:
    df = pd.read_csv(SWEEP)
    model = train_model(df, mode=mode, booster_params={"n_estimators": 40}, baseline="roofline")
    before = predict_rows(model, df)
    save_model(model, tmp_path / "m.json")
    after = predict_rows(load_model(tmp_path / "m.json"), df)
    pd.testing.assert_frame_equal(before, after)


def test_file_is_plain_json_with_provenance(model_file: Path) -> None:
    doc = json.loads(model_file.read_text())
    meta = doc["body"]["metadata"]
    assert {"versions", "kernels", "gpus", "created", "feature_version", "data"} <= set(meta) or \
        {"versions", "kernels", "gpus", "created", "feature_version"} <= set(meta)
    assert "seed004-matvec" in doc["body"]["features"]["domain_"]
    booster = doc["body"]["estimator"]["booster"]
    assert booster and "learner" in json.loads(booster)


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "bad.json"
    p.write_text(text)
    return p


def test_truncated_file_is_refused(tmp_path: Path, model_file: Path) -> None:
    text = model_file.read_text()
    with pytest.raises(ModelFileError, match="truncated"):
        load_model(_write(tmp_path, text[: len(text) // 2]))


def test_tampered_file_is_refused(tmp_path: Path, model_file: Path) -> None:
    doc = json.loads(model_file.read_text())
    doc["body"]["estimator"]["offset_"] = 1.0
    with pytest.raises(ModelFileError, match="checksum mismatch"):
        load_model(_write(tmp_path, json.dumps(doc)))


def test_incompatible_versions_are_refused(tmp_path: Path, model_file: Path) -> None:
    import hashlib

    for field, value, message in [("format", "hybridperf-model/99", "model format"),
                                  ("feature_version", 999, "feature version")]:
        doc = json.loads(model_file.read_text())
        doc["body"][field] = value
        payload = json.dumps(doc["body"], sort_keys=True, allow_nan=False).encode()
        doc["sha256"] = hashlib.sha256(payload).hexdigest()
        with pytest.raises(ModelFileError, match=message):
            load_model(_write(tmp_path, json.dumps(doc)))


@pytest.mark.parametrize("text, message", [
    ("", "truncated"), ("[1, 2]", "not a hybridperf model"), ('{"body": {}, "sha256": "0"}', "checksum"),
    ("\x00\x01", "truncated"),
])
def test_garbage_is_refused(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ModelFileError, match=message) as e:
        load_model(_write(tmp_path, text))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("number", ["1e999", "-1e999", "1" * 400 + ".5", "12e308", "1" + "0" * 400, "-" + "9" * 309])
def test_numbers_beyond_the_float_range_are_refused(tmp_path: Path, model_file: Path, number: str) -> None:
    text = model_file.read_text().replace('"offset_": ', f'"offset_": {number}, "x": ', 1)
    with pytest.raises(ModelFileError, match="out of range") as e:
        load_model(_write(tmp_path, text))
    assert "\n" not in str(e.value)


def test_wrong_types_in_large_fields_give_a_short_message(tmp_path: Path, model_file: Path) -> None:
    """A wrong type where a large array or tree belongs is named in one short line, however large the value."""
    import hashlib

    from hybridperf.learn.schema import validate_body

    doc = json.loads(model_file.read_text())
    body = doc["body"]
    assert validate_body(body) is None
    scores = [float(x) for x in decode_array(next(iter(body["intervals"]["scores"].values())), "scores")]
    assert len(scores) >= 10
    for field, path in [("intervals", ("intervals",)), ("estimator", ("estimator", "oof_abs_log_errors_"))]:
        bad = json.loads(json.dumps(body))
        target = bad
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = {"scores": scores * 50, "booster": body["estimator"]["booster"]}  # an object, not a list
        message = validate_body(bad)
        assert message is not None and path[-1] in message and len(message) < 300, (field, message)
        doc2 = {**doc, "body": bad}
        doc2["sha256"] = hashlib.sha256(json.dumps(bad, sort_keys=True, allow_nan=False).encode()).hexdigest()
        with pytest.raises(ModelFileError) as e:
            load_model(_write(tmp_path, json.dumps(doc2)))
        assert "\n" not in str(e.value) and len(str(e.value)) < 500


def test_encoded_arrays_round_trip_bit_for_bit() -> None:
    rng = np.random.default_rng(0)
    a = np.concatenate([rng.normal(size=1000) * 10.0 ** rng.integers(-300, 300, 1000), [0.0, -0.0, 5e-324, np.nan]])
    out = decode_array(encode_array(a), "a")
    assert out.dtype == np.float64 and out.tobytes() == a.tobytes()  # NaN, -0.0 and subnormals included
    # infinities become NaN (a missing value), as format 2's null did
    np.testing.assert_array_equal(decode_array(encode_array([1.0, np.inf, -np.inf]), "a"), [1.0, np.nan, np.nan])
    assert decode_array(encode_array([]), "a").shape == (0,)


@pytest.mark.parametrize("text", ["f8le:!!", "f8le:" + "QUJD", "f4le:AAAAAAAA8D8=", "AAAAAAAA8D8=",
                                  "f8le:AAAAAAAA8H8="])  # bad base64, 3 bytes, wrong prefix, no prefix, +inf
def test_malformed_encoded_arrays_are_refused(text: str) -> None:
    with pytest.raises(ModelFileError, match="encoded float array"):
        decode_array(text, "field")


def test_format_2_files_with_number_lists_still_load(tmp_path: Path, model_file: Path) -> None:
    """A model file written by the previous format (float arrays as JSON lists, null for NaN) loads and
    predicts exactly as the same model in format 3."""
    import hashlib

    doc = json.loads(model_file.read_text())
    body = doc["body"]
    assert body["format"] == "hybridperf-model/3"

    def as_list(text: str) -> list:
        return [None if np.isnan(x) else float(x) for x in decode_array(text, "x")]

    est = body["estimator"]
    for key in ("oof_abs_log_errors_", "extrap_abs_log_errors_", "feature_min_", "feature_max_"):
        if est.get(key) is not None:
            est[key] = as_list(est[key])
    body["intervals"]["scores"] = {k: as_list(v) for k, v in body["intervals"]["scores"].items()}
    body["format"] = "hybridperf-model/2"
    doc["sha256"] = hashlib.sha256(json.dumps(body, sort_keys=True, allow_nan=False).encode()).hexdigest()
    old = load_model(_write(tmp_path, json.dumps(doc)))
    new = load_model(model_file)
    rows = pd.read_csv(SWEEP).head(50)
    pd.testing.assert_frame_equal(predict_rows(old, rows), predict_rows(new, rows))
    for k, v in new.intervals.scores.items():
        np.testing.assert_array_equal(old.intervals.scores[k], v)


def _reference_first_non_number(values: list, nullable: bool) -> int | None:
    for i, x in enumerate(values):
        if not (isinstance(x, (int, float)) and not isinstance(x, bool)) and not (x is None and nullable):
            return i
    return None


@pytest.mark.parametrize("seed", range(30))
def test_first_non_number_matches_the_item_by_item_test(seed: int) -> None:
    from hybridperf.learn.persist import first_non_number

    rng = np.random.default_rng(seed)
    pool = [1, -2, 0.5, float(10**300), None, True, False, "1.5", [1], {}, np.float64(2.0), np.int64(3), 2**70]
    n = int(rng.integers(0, 12))
    values = [pool[int(rng.integers(0, 5 if rng.random() < 0.7 else len(pool)))] for _ in range(n)]
    for nullable in (True, False):
        assert first_non_number(values, nullable) == _reference_first_non_number(values, nullable), values


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ModelFileError, match="no such file"):
        load_model(tmp_path / "none.json")


def test_write_is_atomic(tmp_path: Path, model_file: Path, monkeypatch) -> None:
    model = load_model(model_file)
    target = tmp_path / "m.json"
    target.write_text("previous")
    import hybridperf.files as files

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(files.os, "fsync", boom)
    with pytest.raises(HybridperfError, match="disk full"):
        save_model(model, target)
    assert target.read_text() == "previous"
    assert list(tmp_path.iterdir()) == [target]


def test_predictions_are_positive_and_flag_unseen_sizes(model_file: Path) -> None:
    model = load_model(model_file)
    rows = pd.DataFrame({"kernel": "seed004-matvec", "gpu": "titan-v", "size.N": [3072.0, 65536.0, 2048.0]})
    out = predict_rows(model, rows)  # trained at N = 1024, 3072, 5120, ..., 32768
    assert (out.time_ms > 0).all() and (out.lo_ms < out.time_ms).all() and (out.time_ms < out.hi_ms).all()
    assert list(out.out_of_domain) == [False, True, True]
    assert "outside the trained range" in out.ood_reason.iloc[1] and out.ood_size_factor.iloc[1] > 1
    assert "between trained sizes, 1.5x from the nearest" in out.ood_reason.iloc[2]
    assert np.isfinite(out.time_ms).all()


def test_prediction_rows_with_repeated_index_labels(model_file: Path) -> None:
    model = load_model(model_file)
    rows = pd.DataFrame({"kernel": "seed004-matvec", "gpu": "titan-v", "size.N": [2048.0, 4096.0, 2048.0]},
                        index=[7, 7, 3])
    out = predict_rows(model, rows)
    assert list(out.index) == [7, 7, 3]
    assert out.time_ms.iloc[0] == out.time_ms.iloc[2] != out.time_ms.iloc[1]


def test_signature_with_model_key(tmp_path: Path, model_file: Path, monkeypatch) -> None:
    model = load_model(model_file)
    unsigned = tmp_path / "unsigned.json"
    save_model(model, unsigned)
    monkeypatch.setenv("HYBRIDPERF_MODEL_KEY", "secret")
    signed = tmp_path / "signed.json"
    save_model(model, signed)
    doc = json.loads(signed.read_text())
    assert len(doc["hmac_sha256"]) == 64
    load_model(signed)  # the key that signed it verifies it
    with pytest.raises(ModelFileError, match="not signed"):
        load_model(unsigned)
    monkeypatch.setenv("HYBRIDPERF_MODEL_KEY", "other")
    with pytest.raises(ModelFileError, match="signature does not match"):
        load_model(signed)
    monkeypatch.delenv("HYBRIDPERF_MODEL_KEY")
    load_model(signed)  # without a key the checksum alone is checked (integrity, not authenticity)


def test_save_refuses_a_model_outside_the_schema(tmp_path: Path, model_file: Path) -> None:
    model = load_model(model_file)
    bad = type(model)(pipeline=model.pipeline, metadata={**model.metadata,
                                                          "booster_params": {"n_estimators": 10**6}})
    with pytest.raises(ModelFileError, match="n_estimators"):
        save_model(bad, tmp_path / "m.json")
    assert not (tmp_path / "m.json").exists()


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_special_files_are_refused_before_reading(tmp_path: Path, special: str) -> None:
    import os

    path = special
    if special == "fifo":
        path = str(tmp_path / "m.json")
        os.mkfifo(path)  # opening it for reading would block until a writer comes
    with pytest.raises(ModelFileError, match="not a model file"):
        load_model(path)


def test_a_shortlist_order_correlation_outside_minus_one_to_one_is_refused_on_load(tmp_path: Path,
                                                                                    model_file: Path) -> None:
    """rank's order correlation (intervals.shortlist_hits[k].rho) read from a file: kept when in (-1, 1), else a
    one-line ModelFileError, whether the schema or the loader catches it."""
    import hashlib

    def with_rho(rho):
        doc = json.loads(model_file.read_text())
        doc["body"]["intervals"]["shortlist_hits"] = {"k": {"q": [0.1], "p": [0.5], "groups": [1.0], "rho": rho}}
        doc["sha256"] = hashlib.sha256(json.dumps(doc["body"], sort_keys=True, allow_nan=False).encode()).hexdigest()
        return _write(tmp_path, json.dumps(doc))

    assert load_model(with_rho(0.5)).intervals.shortlist_hits["k"]["rho"] == 0.5
    for bad in (1.5, -1, "0.8", True, [0.5]):
        with pytest.raises(ModelFileError) as e:
            load_model(with_rho(bad))
        assert "rho" in str(e.value) and "\n" not in str(e.value), bad


def test_the_weights_inside_the_trained_sizes_are_checked_on_load(tmp_path: Path, model_file: Path) -> None:
    """The residual weights inside the trained sizes travel with their per-kernel size ranges: a file with the
    weights and no ranges, or ranges of another length than the extrapolation columns, is a one-line
    ModelFileError; a file with none of the three (written before them) loads with the forward weights alone."""
    import hashlib

    def edited(change):
        doc = json.loads(model_file.read_text())
        change(doc["body"]["estimator"])
        doc["sha256"] = hashlib.sha256(json.dumps(doc["body"], sort_keys=True, allow_nan=False).encode()).hexdigest()
        return _write(tmp_path, json.dumps(doc))

    est = json.loads(model_file.read_text())["body"]["estimator"]
    assert est["within_weight_"] is not None and est["size_ranges_"]  # the TITAN V sweep has forward fits
    for change, word in [(lambda e: e.pop("size_ranges_"), "'size_ranges_' is a dependency of 'within_weight_'"),
                         (lambda e: e["size_ranges_"][0][1].append(3.0), "size_ranges_"),
                         (lambda e: e.update(within_weight_=1.5), "within_weight_"),
                         (lambda e: e["params"].update(group_columns=None), "needs extrapolation and group columns")]:
        with pytest.raises(ModelFileError) as err:
            load_model(edited(change))
        assert word in str(err.value) and "\n" not in str(err.value)
    old = load_model(edited(lambda e: [e.pop(k) for k in ("within_weight_", "within_weights_", "size_ranges_")]))
    assert old.pipeline.named_steps["hybrid"].within_weight_ is None
