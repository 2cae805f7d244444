"""The command line's error boundary: exit codes, one line, --debug tracebacks, argparse types, outputs first."""
from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from hybridperf.cli import argtypes, main
from hybridperf.cli.runtime import run_command


def _args(func, **kw) -> argparse.Namespace:
    return argparse.Namespace(func=func, debug=False, **kw)


def test_internal_error_is_one_line_exit_70(capsys) -> None:
    def boom(args):
        raise KeyError("surprise\nsecond line")

    assert run_command(_args(boom)) == 70
    err = capsys.readouterr().err
    assert err.startswith("hybridperf: internal error: KeyError:") and err.count("\n") == 1
    assert "--debug" in err


def test_debug_shows_the_traceback(capsys) -> None:
    def boom(args):
        raise ZeroDivisionError("x")

    args = _args(boom)
    args.debug = True
    assert run_command(args) == 70
    err = capsys.readouterr().err
    assert "Traceback" in err and err.rstrip().endswith("rerun with --debug for the traceback)")


def test_os_errors_and_interrupts(capsys) -> None:
    def denied(args):
        raise PermissionError(13, "Permission denied", "/root/x")

    def interrupted(args):
        raise KeyboardInterrupt

    assert run_command(_args(denied)) == 2
    assert capsys.readouterr().err == ("hybridperf: error: /root/x: Permission denied; check the path, permissions "
                                       "and free space\n")
    assert run_command(_args(interrupted)) == 130
    assert capsys.readouterr().err == "hybridperf: interrupted\n"


def test_outputs_are_checked_before_the_work(tmp_path: Path, capsys) -> None:
    ran = []
    data = tmp_path / "in.csv"
    data.write_text("x\n")
    args = _args(lambda a: ran.append(1) or 0, data=[str(data)], output=str(data))
    assert run_command(args) == 2
    assert ran == [] and "also an input" in capsys.readouterr().err


@pytest.mark.parametrize("fn, good, bad", [
    (argtypes.probability, ["0.5", "1e-3"], ["0", "1", "2", "nan", "inf", "x"]),
    (argtypes.seed, ["0", "4294967295"], ["-1", "4294967296", "1.5", "1e3"]),
    (argtypes.positive_int, ["1", "1000000000"], ["0", "-1", "2.5", "1000000001"]),
    (argtypes.size_fraction, ["1", "0.01"], ["0", "1.01"]),
    (argtypes.share, ["0", "1"], ["-0.1", "1.1"]),
])
def test_argument_types(fn, good: list[str], bad: list[str]) -> None:
    for text in good:
        fn(text)
    for text in bad:
        with pytest.raises(argparse.ArgumentTypeError):
            fn(text)


def test_usage_errors_return_2(capsys) -> None:
    assert main(["train", "x.csv", "-o", "m.json", "--coverage", "2"]) == 2
    assert capsys.readouterr().err == ("hybridperf: error: argument --coverage: must be strictly between 0 and 1 "
                                       "(e.g. 0.9), got '2'\n")
