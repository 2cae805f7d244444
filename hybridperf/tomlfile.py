"""Reading the project's TOML data files with one-line errors naming the file."""
from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from hybridperf.errors import HybridperfError
from hybridperf.inputs import read_input
from hybridperf.limits import MAX_TOML_BYTES, MAX_TOML_DEPTH

T = TypeVar("T")

__all__ = ["check_document", "load_folder", "load_search_path", "parse_toml", "read_document", "read_toml",
           "search_path"]


def read_toml(path: Path, error: type[Exception], what: str = "file") -> tuple[bytes, dict[str, Any]]:
    """Raw bytes (for hashing) and parsed document of a TOML file.

    Raises ``error`` (a HybridperfError subclass) naming the path when the file cannot be read, is
    not a regular file of at most :data:`~hybridperf.limits.MAX_TOML_BYTES`, is not valid UTF-8 TOML,
    or nests tables and arrays deeper than :data:`~hybridperf.limits.MAX_TOML_DEPTH`.
    """
    raw = read_input(path, error=_as_hybridperf(error), what=what, max_bytes=MAX_TOML_BYTES, decompress=False)
    return raw, parse_toml(raw, path, error)


def parse_toml(raw: bytes, where: str | Path, error: type[Exception]) -> dict[str, Any]:
    """The parsed document of TOML bytes (at most :data:`~hybridperf.limits.MAX_TOML_BYTES`), with the
    checks of :func:`read_toml`; ``where`` (a path, or e.g. ``model file descriptor X``) starts each error."""
    if len(raw) > MAX_TOML_BYTES:
        raise error(f"{where}: {len(raw):,} bytes of TOML, over the limit of {MAX_TOML_BYTES:,}")
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise error(f"{where}: not valid TOML ({' '.join(str(exc).split())[:160]}); fix the syntax") from None
    except RecursionError:
        raise error(f"{where}: tables or arrays nested too deeply; the limit is {MAX_TOML_DEPTH} levels") from None
    _check_depth(doc, where, error)
    return doc


def _as_hybridperf(error: type[Exception]) -> type[HybridperfError]:
    return error if issubclass(error, HybridperfError) else HybridperfError


def _check_depth(doc: Any, path: str | Path, error: type[Exception]) -> None:
    """Refuse documents nested deeper than MAX_TOML_DEPTH (walked without recursion)."""
    stack = [(doc, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_TOML_DEPTH:
            raise error(f"{path}: tables or arrays nested more than {MAX_TOML_DEPTH} levels deep; flatten them")
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)


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


def search_path(env_var: str, configured: Iterable[Path]) -> list[Path]:
    """The entries of ``$env_var`` (separated by ``os.pathsep``, ``~`` expanded), then ``configured`` (the
    configuration file's entries): where names are looked up before the shipped files."""
    env = [Path(e).expanduser() for e in os.environ.get(env_var, "").split(os.pathsep) if e.strip()]
    return env + list(configured)


def load_search_path(entries: Iterable[Path], parse: Callable[[Path], T], names: Callable[[T], Iterable[str]],
                     error: type[Exception], missing: Callable[[Path], Exception]) -> list[T]:
    """Every item of the search path ``entries``: each a folder of ``*.toml`` files (:func:`load_folder`)
    or one file; ``missing(entry)`` is raised for an entry that does not exist."""
    out: list[T] = []
    for entry in entries:
        if entry.is_dir():
            out.extend(load_folder(entry, parse, names, error))
        elif entry.is_file():
            out.append(parse(entry))
        else:
            raise missing(entry)
    return out


def read_document(path: Path, error: type[Exception], what: str, format_version: int,
                  allowed_keys: Iterable[str]) -> tuple[bytes, dict[str, Any]]:
    """:func:`read_toml`, then the checks every data file shares: its ``format_version`` and no
    top-level key outside ``allowed_keys`` (each failure one line naming the file and the fix)."""
    raw, doc = read_toml(path, error, what)
    check_document(doc, path, error, what, format_version, allowed_keys)
    return raw, doc


def check_document(doc: dict[str, Any], where: str | Path, error: type[Exception], what: str, format_version: int,
                   allowed_keys: Iterable[str]) -> None:
    """The checks every data file shares: its ``format_version`` and no top-level key outside ``allowed_keys``."""
    path = where
    version = doc.get("format_version")
    if isinstance(version, bool) or version != format_version:  # true == 1 in Python, not in a file
        raise error(f"{path}: format_version must be {format_version}, got {doc.get('format_version')!r}; "
                    f"see the {what} format in docs/")
    allowed = set(allowed_keys)
    unknown = set(doc) - allowed
    if unknown:
        raise error(f"{path}: unknown top-level key {sorted(unknown)[0]!r}; allowed: {', '.join(sorted(allowed))}")
