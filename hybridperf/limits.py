"""Size limits on what hybridperf reads and builds, checked before the work starts."""
from __future__ import annotations

import os

__all__ = [
    "MAX_FORMULA_DEPTH",
    "MAX_FORMULA_NODES",
    "MAX_GRID_ROWS",
    "MAX_JSON_CONTAINERS",
    "MAX_MODEL_BYTES",
    "MAX_SPACE_ROWS",
    "MAX_TABLE_CELLS",
    "MAX_TOML_BYTES",
    "MAX_TOML_DEPTH",
    "MAX_TREES",
    "MAX_TREE_NODES",
    "max_input_bytes",
    "mib",
]

# Rows of a grid built from --set values (analyze, advise, predict): the product of the value counts
# (about 2.5 KiB of memory per predicted row: 100,000 rows stay within ~0.5 GiB).
MAX_GRID_ROWS = 100_000
# Configurations a --space override may describe (rank and suggest stream them in chunks).
MAX_SPACE_ROWS = 1_000_000_000
# Cells (rows x columns) of a table read from a CSV or Parquet file.
MAX_TABLE_CELLS = 20_000_000
# JSON objects + arrays in one document: json.loads makes a Python object of each (~100 bytes or more).
MAX_JSON_CONTAINERS = 2_000_000
# GPU specs, kernel descriptors and benchmark setups are small hand-written TOML files.
MAX_TOML_BYTES = 1 << 20
MAX_TOML_DEPTH = 16
# Formulas of descriptors: nesting depth and syntax-tree size.
MAX_FORMULA_DEPTH = 100  # shipped descriptors reach 20; the checker and evaluator recurse once per level
MAX_FORMULA_NODES = 2000
# Model files: bytes, boosted trees and nodes over all trees.
MAX_MODEL_BYTES = 64 << 20
MAX_TREES = 20_000
MAX_TREE_NODES = 5_000_000
_DEFAULT_INPUT_MIB = 64
_INPUT_ENV = "HYBRIDPERF_MAX_INPUT_MB"


def max_input_bytes() -> int:
    """Largest data file (sweep, import source, sample table), on disk and once decompressed, in bytes.

    ``$HYBRIDPERF_MAX_INPUT_MB`` (a positive number of MiB) raises or lowers the default of 64 MiB, which
    keeps a command on any input within about 1 GiB of memory.
    """
    text = os.environ.get(_INPUT_ENV, "").strip()
    try:
        value = float(text) if text else _DEFAULT_INPUT_MIB
    except ValueError:
        value = _DEFAULT_INPUT_MIB
    if not (value > 0 and value < 1 << 20):  # also rejects NaN
        value = _DEFAULT_INPUT_MIB
    return int(value * (1 << 20))


def mib(n_bytes: int) -> str:
    """Bytes as MiB for messages: ``'64 MiB'``."""
    return f"{n_bytes / (1 << 20):.3g} MiB"
