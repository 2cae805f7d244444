"""Package attributes loaded on first use, so importing a package (and the command line) stays cheap."""
from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(package: str, names: Mapping[str, str], namespace: dict[str, Any]) -> tuple[
        Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for a package whose public ``names`` (name -> module) load lazily."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(names))

    if package in sys.modules:
        sys.modules[package].__class__ = _keep_names(package, frozenset(names))
    return __getattr__, __dir__


def _keep_names(package: str, shadowed: frozenset[str]) -> type[types.ModuleType]:
    """A module class that keeps a public name bound to its function when a submodule of the same name
    loads: the import system sets each submodule on its package once loaded, so without this
    ``from hybridperf.evaluation import evaluate`` gave the module ``evaluate.py`` after anything had imported
    it, and the function before (likewise ``hybridperf.advise`` and ``hybridperf.search.replay``). Such a
    submodule is reached through ``from hybridperf.evaluation.evaluate import ...`` (sys.modules), not as an
    attribute of its package, and ``import hybridperf.evaluation.evaluate as m`` gives the function."""

    class _Package(types.ModuleType):
        def __setattr__(self, name: str, value: Any) -> None:
            if name in shadowed and isinstance(value, types.ModuleType) and value.__name__ == f"{package}.{name}":
                return
            super().__setattr__(name, value)

    return _Package
