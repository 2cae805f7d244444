"""Hostile variants of a trained model file: broken files, edited-and-rehashed bodies, bad boosters, signatures."""
from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.hostile.workspace import rehash

KEY = "hostile-suite-key"
BASIC = ("trunc", "garbage", "list", "nan", "e999", "tampered", "bigint", "deep", "containers", "latin1", "extra_key",
         "nosha")
SIGNED = ("signed", "signed_other", "signed_tampered")


def _tree(doc: dict[str, Any], edit: Callable[[dict[str, Any]], None]) -> None:
    booster = json.loads(doc["body"]["estimator"]["booster"])
    edit(booster)
    doc["body"]["estimator"]["booster"] = json.dumps(booster)


def _trees(b: dict[str, Any]) -> list[dict[str, Any]]:
    return b["learner"]["gradient_booster"]["model"]["trees"]


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        node = doc["body"]
        keys = path.split(".")
        for k in keys[:-1]:
            node = node[int(k)] if isinstance(node, list) else node[k]
        node[keys[-1]] = value
    return edit


def _encoded(values: list[float]) -> str:
    """Floats as format 3 stores an array, written here byte by byte (infinities kept, unlike encode_array)."""
    return "f8le:" + base64.b64encode(struct.pack(f"<{len(values)}d", *values)).decode()


def _signed(doc: dict[str, Any], key: str) -> str:
    payload = json.dumps(doc["body"], sort_keys=True, allow_nan=False).encode()
    return json.dumps({**doc, "hmac_sha256": hmac.new(key.encode(), payload, hashlib.sha256).hexdigest()})


# Edits to the body; each file is re-hashed so that only the schema and booster checks can refuse it.
REHASHED: dict[str, Callable[[dict[str, Any]], None]] = {
    "booster_empty": _set("estimator.booster", ""),
    "booster_space": _set("estimator.booster", "  "),
    "booster_obj": _set("estimator.booster", "{}"),
    "booster_garbage": _set("estimator.booster", "xx{"),
    "booster_null_text": _set("estimator.booster", "null"),
    "booster_number": _set("estimator.booster", 12),
    "n_estimators": _set("metadata.booster_params.n_estimators", 10**9),
    "reg_n_estimators": _set("estimator.params.regressor.n_estimators", 10**7),
    "n_jobs": _set("estimator.params.regressor.n_jobs", 10**6),
    "max_depth": _set("metadata.booster_params.max_depth", 10**4),
    "learning_rate": _set("metadata.booster_params.learning_rate", -1),
    "coverage": _set("estimator.params.coverage", 2),
    "mode": _set("estimator.params.mode", "nope"),
    "weighting": _set("estimator.params.weighting", "fast"),
    "offset": _set("estimator.offset_", 1e300),
    # the kernels a GPU with no runs predicts from transfer_baseline_column, and that column
    "transfer_kernels_str": _set("estimator.transfer_kernels_", ["seed004-matvec"]),
    "transfer_column_oob": _set("estimator.params.transfer_baseline_column", 10**6),
    "transfer_column_null": _set("estimator.params.transfer_baseline_column", None),
    # a column the features have not, and offset tables for other group columns (predict: ValueError, IndexError)
    "baseline_column_name": _set("estimator.params.baseline_column", "nope"),
    "group_offsets_empty": _set("estimator.group_offsets_", []),
    "neg_oof": _set("estimator.oof_abs_log_errors_", [-1.0, 0.5]),
    "str_oof": _set("estimator.oof_abs_log_errors_", ["x"]),
    "huge_int_oof": _set("estimator.oof_abs_log_errors_", [10**400, 0.5]),  # an int no float holds
    # Format 3's encoded arrays (f8le: + base64 of float64 bytes): out of range, an infinity, not base64, odd length.
    "neg_oof_encoded": _set("estimator.oof_abs_log_errors_", _encoded([-1.0, 0.5])),
    "inf_score_encoded": lambda d: d["body"]["intervals"]["scores"].__setitem__(
        next(iter(d["body"]["intervals"]["scores"])), _encoded([0.5, float("inf")])),
    "not_base64_encoded": _set("estimator.feature_max_", "f8le:!!not base64!!"),
    "odd_length_encoded": _set("estimator.feature_min_", "f8le:" + base64.b64encode(b"1234567").decode()),
    "huge_int_min": _set("estimator.feature_min_", [-(10**400)]),
    "weight": _set("estimator.residual_weight_", 7.0),
    "n_features": _set("estimator.n_features_in_", 10**8),
    "feature_min_len": _set("estimator.feature_min_", [0.0]),
    "columns_empty": _set("features.columns_", []),
    "baseline": _set("features.baseline_", "os.system"),
    "domain": _set("features.domain_", {"k": {"gpus": "all"}}),
    "domain_combinations_huge": _set("features.domain_", {"k": {"gpus": ["a"], "combinations": [2**60]}}),
    "domain_combinations_text": _set("features.domain_", {"k": {"gpus": ["a"], "combinations": "all"}}),
    # a GPU with few runs predicted through its donors (hybridperf.learn.donors): a weight out of range, weights
    # not summing to 1, the GPU its own donor
    "donor_weight_range": _set("intervals.donor_stacks", [{"kernel": "k", "gpu": "a", "donors": ["b"],
                                                           "weights": [0.5, 2.0], "level": 0.0}]),
    "donor_weight_sum": _set("intervals.donor_stacks", [{"kernel": "k", "gpu": "a", "donors": ["b"],
                                                         "weights": [0.2, 0.2], "level": 0.0}]),
    "donor_self": _set("intervals.donor_stacks", [{"kernel": "k", "gpu": "a", "donors": ["a"],
                                                   "weights": [0.5, 0.5], "level": 0.0}]),
    "unknown_param": _set("estimator.params.evil", 1),
    "metadata_list": _set("metadata", [1, 2]),
    "n_rows": _set("metadata.n_rows", -5),
    "feature_version": _set("feature_version", 99),
    "format": _set("format", "hybridperf-model/99"),
}
TREE_EDITS: dict[str, Callable[[dict[str, Any]], None]] = {
    "child_oob": lambda b: _trees(b)[0]["left_children"].__setitem__(0, 99_999),
    "child_cycle": lambda b: _trees(b)[0]["left_children"].__setitem__(1, 0),
    "child_neg": lambda b: _trees(b)[0]["left_children"].__setitem__(0, -5),
    "split_oob": lambda b: _trees(b)[0]["split_indices"].__setitem__(0, 10**6),
    "short_array": lambda b: _trees(b)[0]["base_weights"].pop(),
    "num_nodes": lambda b: _trees(b)[0]["tree_param"].__setitem__("num_nodes", "999999999"),
    "num_trees": lambda b: b["learner"]["gradient_booster"]["model"]["gbtree_model_param"].__setitem__(
        "num_trees", "5000"),
    "tree_info": lambda b: b["learner"]["gradient_booster"]["model"].__setitem__(
        "tree_info", [5] * len(_trees(b))),
    "indptr": lambda b: b["learner"]["gradient_booster"]["model"].__setitem__("iteration_indptr", [0, 10**6]),
    "objective": lambda b: b["learner"]["objective"].__setitem__("name", "reg:nope"),
    "num_feature": lambda b: b["learner"]["learner_model_param"].__setitem__("num_feature", "-1"),
    "categorical": lambda b: _trees(b)[0]["split_type"].__setitem__(0, 1),
    "string_weight": lambda b: _trees(b)[0]["base_weights"].__setitem__(0, "x"),
    # values hybridperf converts to xgboost's float32 / int32 before xgboost reads them
    "weight_beyond_float32": lambda b: _trees(b)[0]["base_weights"].__setitem__(0, 1e39),
    "leaf_split_beyond_int32": lambda b: _trees(b)[0]["split_indices"].__setitem__(
        _trees(b)[0]["left_children"].index(-1), 2**40),
    "parent_wrong": lambda b: _trees(b)[1]["parents"].__setitem__(2, 1),
    "surrogate_attribute": lambda b: b["learner"]["attributes"].__setitem__("note", "\ud800"),
}


def variant_names() -> list[str]:
    """Names of the model variants :func:`write_variants` writes (``model_<name>.json``)."""
    return sorted([*BASIC, *SIGNED, *(f"re_{n}" for n in REHASHED), *(f"tree_{n}" for n in TREE_EDITS)])


def write_variants(model: Path, w: Path) -> list[str]:
    """Write every hostile model variant of ``model`` into ``w`` as ``model_<name>.json``; returns the names."""
    text = model.read_text()
    doc = json.loads(text)
    def inject(value: str) -> str:
        return text.replace('"offset_": ', f'"offset_": {value}, "x": ', 1)

    files: dict[str, str | bytes] = {
        "trunc": text[: len(text) // 2],
        "garbage": "not json",
        "list": "[1, 2]",
        "nan": inject("NaN"),
        "e999": inject("1e999"),
        "tampered": inject("1.5"),
        "bigint": '{"body": {}, "sha256": ' + "9" * 5000 + "}",
        "deep": "[" * 100_000 + "]" * 100_000,
        "containers": "[" + ",".join(["{}"] * 2_100_000) + "]",
        "latin1": b'{"body": "\xe9"}',
        "extra_key": json.dumps({**doc, "evil": 1}),
        "nosha": json.dumps({"body": doc["body"]}),
    }
    for name, edit in REHASHED.items():
        d = copy.deepcopy(doc)
        edit(d)
        files[f"re_{name}"] = rehash(d)
    for name, edit in TREE_EDITS.items():
        d = copy.deepcopy(doc)
        _tree(d, edit)
        files[f"tree_{name}"] = rehash(d)
    files["signed"] = _signed(doc, KEY)
    files["signed_other"] = _signed(doc, "another-key")
    signed_tampered = copy.deepcopy(doc)
    _set("estimator.offset_", 0.25)(signed_tampered)
    files["signed_tampered"] = json.dumps({**json.loads(rehash(signed_tampered)),
                                           "hmac_sha256": json.loads(_signed(doc, KEY))["hmac_sha256"]})
    assert sorted(files) == variant_names()
    for name, content in files.items():
        path = w / f"model_{name}.json"
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    (w / "model_ok.json").write_text(text)
    with open(w / "model_sparse.json", "wb") as fh:
        fh.truncate(65 << 20)
    return sorted(files)
