"""The runner interface: what the recorder needs from whatever launches kernels (CuPy or a fake)."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from hybridperf.errors import RecordError
from hybridperf.record.bench import LaunchPlan
from hybridperf.record.plan import PlannedRow

__all__ = ["ContextLost", "Launch", "RunFailed", "Runner"]


class RunFailed(RecordError):
    """This configuration failed (compile error, launch error, resource limit); record it and go on.

    The message becomes the row's ``reason``; ``counters`` (e.g. the registers of a kernel that
    compiled but could not launch) are recorded with it.
    """

    def __init__(self, message: str, counters: Mapping[str, float] | None = None) -> None:
        super().__init__(" ".join(str(message).split()))
        self.counters = dict(counters or {})


class ContextLost(RunFailed):
    """The failure corrupted the CUDA context (illegal address, launch failure): record the row, stop."""


class Launch(Protocol):
    """One compiled, ready-to-run configuration."""

    counters: Mapping[str, float]

    def time_ms(self) -> float:
        """Run the kernel once and return its time in milliseconds (raises RunFailed)."""
        ...

    def close(self) -> None:
        """Release what only this configuration needs."""
        ...


# A runner prepares one configuration (compile, allocate, check resources) or raises RunFailed.
Runner = Callable[[PlannedRow, LaunchPlan], Launch]
