"""The user's configuration file: where to look for their own kernel descriptors and GPU specs."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hybridperf.errors import HybridperfError
from hybridperf.tomlfile import read_toml

__all__ = ["CONFIG_ENV", "config_gpu_path", "config_kernel_path", "config_path"]

CONFIG_ENV = "HYBRIDPERF_CONFIG"
_KEYS = {"gpu_path", "kernel_path"}


def config_path() -> Path:
    """``$HYBRIDPERF_CONFIG``, else ``$XDG_CONFIG_HOME/hybridperf/config.toml`` (``~/.config`` by default)."""
    env = os.environ.get(CONFIG_ENV, "").strip()
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME", "").strip() or str(Path.home() / ".config")
    return Path(base) / "hybridperf" / "config.toml"


def _read(path: Path) -> dict[str, Any]:
    if not path.exists():
        if os.environ.get(CONFIG_ENV, "").strip():
            raise HybridperfError(f"{CONFIG_ENV}={str(path)!r}: no such file; create it or unset the variable")
        return {}
    _, doc = read_toml(path, HybridperfError, "configuration file")
    unknown = sorted(set(doc) - _KEYS)
    if unknown:
        raise HybridperfError(f"{path}: unknown key {unknown[0]!r}; the configuration file takes "
                              f"{', '.join(sorted(_KEYS))}")
    return doc


def _entries(key: str, what: str) -> list[Path]:
    path = config_path()
    entries = _read(path).get(key, [])
    if isinstance(entries, str):
        entries = [entries]
    if not isinstance(entries, list) or not all(isinstance(e, str) and e.strip() for e in entries):
        raise HybridperfError(f"{path}: {key} must be a list of folders or {what} files, "
                              f"e.g. {key} = [\"~/{what.split()[0]}s\"]")
    out = []
    for entry in entries:
        p = Path(entry).expanduser()
        out.append(p if p.is_absolute() else path.parent / p)
    return out


def config_kernel_path() -> list[Path]:
    """The ``kernel_path`` entries of the configuration file (descriptor files or folders of them), relative
    entries taken from the file's folder; ``[]`` without a file.

    ``kernel_path = ["~/kernels", "descriptors/my-stencil.toml"]``
    """
    return _entries("kernel_path", "kernel descriptor")


def config_gpu_path() -> list[Path]:
    """The ``gpu_path`` entries of the configuration file (GPU spec files or folders of them), as
    :func:`config_kernel_path`."""
    return _entries("gpu_path", "gpu spec")
