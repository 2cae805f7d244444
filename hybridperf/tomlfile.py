"""Reading the project's TOML data files with one-line errors naming the file."""
from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

__all__ = ["read_toml"]


def read_toml(path: Path, error: type[Exception], what: str = "file") -> tuple[bytes, dict[str, Any]]:
    """Raw bytes (for hashing) and parsed document of a TOML file.

    Raises ``error`` (a HybridperfError subclass) naming the path when the file cannot be read or
    is not valid UTF-8 TOML.
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise error(f"{path}: cannot read {what} ({exc.strerror}); check the path") from None
    try:
        return raw, tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise error(f"{path}: not valid TOML ({exc}); fix the syntax") from None
