"""Reading input files within limits: regular files only, sizes checked first, decompression streamed with a cap."""
from __future__ import annotations

import csv
import io
import os
import stat
import zlib
from pathlib import Path
from typing import IO

from hybridperf.errors import HybridperfError, InputError, LimitError
from hybridperf.limits import MAX_JSON_CONTAINERS, MAX_TABLE_CELLS, max_input_bytes, mib

__all__ = [
    "GZIP_MAGIC",
    "check_csv_table",
    "check_input_file",
    "check_json_size",
    "decode_text",
    "gunzip",
    "read_input",
    "read_limited",
]

GZIP_MAGIC = b"\x1f\x8b"
_BLOCK = 1 << 20
_LIMIT_HINT = "set HYBRIDPERF_MAX_INPUT_MB to raise the limit"


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def check_input_file(path: str | Path, *, error: type[HybridperfError] = InputError, what: str = "file",
                     max_bytes: int | None = None) -> int:
    """The size in bytes of ``path`` after checking it is an existing regular file of at most ``max_bytes``.

    Directories, FIFOs, devices (``/dev/zero``) and sockets are refused before anything is opened,
    so reading never blocks or runs without end. Raises ``error`` (one line naming the path and the fix).
    """
    path = Path(path)
    limit = max_input_bytes() if max_bytes is None else max_bytes
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise error(f"{path}: no such file; check the path to the {what}") from None
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise error(f"{path}: cannot open the {what} ({reason}); check the path and permissions") from None
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{path}: is {_kind(st.st_mode)}, not a {what}; give the path of a regular file")
    if st.st_size > limit:
        raise LimitError(f"{path}: the {what} is {mib(st.st_size)}, over the {mib(limit)} limit; "
                         f"give a smaller file{_hint(max_bytes)}")
    return int(st.st_size)


def _hint(max_bytes: int | None) -> str:
    return f" or {_LIMIT_HINT}" if max_bytes is None else ""


def read_limited(fh: IO[bytes], limit: int, where: str, hint: str = f" or {_LIMIT_HINT}") -> bytes:
    """Read a stream to its end, refusing (LimitError) once it passes ``limit`` bytes."""
    parts, total = [], 0
    while True:
        block = fh.read(min(_BLOCK, limit + 1 - total))
        if not block:
            return b"".join(parts)
        parts.append(block)
        total += len(block)
        if total > limit:
            raise LimitError(f"{where}: more than {mib(limit)} of data; give a smaller file{hint}")


def gunzip(data: bytes, limit: int, where: str, error: type[HybridperfError] = InputError) -> bytes:
    """Decompress gzip data (several members allowed) in blocks, refusing output over ``limit`` bytes."""
    out, total, rest = [], 0, data
    while rest:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            pending = rest
            while not d.eof:
                chunk = d.decompress(pending, _BLOCK)
                total += len(chunk)
                if total > limit:
                    raise LimitError(f"{where}: decompresses to more than {mib(limit)} (a gzip bomb?); "
                                     f"give a smaller file or {_LIMIT_HINT}")
                out.append(chunk)
                pending = d.unconsumed_tail
                if not chunk and not pending and not d.eof:
                    raise error(f"{where}: truncated gzip data; re-download or re-export the file")
        except zlib.error as exc:
            raise error(f"{where}: corrupt gzip data ({exc}); re-download or re-export the file") from None
        rest = d.unused_data.lstrip(b"\x00")  # trailing zero padding is allowed after the last member
        if rest and rest[:2] != GZIP_MAGIC:
            raise error(f"{where}: unexpected bytes after the gzip data; re-download or re-export the file")
    return b"".join(out)


def read_input(path: str | Path, *, error: type[HybridperfError] = InputError, what: str = "file",
               max_bytes: int | None = None, decompress: bool = True) -> bytes:
    """The bytes of a regular file of bounded size, gunzipped (recognised by its magic number) within the same
    limit when ``decompress``; see :func:`check_input_file`."""
    path = Path(path)
    limit = max_input_bytes() if max_bytes is None else max_bytes
    check_input_file(path, error=error, what=what, max_bytes=max_bytes)
    try:
        with path.open("rb") as fh:
            raw = read_limited(fh, limit, str(path), _hint(max_bytes))
    except OSError as exc:
        raise error(f"{path}: cannot read the {what} ({exc.strerror or exc}); check permissions") from None
    if decompress and raw[:2] == GZIP_MAGIC:
        raw = gunzip(raw, limit, str(path), error)
    return raw


def decode_text(raw: bytes, where: str, error: type[HybridperfError] = InputError) -> str:
    """UTF-8 text (a byte-order mark dropped); ``error`` naming the first bad byte otherwise."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(f"{where}: not UTF-8 text (bad byte at offset {exc.start}); save the file as UTF-8") from None


def check_json_size(raw: bytes | str, where: str, max_containers: int = MAX_JSON_CONTAINERS) -> None:
    """Refuse JSON with more objects and arrays than ``max_containers`` before parsing it (an upper bound:
    brackets inside strings count too), since each becomes a Python object."""
    data = raw.encode("utf-8", "replace") if isinstance(raw, str) else raw
    n = data.count(b"{") + data.count(b"[")
    if n > max_containers:
        raise LimitError(f"{where}: about {n:,} JSON objects/arrays, over the limit of {max_containers:,}; "
                         "split the file")


def check_csv_table(raw: bytes, where: str, error: type[HybridperfError] = InputError,
                    max_cells: int = MAX_TABLE_CELLS) -> None:
    """Checks on a CSV's bytes before parsing: at most ``max_cells`` cells (lines x header fields), and no
    column name twice (pandas would silently rename the copy ``name.1``)."""
    head = raw[:_BLOCK].split(b"\n", 1)[0].decode("utf-8-sig", "replace")
    try:
        header = next(csv.reader(io.StringIO(head)), [])
    except csv.Error as exc:
        raise error(f"{where}: cannot read the CSV header ({exc}); check the file") from None
    names = [h.strip() for h in header]
    seen: set[str] = set()
    for name in names:
        if name in seen and name:
            raise error(f"{where}: column {name!r} appears twice in the header; keep one copy (or rename one)")
        seen.add(name)
    cells = (raw.count(b"\n") + 1) * max(len(names), 1)
    if cells > max_cells:
        raise LimitError(f"{where}: about {cells:,} cells (lines x columns), over the limit of {max_cells:,}; "
                         "split the file")
