"""What limits a kernel and what a change could gain: GPUPerf benefits and GPA estimates."""
from __future__ import annotations

from hybridperf._lazy import lazy_attributes

_NAMES = {
    "Advice": "hybridperf.advise.benefits",
    "advise": "hybridperf.advise.benefits",
    "advise_samples": "hybridperf.advise.benefits",
}
__all__ = [
    "Advice",
    "advise",
    "advise_samples",
]
__getattr__, __dir__ = lazy_attributes(__name__, _NAMES, globals())
