"""Command-line interface: parse arguments, call the library, print, return an exit code."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # exit 2 with a one-line message, as for bad data
        self.exit(2, f"hybridperf: error: {message}\n")


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
    """Entry point of the ``hybridperf`` command; returns the exit code."""
    args = build_parser().parse_args(argv)
    if hasattr(args, "argv"):
        args.argv = list(argv) if argv is not None else None
    from hybridperf.errors import HybridperfError

    try:
        return int(args.func(args))
    except HybridperfError as exc:
        if args.debug:
            raise
        print(f"hybridperf: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
