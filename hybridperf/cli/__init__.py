"""Command-line interface: parse arguments, call the library, print, return an exit code."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # exit 2 with a one-line message, as for bad data
        self.exit(2, f"hybridperf: error: {' '.join(message.split())}\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``hybridperf`` parser with every subcommand (each module adds its own)."""
    from hybridperf.cli import analysis, data, info, models, search

    p = _Parser(prog="hybridperf", description="Predict GPU kernel execution time: analytical models + "
                "gradient-boosted residuals.")
    p.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for module in (info, analysis, models, data, search):
        module.add_commands(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hybridperf`` command; returns the exit code.

    Exit codes: 0 success, 1 a command's own "not all good" (``reproduce``, a stopped ``record``),
    2 bad input or usage (one ``hybridperf: error: ...`` line naming the fix), 70 an internal error
    (one line; ``--debug`` shows the traceback), 130 interrupted (SIGINT), 143 terminated (SIGTERM).
    Temporary files of unfinished writes are removed before exiting.
    """
    from hybridperf.cli.runtime import run_command
    from hybridperf.registry import registration_scope

    with registration_scope():  # descriptors named by --kernel FILE count for this call only
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exc:  # usage errors (exit 2, one line) and --help (exit 0)
            return exc.code if isinstance(exc.code, int) else 2
        if hasattr(args, "argv"):
            args.argv = list(argv) if argv is not None else None
        return run_command(args)


if __name__ == "__main__":
    sys.exit(main())
