"""The kernel descriptors registered in this process, by name (light: the command line scopes them per call)."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

__all__ = ["REGISTERED", "registration_scope"]

# name -> KernelDescriptor (hybridperf.kernel.register_kernel fills it; lookups read it first).
REGISTERED: dict[str, Any] = {}


@contextlib.contextmanager
def registration_scope() -> Iterator[None]:
    """Descriptors registered inside the block are forgotten after it (one command line call registers its
    ``--kernel FILE`` for that call only, also when many calls share a process)."""
    saved = dict(REGISTERED)
    try:
        yield
    finally:
        REGISTERED.clear()
        REGISTERED.update(saved)
