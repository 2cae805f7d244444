"""Judging the product: splits, metrics and baselines side by side; the papers' numbers reproduced."""
from __future__ import annotations

from hybridperf._lazy import lazy_attributes

_NAMES = {
    "SPLITS": "hybridperf.evaluation.splits",
    "Evaluation": "hybridperf.evaluation.evaluate",
    "evaluate": "hybridperf.evaluation.evaluate",
    "run_checks": "hybridperf.evaluation.reproduce",
}
__all__ = [
    "SPLITS",
    "Evaluation",
    "evaluate",
    "run_checks",
]
__getattr__, __dir__ = lazy_attributes(__name__, _NAMES, globals())
