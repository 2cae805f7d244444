"""The public API is explicit: sorted __all__ lists that name real objects."""
from __future__ import annotations

import importlib

import pytest

MODULES = ["hybridperf", "hybridperf.analytical", "hybridperf.hardware", "hybridperf.kernel", "hybridperf.formula",
           "hybridperf.errors", "hybridperf.analyze", "hybridperf.reproduce"]


@pytest.mark.parametrize("name", MODULES)
def test_all_is_sorted_and_resolves(name: str) -> None:
    mod = importlib.import_module(name)
    assert list(mod.__all__) == sorted(mod.__all__)
    for attr in mod.__all__:
        assert hasattr(mod, attr), attr
