"""Writing files safely (temp file in the same folder, fsync, rename) and hashing them."""
from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from hybridperf.errors import HybridperfError

__all__ = ["atomic_write", "atomic_write_text", "file_sha256"]


def atomic_write(path: str | Path, write: Callable[[Path], None], *,
                 error: type[HybridperfError] = HybridperfError) -> Path:
    """Call ``write(tmp)`` on a temporary file next to ``path``, then rename it onto ``path``.

    Readers see the old file or the whole new one, never a partial file; the temporary file is
    removed on any failure. An OS error becomes ``error`` naming the path and the fix.
    """
    path = Path(path)
    if not path.parent.is_dir():
        raise error(f"{path}: directory {str(path.parent)!r} does not exist; create it first")
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a written file gets the usual permissions
        write(tmp)
        with tmp.open("rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise error(f"{path}: cannot write ({exc.strerror or exc}); check permissions and free space") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | Path, text: str, *, error: type[HybridperfError] = HybridperfError) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (see :func:`atomic_write`)."""
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"), error=error)


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
