"""argparse option types that validate: ranges of numbers, seeds, counts and input paths, each one line on error."""
from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path

from hybridperf.errors import HybridperfError

__all__ = [
    "count",
    "count_or_share",
    "input_file",
    "input_path",
    "model_file",
    "non_negative_float",
    "non_negative_int",
    "plot_output",
    "positive_float",
    "positive_int",
    "probability",
    "seed",
    "share",
    "size_fraction",
    "state_file",
    "table_output",
]

_MAX_INT = 10**9
_MAX_SEED = 2**32 - 1  # numpy and xgboost seeds are 32-bit


def _float(text: str) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _int(text: str, lo: int, hi: int, what: str) -> int:
    try:
        value = int(str(text).strip(), 10)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if not lo <= value <= hi:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def probability(text: str) -> float:
    """A coverage or probability strictly between 0 and 1 (``0.9``)."""
    value = _float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be strictly between 0 and 1 (e.g. 0.9), got {text!r}")
    return value


def size_fraction(text: str) -> float:
    """A fraction in (0, 1] (``--budget 0.01``: the share of a sweep measured)."""
    value = _float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], e.g. 0.01, got {text!r}")
    return value


def share(text: str) -> float:
    """A share in [0, 1] (``--explore 0.25``)."""
    value = _float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0."""
    value = _float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number >= 0."""
    value = _float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text!r}")
    return value


def seed(text: str) -> int:
    """A random seed: a whole number from 0 to 2**32 - 1."""
    return _int(text, 0, _MAX_SEED, f"a whole number from 0 to {_MAX_SEED}")


def positive_int(text: str) -> int:
    """A whole number from 1 to 10**9."""
    return _int(text, 1, _MAX_INT, "a whole number >= 1")


def non_negative_int(text: str) -> int:
    """A whole number from 0 to 10**9."""
    return _int(text, 0, _MAX_INT, "a whole number >= 0")


def count(hi: int, lo: int = 1) -> Callable[[str], int]:
    """A whole number in [lo, hi] (e.g. ``--chunk-rows``, bounded so memory stays bounded)."""
    def parse(text: str) -> int:
        return _int(text, lo, hi, f"a whole number from {lo} to {hi:,}")
    parse.__name__ = f"count_{lo}_{hi}"
    return parse


def count_or_share(text: str) -> float:
    """A count (a whole number from 1 to 10**9) or a share in (0, 1) (e.g. ``--top-k 200`` or ``--top-k 0.05``),
    as ``search.rank.resolve_top_k`` takes them."""
    if text.strip().lstrip("+").isdigit():
        return positive_int(text)
    try:
        value = _float(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"is neither a count (e.g. 200) nor a share in (0, 1) (e.g. 0.05): {text!r}") \
            from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be a count (e.g. 200) or a share of the space in (0, 1) (e.g. 0.05), "
                                         f"got {text!r}")
    return value


def input_file(text: str) -> str:
    """An existing regular file within the input size limit (not a folder, FIFO or device)."""
    from hybridperf.inputs import check_input_file

    try:
        check_input_file(text)
    except HybridperfError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def model_file(text: str) -> str:
    """An existing regular model file within the model size limit."""
    from hybridperf.inputs import check_input_file
    from hybridperf.limits import MAX_MODEL_BYTES

    try:
        check_input_file(text, what="model file", max_bytes=MAX_MODEL_BYTES)
    except HybridperfError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def state_file(text: str) -> str:
    """A file the command reads if it exists and writes otherwise (``--study``): a regular file or a new name
    in an existing folder."""
    path = Path(text)
    if path.exists() or path.is_symlink():
        return input_file(text)
    if not text or not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: folder {str(path.parent)!r} does not exist; create it first")
    return text


def input_path(text: str) -> str:
    """An existing regular file (within the input size limit) or folder."""
    if text and Path(text).is_dir():
        return text
    return input_file(text)


def _suffixed(text: str, suffixes: tuple[str, ...], what: str) -> str:
    name = Path(text).name.lower()
    if not name or not name.endswith(suffixes) or name in suffixes:
        raise argparse.ArgumentTypeError(f"{text!r}: name a {what} file ending in {', '.join(suffixes)} "
                                         "(the format follows the extension)")
    return text


def table_output(text: str) -> str:
    """A table file to write: ``.csv``, ``.csv.gz`` or ``.parquet`` (the format follows the name)."""
    return _suffixed(text, (".csv", ".csv.gz", ".parquet"), "table")


def plot_output(text: str) -> str:
    """A plot file to write: ``.png``, ``.svg`` or ``.pdf``."""
    return _suffixed(text, (".png", ".svg", ".pdf"), "plot")
