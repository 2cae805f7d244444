"""The command line's listener for :mod:`hybridperf.progress`: rich bars with an ETA on stderr.

Bars are drawn only when stderr is a terminal and neither ``--quiet`` nor ``--json``-style machine output
was asked for; with ``-v`` each finished task also prints one line with its duration (on a terminal or not),
so logs of batch jobs show where the time went.
"""
from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from hybridperf.cli.render import DISPLAY, console
from hybridperf.progress import reporting

__all__ = ["bars_enabled", "show_progress"]


def bars_enabled() -> bool:
    """Progress bars go to stderr, only on a terminal and without --quiet."""
    return not DISPLAY.quiet and sys.stderr.isatty()


class _RichReporter:
    """Tasks as rich progress bars; a task without a total shows a spinner and the elapsed time."""

    def __init__(self, bars: bool, log: bool) -> None:
        self._progress: Any = None
        self._log = log
        self._started: dict[Any, tuple[str, float]] = {}
        self._next = 0
        self._lock = threading.Lock()  # replays report from worker threads
        if bars:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                      MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("eta"),
                                      TimeRemainingColumn(), console=console(stderr=True), transient=True,
                                      refresh_per_second=8)

    def __enter__(self) -> _RichReporter:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._progress is not None:
            self._progress.stop()

    def start(self, description: str, total: float | None) -> Any:
        with self._lock:
            if self._progress is not None:
                task_id = self._progress.add_task(description, total=total)
            else:
                task_id, self._next = self._next, self._next + 1
            self._started[task_id] = (description, time.perf_counter())
        return task_id

    def advance(self, task_id: Any, amount: float) -> None:
        if self._progress is not None:
            self._progress.advance(task_id, amount)

    def stop(self, task_id: Any) -> None:
        with self._lock:
            description, t0 = self._started.pop(task_id, ("", time.perf_counter()))
            if self._progress is not None:
                self._progress.remove_task(task_id)
        if self._log:
            print(f"hybridperf: {description}: done in {time.perf_counter() - t0:.1f} s", file=sys.stderr)


@contextlib.contextmanager
def show_progress() -> Iterator[None]:
    """Report the library's progress while the block runs (bars on a terminal; lines with -v)."""
    bars, log = bars_enabled(), DISPLAY.verbose > 0
    if not (bars or log):
        yield
        return
    with _RichReporter(bars, log) as reporter, reporting(reporter):
        yield
