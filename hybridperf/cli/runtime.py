"""What the command line does around a command: signal handling, input/output paths, the error boundary."""
from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import traceback
import warnings
from collections.abc import Iterator
from typing import Any

from hybridperf.cli.progress import show_progress
from hybridperf.errors import HybridperfError
from hybridperf.files import check_output, remove_temp_files, write_policy

__all__ = ["EXIT_ERROR", "EXIT_INTERNAL", "Terminated", "handle_signals", "run_command"]

EXIT_ERROR = 2
EXIT_INTERNAL = 70  # EX_SOFTWARE (sysexits.h)
EXIT_SIGINT = 128 + signal.SIGINT
EXIT_SIGTERM = 128 + signal.SIGTERM
# Argument destinations that name files the command writes; every other string argument naming an
# existing file is an input the command must not overwrite.
OUTPUT_DESTS = ("output", "chart", "plot")
_NOT_PATHS = ("argv", "func")


class Terminated(BaseException):
    """SIGTERM arrived: unwind like KeyboardInterrupt so that temporary files are removed."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated()


def _on_sigint(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt()


@contextlib.contextmanager
def handle_signals() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` and SIGINT KeyboardInterrupt (unless it was ignored, as for a
    background job) while the block runs, so ``finally`` clauses run; previous handlers are restored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old_term = signal.signal(signal.SIGTERM, _on_sigterm)
    old_int = signal.getsignal(signal.SIGINT)
    if old_int is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, _on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old_term)
        if old_int is not signal.SIG_IGN:
            signal.signal(signal.SIGINT, old_int if old_int is not None else signal.SIG_DFL)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, str)]
    return []


def _paths(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """(inputs, outputs): string arguments naming existing files, and the output destinations given."""
    inputs, outputs = [], []
    for dest, value in vars(args).items():
        if dest in _NOT_PATHS:
            continue
        if dest in OUTPUT_DESTS:
            outputs += _strings(value)
            continue
        for text in _strings(value):
            with contextlib.suppress(OSError, ValueError):
                if text and os.path.isfile(text):
                    inputs.append(text)
    return inputs, outputs


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _show_warning(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
                  line: str | None = None) -> None:
    """Warnings as one ``hybridperf: warning: ...`` line each (no source line, no file position)."""
    print(f"hybridperf: warning: {_one_line(str(message))}", file=sys.stderr)


def _internal(exc: BaseException) -> str:
    msg = _one_line(str(exc))[:300]
    return (f"hybridperf: internal error: {type(exc).__name__}: {msg} "
            "(please report it; rerun with --debug for the traceback)")


def run_command(args: argparse.Namespace) -> int:
    """Run ``args.func(args)`` inside the error boundary and return the exit code.

    Expected failures (HybridperfError) print one ``hybridperf: error: ...`` line and exit 2; anything
    else prints one ``hybridperf: internal error: ...`` line and exits 70; ``--debug`` adds the traceback.
    SIGINT exits 130 and SIGTERM 143, after removing temporary files of unfinished writes.
    """
    debug = bool(getattr(args, "debug", False))
    try:
        with handle_signals(), warnings.catch_warnings():
            if not debug:
                warnings.showwarning = _show_warning
            try:
                inputs, outputs = _paths(args)
                with write_policy(inputs, force=bool(getattr(args, "force", False))):
                    for out in outputs:
                        check_output(out)  # before any work: a refused output fails fast
                    with show_progress(getattr(args, "command", None)):
                        return int(args.func(args))
            finally:
                remove_temp_files()
    except HybridperfError as exc:
        return _report(f"hybridperf: error: {_one_line(str(exc))}", EXIT_ERROR, debug)
    except KeyboardInterrupt:
        return _report("hybridperf: interrupted", EXIT_SIGINT, debug)
    except Terminated:
        return _report("hybridperf: terminated", EXIT_SIGTERM, debug)
    except BrokenPipeError:
        _silence_stdout()
        return 0
    except OSError as exc:  # the environment (disk full, permissions) rather than a bug
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        return _report(f"hybridperf: error: {where}{_one_line(exc.strerror or str(exc))}; check the path, "
                       "permissions and free space", EXIT_ERROR, debug)
    except Exception as exc:  # noqa: BLE001 - the boundary: one line, never a traceback without --debug
        return _report(_internal(exc), EXIT_INTERNAL, debug)


def _report(line: str, code: int, debug: bool) -> int:
    if debug:
        traceback.print_exc(file=sys.stderr)
    print(line, file=sys.stderr)
    return code


def _silence_stdout() -> None:
    """After a closed pipe (``hybridperf ... | head``), point stdout at /dev/null so the exit flush is quiet."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
