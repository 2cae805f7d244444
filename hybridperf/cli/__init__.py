"""Command-line interface: parse arguments, call the library, print, return an exit code."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["COMMON_OPTIONS", "build_parser", "main"]

# Options every command takes (documented once, in the README and `hybridperf --help`).
COMMON_OPTIONS = ("-h", "--help", "-v", "--verbose", "-q", "--quiet", "--wide")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # exit 2 with a one-line message, as for bad data
        self.exit(2, f"hybridperf: error: {' '.join(message.split())}\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``hybridperf`` parser with every subcommand (each module adds its own)."""
    from hybridperf.cli import analysis, data, info, models, search

    p = _Parser(prog="hybridperf", description="Predict GPU kernel execution time: analytical models + "
                "gradient-boosted residuals.", epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"hybridperf {_version()}")
    p.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    _display_options(p, None)
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND")
    for module in (info, analysis, models, data, search):
        module.add_commands(sub)
    for name, parser in sub.choices.items():  # the display options also after the command name
        _display_options(parser, argparse.SUPPRESS)
        if parser.formatter_class is argparse.HelpFormatter:
            parser.formatter_class = argparse.RawDescriptionHelpFormatter
    return p


_EPILOG = """\
examples:
  hybridperf gpus show a100                       # every value of a GPU spec and its source
  hybridperf train titanv-seed004 -o model.json   # learn from a shipped dataset
  hybridperf predict -m model.json --kernel matvec --set N=1024:65536:x2 --plot curve.png
  hybridperf rank --kernel tiled-matmul --gpu gtx280 --set N=2048 --top 5

'hybridperf COMMAND --help' shows each command's options and examples."""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hybridperf")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown (not installed)"


def _display_options(p: argparse.ArgumentParser, default: object) -> None:
    """-v/-q/--wide, on the main parser (real defaults) and on every command (SUPPRESS: not overriding)."""
    def dflt(value: object) -> object:
        return value if default is None else default

    names = {o for a in p._actions for o in a.option_strings}
    if "-v" not in names:
        p.add_argument("-v", "--verbose", action="count", default=dflt(0),
                       help="say more: each long step's duration on stderr, extra detail in tables")
    if "-q" not in names:
        p.add_argument("-q", "--quiet", action="store_true", default=dflt(False),
                       help="no progress bars (they are drawn only on a terminal anyway)")
    if "--wide" not in names:
        p.add_argument("--wide", action="store_true", default=dflt(False),
                       help="show every table column, however wide the terminal")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hybridperf`` command; returns the exit code.

    Exit codes: 0 success, 1 a command's own "not all good" (``reproduce``, a stopped ``record``),
    2 bad input or usage (one ``hybridperf: error: ...`` line naming the fix), 70 an internal error
    (one line; ``--debug`` shows the traceback), 130 interrupted (SIGINT), 143 terminated (SIGTERM).
    Temporary files of unfinished writes are removed before exiting.
    """
    from hybridperf.cli.progress import starting
    from hybridperf.cli.render import DISPLAY
    from hybridperf.cli.runtime import run_command

    try:
        with starting(list(sys.argv[1:] if argv is None else argv)):
            args = build_parser().parse_args(argv)
    except SystemExit as exc:  # usage errors (exit 2, one line) and --help (exit 0)
        return exc.code if isinstance(exc.code, int) else 2
    DISPLAY.wide, DISPLAY.verbose, DISPLAY.quiet = bool(args.wide), int(args.verbose), bool(args.quiet)
    if hasattr(args, "argv"):
        args.argv = list(argv) if argv is not None else None
    return run_command(args)


if __name__ == "__main__":
    sys.exit(main())
