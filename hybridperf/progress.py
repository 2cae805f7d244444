"""Progress of long work, reported to whoever listens: the library draws nothing itself."""
from __future__ import annotations

# Long loops (training fits, tuning trials, evaluation methods, rank chunks, replays, calibration, imports,
# recording) open a task() and advance it. Without a listener that costs nothing. The command line
# installs one (reporting()) that draws bars with an ETA on stderr; a notebook could install another:
#     with task("fit", total=3) as t:
#         for _ in range(3):
#             t.advance()
import contextlib
import threading
from collections.abc import Iterable, Iterator
from typing import Any, Protocol, TypeVar

__all__ = ["Reporter", "Task", "reporting", "task", "track"]

T = TypeVar("T")


class Reporter(Protocol):
    """What a listener implements: tasks are started, advanced and stopped by id."""

    def start(self, description: str, total: float | None) -> Any: ...

    def advance(self, task_id: Any, amount: float) -> None: ...

    def stop(self, task_id: Any) -> None: ...


_lock = threading.Lock()
_reporter: Reporter | None = None  # process-wide (worker threads report too); set by reporting()


@contextlib.contextmanager
def reporting(reporter: Reporter | None) -> Iterator[None]:
    """Send the progress of the work done inside the block to ``reporter`` (None: to nobody)."""
    global _reporter
    with _lock:
        old, _reporter = _reporter, reporter
    try:
        yield
    finally:
        with _lock:
            _reporter = old


class Task:
    """A running piece of work: :meth:`advance` it as parts finish."""

    __slots__ = ("_id", "_reporter")

    def __init__(self, reporter: Reporter | None, task_id: Any) -> None:
        self._reporter, self._id = reporter, task_id

    def advance(self, amount: float = 1) -> None:
        if self._reporter is not None:
            self._reporter.advance(self._id, amount)


@contextlib.contextmanager
def task(description: str, total: float | None = None) -> Iterator[Task]:
    """A task of ``total`` parts (None: unknown, shown as a spinner) for the block's duration."""
    reporter = _reporter
    task_id = reporter.start(description, total) if reporter is not None else None
    try:
        yield Task(reporter, task_id)
    finally:
        if reporter is not None:
            reporter.stop(task_id)


def track(items: Iterable[T], description: str, total: float | None = None) -> Iterator[T]:
    """Iterate over ``items``, advancing a task by one per item (``total`` defaults to ``len(items)``)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with task(description, total) as t:
        for item in items:
            yield item
            t.advance()
