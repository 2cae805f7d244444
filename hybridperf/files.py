"""Writing files safely (temp file in the same folder, fsync, rename; never over a device, a symlink or an input)."""
from __future__ import annotations

import contextlib
import contextvars
import hashlib
import os
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from hybridperf.errors import HybridperfError, OutputError

__all__ = [
    "atomic_write",
    "atomic_write_text",
    "check_output",
    "file_sha256",
    "remove_temp_files",
    "write_policy",
]


@dataclass(frozen=True, slots=True)
class _Policy:
    inputs: frozenset[tuple[int, int]]  # (device, inode) of the files the running command reads
    force: bool


_POLICY: contextvars.ContextVar[_Policy] = contextvars.ContextVar("hybridperf_write_policy",
                                                                  default=_Policy(frozenset(), False))
_TEMP_FILES: set[Path] = set()  # temporary files being written now (removed on SIGINT/SIGTERM)


@contextlib.contextmanager
def write_policy(inputs: Iterable[str | Path] = (), *, force: bool = False) -> Iterator[None]:
    """Within the block, :func:`atomic_write` refuses to replace any of ``inputs`` (a command's input files),
    and replaces a symbolic link (the link itself, not its target) only when ``force``."""
    ids = set()
    for p in inputs:
        with contextlib.suppress(OSError, ValueError):
            st = os.stat(p)
            if stat.S_ISREG(st.st_mode):
                ids.add((st.st_dev, st.st_ino))
    token = _POLICY.set(_Policy(frozenset(ids), force))
    try:
        yield
    finally:
        _POLICY.reset(token)


def check_output(path: str | Path, *, error: type[HybridperfError] = OutputError) -> Path:
    """Refuse an output path that is a directory, a device/FIFO/socket, a symbolic link (unless the
    :func:`write_policy` forces it), an input of the running command, in a missing folder, or in a
    folder where no file can be created (probed with a temporary file, so a long job does not find
    out only when it writes its result)."""
    path = Path(path)
    if not path.name or path.name in (".", ".."):
        raise error(f"{str(path)!r}: give a file name to write, not a folder")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except (OSError, ValueError) as exc:
        raise error(f"{path}: cannot write here ({getattr(exc, 'strerror', None) or exc}); choose another path") \
            from None
    if st is not None:
        _check_existing(path, st, error)
    if not path.parent.is_dir():
        raise error(f"{path}: directory {str(path.parent)!r} does not exist; create it first")
    _probe_folder(path, error)
    return path


def _probe_folder(path: Path, error: type[HybridperfError]) -> None:
    # A real file, not os.access: root passes access() where the file system refuses (sysfs, read-only mounts).
    try:
        fd, probe = tempfile.mkstemp(dir=path.parent, prefix=".hybridperf-probe.", suffix=".tmp")
    except OSError as exc:
        raise error(f"{path}: cannot create a file in {str(path.parent)!r} ({exc.strerror or exc}); check "
                    "permissions and free space, or choose another path") from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)


def _check_existing(path: Path, st: os.stat_result, error: type[HybridperfError]) -> None:
    policy = _POLICY.get()
    if stat.S_ISLNK(st.st_mode):
        if not policy.force:
            raise error(f"{path}: is a symbolic link; writing would replace the link with a file: "
                        "pass --force to do that, or write to the link's target")
        with contextlib.suppress(OSError):
            st = os.stat(path)  # the target, to check it is not an input
    elif stat.S_ISDIR(st.st_mode):
        raise error(f"{path}: is a directory; give a file name inside it")
    elif not stat.S_ISREG(st.st_mode):
        raise error(f"{path}: is a device, FIFO or socket, not a regular file; refusing to replace it")
    if (st.st_dev, st.st_ino) in policy.inputs:
        raise error(f"{path}: is also an input of this command; write the output to another file")


def atomic_write(path: str | Path, write: Callable[[Path], None], *,
                 error: type[HybridperfError] = OutputError) -> Path:
    """Call ``write(tmp)`` on a temporary regular file next to ``path``, fsync it, then rename it onto ``path``.

    Readers see the old file or the whole new one, never a partial file; the temporary file is removed
    on any failure (and by :func:`remove_temp_files` on SIGINT/SIGTERM). ``path`` is checked first by
    :func:`check_output`. An OS error becomes ``error`` naming the path and the fix.
    """
    path = check_output(path, error=error)
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name[:80]}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise error(f"{path}: cannot write ({exc.strerror or exc}); check permissions and free space") from None
    tmp = Path(tmp_name)
    _TEMP_FILES.add(tmp)
    try:
        os.close(fd)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a written file gets the usual permissions
        write(tmp)
        with tmp.open("rb") as fh:
            os.fsync(fh.fileno())
        check_output(path, error=error)  # nothing was put in its place meanwhile
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise error(f"{path}: cannot write ({exc.strerror or exc}); check permissions and free space") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        _TEMP_FILES.discard(tmp)
    _fsync_dir(path.parent)
    return path


def _fsync_dir(folder: Path) -> None:
    """Make the rename durable (best effort: some file systems cannot open folders)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def remove_temp_files() -> int:
    """Remove the temporary files of writes still in progress (a signal handler's cleanup); returns how many."""
    n = 0
    for tmp in list(_TEMP_FILES):
        with contextlib.suppress(OSError):
            tmp.unlink()
            n += 1
        _TEMP_FILES.discard(tmp)
    return n


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | Path, text: str, *, error: type[HybridperfError] = OutputError) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (see :func:`atomic_write`)."""
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"), error=error)


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
