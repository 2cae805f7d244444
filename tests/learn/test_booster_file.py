"""A model file's booster: its trees checked, then handed to xgboost as UBJSON bytes written by hybridperf.

The independent expectations: xgboost's own UBJSON bytes for the same booster (``save_raw("ubj")``) and its
predictions when it reads the booster's JSON itself; each malformed tree refused naming that tree.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xgboost as xgb
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hybridperf.learn.booster import check_booster
from hybridperf.learn.persist import ModelFileError, booster_from_json, read_model_document
from hybridperf.learn.ubjson import encode

DEFAULT = Path(__file__).resolve().parents[2] / "models" / "default.json"


@pytest.fixture(scope="module")
def shipped() -> list[tuple[str, str, int]]:
    """The shipped default model's three boosters (trained on recorded GPU runs): name, JSON text, features."""
    body = read_model_document(DEFAULT)
    n = int(body["estimator"]["n_features_in_"])
    n_difficulty = int(json.loads(body["intervals"]["difficulty"])["learner"]["learner_model_param"]["num_feature"])
    return [("residual", body["estimator"]["booster"], n), ("transfer", body["estimator"]["transfer_booster"], n),
            ("difficulty", body["intervals"]["difficulty"], n_difficulty)]


@pytest.fixture(scope="module")
def small() -> tuple[str, int]:
    """A booster fitted here with deep trees (node ids past int8 and int16 markers), as JSON text."""
    rng = np.random.default_rng(0)
    x = rng.random((3000, 5))
    y = np.sin(6 * x[:, 0]) + x[:, 1] * x[:, 2] - 1e6 * (x[:, 3] > 0.99)
    reg = xgb.XGBRegressor(n_estimators=150, max_depth=10, learning_rate=0.3, n_jobs=1).fit(x, y)
    return reg.get_booster().save_raw(raw_format="json").decode(), 5


def test_checked_document_encodes_to_xgboosts_own_bytes(shipped, small) -> None:
    for name, text, n in [*shipped, ("fitted here", *small)]:
        reference = xgb.XGBRegressor()
        reference.load_model(bytearray(text.encode()))
        assert encode(check_booster(text, n)) == reference.get_booster().save_raw(raw_format="ubj"), name


def test_loaded_booster_predicts_as_xgboost_reading_the_json(shipped, small) -> None:
    rng = np.random.default_rng(1)
    for name, text, n in [*shipped, ("fitted here", *small)]:
        reference = xgb.XGBRegressor()
        reference.load_model(bytearray(text.encode()))
        x = rng.normal(0, 3, (500, n))
        np.testing.assert_array_equal(booster_from_json(text, n).predict(x), reference.predict(x), err_msg=name)


def _trees(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return doc["learner"]["gradient_booster"]["model"]["trees"]


def _leaf(tree: dict[str, Any]) -> int:
    return tree["left_children"].index(-1)


# Each edit to tree k of a valid booster, and the words its refusal must hold.
EDITS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "child beyond the tree": (lambda t: t["left_children"].__setitem__(0, 10**5), "child links"),
    "child before its parent": (lambda t: t["right_children"].__setitem__(1, 0), "child links"),
    "a leaf with one child": (lambda t: t["right_children"].__setitem__(_leaf(t), 1), "child links"),
    "a node with two parents": (lambda t: t["right_children"].__setitem__(0, t["left_children"][0]),
                                "child of exactly one node"),
    "parent link wrong": (lambda t: t["parents"].__setitem__(2, 1), "parents do not match"),
    "root with a parent": (lambda t: t["parents"].__setitem__(0, 0), "parents do not match"),
    "split feature out of range": (lambda t: t["split_indices"].__setitem__(0, 99), "split features"),
    "leaf split beyond 32 bits": (lambda t: t["split_indices"].__setitem__(_leaf(t), 2**40), "split features"),
    "default_left 2": (lambda t: t["default_left"].__setitem__(0, 2), "default_left 0 or 1"),
    "categorical split": (lambda t: t["split_type"].__setitem__(0, 1), "numerical"),
    "weight beyond float32": (lambda t: t["base_weights"].__setitem__(0, 1e39), "float32 range"),
    "string condition": (lambda t: t["split_conditions"].__setitem__(0, "0.5"), "split_conditions must hold"),
    "float child id": (lambda t: t["left_children"].__setitem__(0, 1.0), "left_children must hold integers"),
    "short array": (lambda t: t["sum_hessian"].pop(), "sum_hessian must be a list"),
    "wrong id": (lambda t: t.__setitem__("id", 10**6), "id, num_nodes"),
    "leaf split -2**63": (lambda t: t["split_indices"].__setitem__(_leaf(t), -2**63), "split features"),
    "booleans for integers": (lambda t: t.__setitem__("default_left", [False] * len(t["default_left"])),
                              "default_left must hold integers"),
    # one long string: refused by its type, before numpy would allocate its width for every value
    "a megabyte string": (lambda t: t["split_conditions"].__setitem__(0, "x" * 1_000_000),
                          "split_conditions must hold numbers"),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
@pytest.mark.parametrize("k", [0, 37])
def test_each_malformed_tree_is_refused_by_name(small, edit: str, k: int) -> None:
    text, n = small
    doc = json.loads(text)
    change, words = EDITS[edit]
    change(_trees(doc)[k])
    with pytest.raises(ModelFileError, match=rf"malformed xgboost booster \(tree {k}: .*{words}"):
        booster_from_json(json.dumps(doc), n)


def test_the_unedited_booster_passes_and_integer_fields_become_ints(small) -> None:
    text, n = small
    doc = json.loads(text)
    model = doc["learner"]["gradient_booster"]["model"]
    model["iteration_indptr"] = [float(v) for v in model["iteration_indptr"]]  # 0.0 == 0: passes the checks
    doc["version"] = [float(v) for v in doc["version"]]
    checked = check_booster(json.dumps(doc), n)
    assert all(type(v) is int for v in checked["version"])
    assert all(type(v) is int for v in checked["learner"]["gradient_booster"]["model"]["iteration_indptr"])
    tree = _trees(checked)[3]
    assert tree["split_conditions"].dtype == np.float32 and tree["left_children"].dtype == np.int32
    booster_from_json(json.dumps(doc), n)  # xgboost reads it


def test_a_string_that_is_not_unicode_is_refused(small) -> None:
    """JSON's escape \\ud800 parses to a lone surrogate, which UTF-8 cannot hold: a one-line error, not a crash."""
    text, n = small
    doc = json.loads(text)
    doc["learner"]["attributes"]["note"] = "\ud800"
    with pytest.raises(ModelFileError, match="malformed xgboost booster: cannot write it as UBJSON"):
        booster_from_json(json.dumps(doc), n)


_INT_KEYS = ("left_children", "right_children", "parents", "split_indices", "split_type", "default_left")
_FLOAT_KEYS = ("base_weights", "loss_changes", "split_conditions", "sum_hessian")
_ODD = [-2**63, -2**31 - 1, -2**31, -2, -1, 0, 1, 2, 7, 2**31 - 1, 2**31, 2**40, 2**64, 1e39, -1e39, -0.0, 0.5,
        1e-45, True, False, None, "7", [1], {}]


@pytest.fixture(scope="module")
def tiny() -> tuple[str, int]:
    rng = np.random.default_rng(2)
    x = rng.random((400, 3))
    reg = xgb.XGBRegressor(n_estimators=8, max_depth=3, n_jobs=1).fit(x, x[:, 0] - x[:, 1] * x[:, 2])
    return reg.get_booster().save_raw(raw_format="json").decode(), 3


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.integers(0, 7), st.sampled_from(_INT_KEYS + _FLOAT_KEYS), st.integers(0, 14),
                                st.sampled_from(_ODD)), min_size=1, max_size=3))
def test_any_edit_of_the_trees_is_refused_or_loads_and_predicts(tiny, edits) -> None:
    """Edits of a booster's node arrays (ids out of range or past int32, wrong kinds, values past float32): each
    file is refused with a ModelFileError or loads into a booster that predicts finite times; xgboost's reader
    never sees a malformed tree (a crash would end the test process)."""
    text, n = tiny
    doc = json.loads(text)
    for tree, key, pos, value in edits:
        values = _trees(doc)[tree][key]
        values[pos % len(values)] = value
    try:
        reg = booster_from_json(json.dumps(doc), n)
    except ModelFileError:
        return
    assert np.isfinite(reg.predict(np.random.default_rng(3).random((50, n)))).all()
