"""The residual booster: the default XGBRegressor, and checks on its JSON before xgboost reads it."""
# Malformed trees crash xgboost's C++ reader or predict wrong, so a model file's booster is checked first.
from __future__ import annotations

import functools
import json
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from hybridperf.errors import HybridperfError
from hybridperf.inputs import check_json_size
from hybridperf.limits import MAX_TREE_NODES, MAX_TREES

__all__ = ["check_booster", "default_booster", "prediction_threads", "set_prediction_threads"]

_ROOT_PARENT = 2147483647  # xgboost's "no parent" node id
_INT = r"^[0-9]{1,9}$"
_TREE_KEYS = frozenset({"base_weights", "categories", "categories_nodes", "categories_segments", "categories_sizes",
                        "default_left", "id", "left_children", "loss_changes", "parents", "right_children",
                        "split_conditions", "split_indices", "split_type", "sum_hessian", "tree_param"})
_NODE_ARRAYS = ("base_weights", "default_left", "left_children", "loss_changes", "parents", "right_children",
                "split_conditions", "split_indices", "split_type", "sum_hessian")
_EMPTY = {"type": "array", "maxItems": 0}
_INT32_MAX = 2**31 - 1
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _obj(properties: dict[str, Any], required: tuple[str, ...] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "additionalProperties": False,
            "required": list(properties) if required is None else list(required)}


_SCHEMA = _obj({
    "version": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 1000}, "minItems": 3,
                "maxItems": 3},
    "learner": _obj({
        "attributes": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 1000},
                       "maxProperties": 100},
        "feature_names": {"type": "array", "items": {"type": "string", "maxLength": 1000}, "maxItems": 10_000},
        "feature_types": {"type": "array", "items": {"type": "string", "maxLength": 100}, "maxItems": 10_000},
        "gradient_booster": _obj({"name": {"const": "gbtree"}, "model": _obj({
            "gbtree_model_param": _obj({"num_parallel_tree": {"const": "1"},
                                        "num_trees": {"type": "string", "pattern": _INT}}),
            "iteration_indptr": {"type": "array", "items": {"type": "integer"}, "maxItems": MAX_TREES + 1},
            "tree_info": {"type": "array", "items": {"const": 0}, "maxItems": MAX_TREES},
            "trees": {"type": "array", "items": {"type": "object"}, "maxItems": MAX_TREES},
            "cats": _obj({"enc": _EMPTY, "feature_segments": _EMPTY, "sorted_idx": _EMPTY}),
        }, required=("gbtree_model_param", "iteration_indptr", "tree_info", "trees"))}),
        "learner_model_param": _obj({
            "base_score": {"type": "string", "pattern": r"^\[?[-+0-9.eE]{1,40}\]?$"},
            "boost_from_average": {"enum": ["0", "1"]}, "num_class": {"const": "0"},
            "num_feature": {"type": "string", "pattern": _INT}, "num_target": {"const": "1"}}),
        "objective": _obj({"name": {"enum": ["reg:squarederror", "reg:absoluteerror", "reg:pseudohubererror"]},
                           "reg_loss_param": {"type": "object", "maxProperties": 10,
                                              "additionalProperties": {"type": "string", "maxLength": 40}},
                           "pseudo_huber_param": {"type": "object", "maxProperties": 10,
                                                  "additionalProperties": {"type": "string", "maxLength": 40}}},
                          required=("name",)),
    }),
})


class _Bad(HybridperfError):
    pass


@functools.cache
def _validator() -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(_SCHEMA)


def _schema_error(validator: Any, doc: Any, where: str) -> None:
    from jsonschema.exceptions import best_match

    error = best_match(validator.iter_errors(doc))
    if error is not None:
        raise _Bad(f"{where}{error.json_path[1:]}: {' '.join(error.message.split())[:120]}")


def _refuse_constant(name: str) -> None:
    raise _Bad(f"non-finite number {name}")


def _numbers(values: list[Any], kinds: str) -> np.ndarray | None:
    """``values`` as a 1-d numpy array of Python ints (``kinds`` 'i') or ints and floats ('if'), None if any value
    is another type (a string, null, boolean or list). The types are checked before numpy sees the list: one long
    string would make numpy allocate that string's width for every value."""
    allowed = {int} if kinds == "i" else {int, float}
    if not set(map(type, values)) <= allowed:
        return None
    try:
        return np.array(values, dtype=np.int64 if kinds == "i" else np.float64)
    except OverflowError:  # an int beyond int64, or beyond the float range
        return None


def _tree_size(tree: Any, i: int, n_features: int) -> int:
    """One tree's keys, tree_param and array lengths; its node count."""
    if not isinstance(tree, dict) or set(tree) != _TREE_KEYS:
        raise _Bad(f"tree {i}: keys must be {sorted(_TREE_KEYS)}")
    param = tree["tree_param"]
    if not isinstance(param, dict) or set(param) != {"num_deleted", "num_feature", "num_nodes", "size_leaf_vector"} \
            or param["num_deleted"] != "0" or param["size_leaf_vector"] not in ("0", "1") \
            or not all(isinstance(param[k], str) and param[k].isdigit() and len(param[k]) < 10
                       for k in ("num_feature", "num_nodes")):
        raise _Bad(f"tree {i}: tree_param must hold num_deleted '0', num_feature, num_nodes and size_leaf_vector")
    n = int(param["num_nodes"])
    if tree["id"] != i or n < 1 or int(param["num_feature"]) != n_features:
        raise _Bad(f"tree {i}: id, num_nodes (>= 1) or num_feature ({n_features}) is wrong")
    if any(tree[k] != [] for k in ("categories", "categories_nodes", "categories_segments", "categories_sizes")):
        raise _Bad(f"tree {i}: categorical splits are not used by hybridperf")
    for key in _NODE_ARRAYS:
        if not isinstance(tree[key], list) or len(tree[key]) != n:
            raise _Bad(f"tree {i}: {key} must be a list of {n} values")
    return n


def _column(trees: list[dict[str, Any]], key: str, kinds: str) -> np.ndarray:
    """``key``'s values of every tree, end to end, as one numpy array (refused naming the first bad tree)."""
    arr = _numbers([v for tree in trees for v in tree[key]], kinds)
    if arr is None:
        bad = next((i for i, tree in enumerate(trees) if _numbers(tree[key], kinds) is None), 0)
        raise _Bad(f"tree {bad}: {key} must hold {'integers' if kinds == 'i' else 'numbers'}")
    return arr


def _refuse(bad_tree: np.ndarray, message: str) -> None:
    """Raise ``message`` for the first tree where ``bad_tree`` is true."""
    if bad_tree.any():
        raise _Bad(f"tree {int(np.argmax(bad_tree))}: {message}")


def _check_trees(trees: list[dict[str, Any]], n_features: int) -> None:
    """Every tree's arrays, all trees at once: numbers of the right kind, child links forming a tree
    (children after their parent), parents matching, features in range. The checked arrays replace the
    trees' lists, in the types xgboost keeps them in (for :mod:`hybridperf.learn.ubjson`)."""
    counts, total = [], 0
    for i, tree in enumerate(trees):
        counts.append(_tree_size(tree, i, n_features))
        total += counts[-1]
        if total > MAX_TREE_NODES:
            raise _Bad(f"more than {MAX_TREE_NODES:,} tree nodes")
    n = np.array(counts, dtype=np.int64)
    starts = np.cumsum(n) - n
    tree_of = np.repeat(np.arange(len(trees)), n)

    def hit(tree_ids: np.ndarray) -> np.ndarray:
        """Per tree: whether any of ``tree_ids`` names it."""
        return np.bincount(tree_ids, minlength=len(trees)) > 0

    def per_tree(bad_node: np.ndarray) -> np.ndarray:
        return hit(tree_of[bad_node])

    numbers = {key: _column(trees, key, "if") for key in ("base_weights", "loss_changes", "split_conditions",
                                                          "sum_hessian")}
    left, right, parents, split, kind, default = (_column(trees, k, "i") for k in (
        "left_children", "right_children", "parents", "split_indices", "split_type", "default_left"))
    node = np.arange(total) - starts[tree_of]
    size = n[tree_of]
    leaf = left == -1
    inner = ~leaf
    _refuse(per_tree((leaf != (right == -1)) | (inner & ((left <= node) | (right <= node) | (left >= size)
                                                         | (right >= size)))),
            "child links must be -1 (leaf) or point to a later node of the tree")
    # Children lie in 1..n-1 now: n - 1 of them, each node but the root hit once, is a tree.
    child_of = tree_of[inner]
    hits = np.bincount(np.concatenate([left[inner], right[inner]]) + np.concatenate([starts[child_of]] * 2),
                       minlength=total)
    _refuse((2 * np.bincount(child_of, minlength=len(trees)) != n - 1) | per_tree((node > 0) & (hits != 1)),
            "every node but the root must be the child of exactly one node")
    base = starts[child_of]
    wrong = (parents[base + left[inner]] != node[inner]) | (parents[base + right[inner]] != node[inner])
    _refuse((parents[starts] != _ROOT_PARENT) | hit(child_of[wrong]),
            "parents do not match the child links")
    _refuse(per_tree((inner & ((split < 0) | (split >= n_features))) | (kind != 0) | ((default != 0) & (default != 1))
                     | (split < -_INT32_MAX - 1) | (split > _INT32_MAX)),
            f"split features must be in 0..{n_features - 1}, numerical, default_left 0 or 1")
    for key, arr in numbers.items():
        _refuse(per_tree(np.abs(arr) > _FLOAT32_MAX), f"{key} must lie within the float32 range")
    cut = starts[1:]
    typed = {**{key: arr.astype(np.float32) for key, arr in numbers.items()},
             **{key: arr.astype(np.int32) for key, arr in zip(
                 ("left_children", "right_children", "parents", "split_indices"), (left, right, parents, split))},
             "split_type": kind.astype(np.uint8), "default_left": default.astype(np.uint8)}
    for key, arr in typed.items():
        for tree, part in zip(trees, np.split(arr, cut)):
            tree[key] = part
    for i, tree in enumerate(trees):
        tree["id"] = i
        tree["categories"], tree["categories_nodes"] = np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32)
        tree["categories_segments"], tree["categories_sizes"] = (np.zeros(0, dtype=np.int64),
                                                                 np.zeros(0, dtype=np.int64))


def _check_model(doc: dict[str, Any], n_features: int) -> None:
    learner = doc["learner"]
    model = learner["gradient_booster"]["model"]
    trees = model["trees"]
    if int(learner["learner_model_param"]["num_feature"]) != n_features:
        raise _Bad(f"num_feature is {learner['learner_model_param']['num_feature']}, the model has {n_features}")
    if int(model["gbtree_model_param"]["num_trees"]) != len(trees) or len(model["tree_info"]) != len(trees):
        raise _Bad(f"num_trees and tree_info do not match the {len(trees)} trees")
    if model["iteration_indptr"] != list(range(len(trees) + 1)):
        raise _Bad("iteration_indptr must be 0, 1, ..., number of trees (one tree per round)")
    _check_trees(trees, n_features)
    # JSON's 0.0 equals 0 and passes the schema's "integer": the integers as ints, the empty arrays typed.
    model["iteration_indptr"], model["tree_info"] = list(range(len(trees) + 1)), [0] * len(trees)
    doc["version"] = [int(v) for v in doc["version"]]  # required by the schema
    if "cats" in model:
        model["cats"] = {"enc": [], "feature_segments": np.zeros(0, dtype=np.int32),
                         "sorted_idx": np.zeros(0, dtype=np.int32)}


def check_booster(text: Any, n_features: int, error: type[HybridperfError] = HybridperfError) -> dict[str, Any]:
    """The document of a booster text, refused (``error``) unless it is xgboost's JSON for a single-target
    gbtree regressor on ``n_features`` numerical features with well-formed trees: xgboost's reader aborts the
    process on an empty text and crashes or mispredicts on malformed trees, so it reads only the returned
    document, as :func:`hybridperf.learn.ubjson.encode` writes it (the trees' arrays as numpy arrays in
    xgboost's own types, float32 values within its range, the integer fields as ints). A number is read as a
    float64 and then rounded to float32, where xgboost's JSON reader rounds the decimal to float32 at once: the two
    differ only for a decimal whose float64 is exactly a midpoint between two float32 values (within 2^-30 of a
    float32 ulp of it), which xgboost never writes (its shortest round-trip decimals lie next to their float32)."""
    if not isinstance(text, str) or not text.strip():
        raise error("model file has no booster where its mode needs one; retrain it")
    try:
        check_json_size(text, "booster")
        doc = json.loads(text, parse_constant=_refuse_constant)
        _schema_error(_validator(), doc, "booster")
        _check_model(doc, n_features)
        return doc
    except _Bad as exc:
        raise error(f"malformed xgboost booster ({exc}); retrain the model") from None
    except (ValueError, RecursionError) as exc:  # JSON syntax, number or depth
        if isinstance(exc, HybridperfError) and not isinstance(exc, _Bad):
            raise error(f"{exc}; retrain the model") from None
        raise error(f"the booster is not valid JSON ({' '.join(str(exc).split())[:100]}); retrain the model") \
            from None


def default_booster(random_state: int | None = 0, n_jobs: int = 2) -> Any:
    """The residual learner hybridperf uses unless told otherwise: a histogram XGBRegressor."""
    from xgboost import XGBRegressor

    return XGBRegressor(n_estimators=400, max_depth=6, learning_rate=0.05, subsample=0.8,
                        colsample_bytree=0.8, min_child_weight=2.0, reg_lambda=1.0, tree_method="hist",
                        random_state=random_state, n_jobs=n_jobs)


def set_prediction_threads(reg: Any, n_jobs: int | None) -> None:
    """A fitted regressor predicts with ``n_jobs`` threads (None: every core, xgboost's nthread 0, as a copy
    loaded from a model file does). For xgboost the booster is told too: ``set_params(n_jobs=None)`` alone
    never reaches it (xgboost skips None), so a booster fitted on 1 thread kept predicting on 1."""
    reg.set_params(n_jobs=n_jobs)
    if hasattr(reg, "get_booster"):
        reg.get_booster().set_param({"nthread": 0 if n_jobs is None else n_jobs})


# Boosters whose thread count prediction_threads holds: id -> [booster, users, thread count before].
_HELD: dict[int, list[Any]] = {}
_HELD_LOCK = threading.Lock()


@contextmanager
def prediction_threads(regressors: Iterable[Any], n: int) -> Iterator[None]:
    """Within the block, the xgboost regressors among ``regressors`` predict with ``n`` threads each: for
    callers that predict from several threads at once, where each booster's own threads would only compete
    for the same cores. Safe to nest and to enter from several threads: the first to enter sets the count
    (later ones keep it), the last to leave restores the count the booster had."""
    boosters = [r.get_booster() for r in regressors if hasattr(r, "get_booster")]
    with _HELD_LOCK:
        for b in boosters:
            held = _HELD.get(id(b))
            if held is None:
                nthread = json.loads(b.save_config())["learner"]["generic_param"]["nthread"]
                _HELD[id(b)] = [b, 1, int(nthread)]
                b.set_param({"nthread": n})
            else:
                held[1] += 1
    try:
        yield
    finally:
        with _HELD_LOCK:
            for b in boosters:
                held = _HELD[id(b)]
                held[1] -= 1
                if held[1] == 0:
                    b.set_param({"nthread": held[2]})
                    del _HELD[id(b)]
