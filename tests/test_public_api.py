"""The public API is explicit: sorted __all__ lists that name real objects."""
from __future__ import annotations

import importlib

import pytest

MODULES = ["hybridperf", "hybridperf.analytical", "hybridperf.hardware", "hybridperf.kernel", "hybridperf.formula",
           "hybridperf.errors", "hybridperf.analytical.run", "hybridperf.evaluation.reproduce"]


@pytest.mark.parametrize("name", MODULES)
def test_all_is_sorted_and_resolves(name: str) -> None:
    mod = importlib.import_module(name)
    # isort style (ruff RUF022): CONSTANTS, then Classes, then functions, each alphabetical.
    assert list(mod.__all__) == sorted(mod.__all__, key=lambda n: (0 if n.isupper() else 1 if n[0].isupper() else 2, n))
    for attr in mod.__all__:
        assert hasattr(mod, attr), attr
