"""Reading the project's TOML data files with one-line errors naming the file."""
from __future__ import annotations

import tomllib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["load_folder", "read_document", "read_toml"]


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


def load_folder(folder: Path, parse: Callable[[Path], T], names: Callable[[T], Iterable[str]],
                error: type[Exception]) -> tuple[T, ...]:
    """Every ``*.toml`` of ``folder`` parsed (sorted by file name); ``error`` if two files claim the same
    name or alias (``names`` of each parsed item, whose ``path`` names its file)."""
    items = tuple(parse(p) for p in sorted(folder.glob("*.toml")))
    seen: dict[str, str] = {}
    for item in items:
        path = str(item.path)
        for key in set(names(item)):
            if key in seen and seen[key] != path:
                raise error(f"{path}: name or alias {key!r} is also used by {seen[key]}")
            seen[key] = path
    return items


def read_document(path: Path, error: type[Exception], what: str, format_version: int,
                  allowed_keys: Iterable[str]) -> tuple[bytes, dict[str, Any]]:
    """:func:`read_toml`, then the checks every data file shares: its ``format_version`` and no
    top-level key outside ``allowed_keys`` (each failure one line naming the file and the fix)."""
    raw, doc = read_toml(path, error, what)
    if doc.get("format_version") != format_version:
        raise error(f"{path}: format_version must be {format_version}, got {doc.get('format_version')!r}; "
                    f"see the {what} format in docs/")
    allowed = set(allowed_keys)
    unknown = set(doc) - allowed
    if unknown:
        raise error(f"{path}: unknown top-level key {sorted(unknown)[0]!r}; allowed: {', '.join(sorted(allowed))}")
    return raw, doc
