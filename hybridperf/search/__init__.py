"""Searching configuration spaces: Pareto pruning, model ranking, the measure-next loop, plots."""
from __future__ import annotations

from hybridperf._lazy import lazy_attributes

_NAMES = {
    "RankResult": "hybridperf.search.rank",
    "pareto_mask": "hybridperf.search.pareto",
    "rank_configs": "hybridperf.search.rank",
    "replay": "hybridperf.search.measure_next",
    "suggest_next": "hybridperf.search.measure_next",
}
__all__ = [
    "RankResult",
    "pareto_mask",
    "rank_configs",
    "replay",
    "suggest_next",
]
__getattr__, __dir__ = lazy_attributes(__name__, _NAMES, globals())
