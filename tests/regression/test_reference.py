"""The scenarios of scenarios.py give exactly the stored reference outputs (see README.md)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.regression.scenarios import SCENARIOS

REFERENCE = json.loads(gzip.decompress(Path(__file__).with_name("reference.json.gz").read_bytes()))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_matches_reference(name: str) -> None:
    got = json.loads(json.dumps(SCENARIOS[name](), default=str))
    want = REFERENCE[name]
    assert sorted(got) == sorted(want)
    for key in want:
        assert got[key] == want[key], f"{name}.{key} changed"
