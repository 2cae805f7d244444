"""The scenarios of scenarios.py give the stored reference outputs (see README.md).

Strings, counts and flags must match exactly. Floats must match to a relative 1e-4: the boosters
train in float32 and numpy/xgboost releases reorder sums, which moves outputs by up to ~1e-5
relative between library versions (measured: 6e-6 on ``tuned_titanv`` between xgboost 3.1 and
3.2); any change of behaviour moves them by orders of magnitude more.
"""
from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest

from tests.regression.scenarios import SCENARIOS

REFERENCE = json.loads(gzip.decompress(Path(__file__).with_name("reference.json.gz").read_bytes()))
RTOL = 1e-4


def _differences(got: Any, want: Any, path: str) -> list[str]:
    if isinstance(want, dict) and isinstance(got, dict):
        if sorted(got) != sorted(want):
            return [f"{path}: keys {sorted(got)} != {sorted(want)}"]
        return [d for k in want for d in _differences(got[k], want[k], f"{path}.{k}")]
    if isinstance(want, list) and isinstance(got, list):
        if len(got) != len(want):
            return [f"{path}: {len(got)} items != {len(want)}"]
        return [d for i, (g, w) in enumerate(zip(got, want)) for d in _differences(g, w, f"{path}[{i}]")]
    if isinstance(want, float) and isinstance(got, float):
        return [] if math.isclose(got, want, rel_tol=RTOL, abs_tol=0.0) else [f"{path}: {got!r} != {want!r}"]
    return [] if got == want and type(got) is type(want) else [f"{path}: {got!r} != {want!r}"]


def test_comparison_catches_a_change_beyond_the_tolerance() -> None:
    assert _differences({"a": [1.0, "x"]}, {"a": [1.0 + 1e-6, "x"]}, "") == []
    assert _differences({"a": [1.001, "x"]}, {"a": [1.0, "x"]}, "")
    assert _differences({"a": [1.0, "y"]}, {"a": [1.0, "x"]}, "")
    assert _differences({"a": [1, "x"]}, {"a": [1.0, "x"]}, "")  # an int where a float was is a change
    assert _differences({"a": [None]}, {"a": [1.0]}, "")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_matches_reference(name: str) -> None:
    got = json.loads(json.dumps(SCENARIOS[name](), default=str))
    diffs = _differences(got, REFERENCE[name], name)
    assert not diffs, f"{len(diffs)} differences, first: " + "; ".join(diffs[:5])
