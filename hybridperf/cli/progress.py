"""The command line's listener for hybridperf.progress: rich bars with an ETA on stderr."""
from __future__ import annotations

# Bars are drawn only when stderr is a terminal and --quiet was not given; with -v each finished task
# also prints one line with its duration (on a terminal or not), so logs of batch jobs show where the
# time went.
import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from hybridperf.cli.render import DISPLAY, console
from hybridperf.progress import reporting

__all__ = ["LONG_COMMANDS", "bars_enabled", "show_progress", "starting"]

# Commands that can run for seconds to minutes: a spinner shows at once, until their first real task starts.
LONG_COMMANDS = frozenset({"train", "evaluate", "rank", "suggest", "replay", "calibrate", "import", "export", "record"})


def bars_enabled() -> bool:
    """Progress bars go to stderr, only on a terminal and without --quiet."""
    return not DISPLAY.quiet and sys.stderr.isatty()


class _RichReporter:
    """Tasks as rich progress bars; a task without a total shows a spinner and the elapsed time."""

    def __init__(self, bars: bool, log: bool, first: str | None = None) -> None:
        self._first = first  # the description of a spinner shown until the first real task starts
        self._first_id: Any = None
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
            if self._first:
                self._first_id = self._progress.add_task(self._first, total=None)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._progress is not None:
            self._progress.stop()

    def start(self, description: str, total: float | None) -> Any:
        with self._lock:
            if self._first_id is not None:
                self._progress.remove_task(self._first_id)
                self._first_id = None
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
def starting(argv: list[str]) -> Iterator[None]:
    """A spinner on a terminal while a long command's parser and libraries load (before its options are
    known: the command is the first word that is not an option, and -q/--quiet/--json/--csv silence it)."""
    command = next((a for a in argv if not a.startswith("-")), None)
    quiet = any(a in ("-q", "--quiet", "--json", "--csv") for a in argv)
    if command not in LONG_COMMANDS or quiet or not sys.stderr.isatty():
        yield
        return
    with _RichReporter(bars=True, log=False, first=f"{command}: starting"):
        yield


@contextlib.contextmanager
def show_progress(command: str | None = None) -> Iterator[None]:
    """Report the library's progress while the block runs (bars on a terminal; lines with -v); a long
    ``command`` shows a spinner from the start, until its first task."""
    bars, log = bars_enabled(), DISPLAY.verbose > 0
    if not (bars or log):
        yield
        return
    first = f"{command}: loading" if command in LONG_COMMANDS else None
    with _RichReporter(bars, log, first) as reporter, reporting(reporter):
        yield
