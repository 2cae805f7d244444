"""Every module has a one-line docstring and a sorted __all__ naming real objects; the package API resolves."""
from __future__ import annotations

import importlib
import pkgutil

import pytest

import hybridperf

MODULES = sorted(m.name for m in pkgutil.walk_packages(hybridperf.__path__, "hybridperf.")
                 if not m.name.rsplit(".", 1)[-1].startswith("_"))


def _key(name: str) -> tuple[int, str]:
    # isort style (ruff RUF022): CONSTANTS, then Classes, then functions, each alphabetical.
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


@pytest.mark.parametrize("name", ["hybridperf", *MODULES])
def test_all_is_sorted_and_resolves(name: str) -> None:
    mod = importlib.import_module(name)
    assert mod.__doc__ and len(mod.__doc__.strip().splitlines()) == 1, "module docstring: one line"
    if name.startswith("hybridperf.cli"):
        return  # the command line is not a library API
    assert hasattr(mod, "__all__"), "every library module declares its public names"
    assert list(mod.__all__) == sorted(mod.__all__, key=_key)
    for attr in mod.__all__:
        assert hasattr(mod, attr), attr
