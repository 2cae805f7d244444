"""Dask clusters for ranking: start a local one, or connect to a running scheduler, with one-line errors."""
from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hybridperf.errors import UsageError

__all__ = ["dask_client", "parse_dask_address"]

_SYNTAX = "give local, local:N (N worker processes) or the scheduler's address, e.g. tcp://host:8786"


def parse_dask_address(address: str) -> tuple[str, int | None]:
    """``"local"`` -> ("local", None); ``"local:4"`` -> ("local", 4); a scheduler address -> (address, None)."""
    text = address.strip()
    if not text:
        raise UsageError(f"--dask is empty; {_SYNTAX}")
    head, sep, tail = text.partition(":")
    if head != "local":
        return text, None
    if not sep:
        return "local", None
    try:
        n = int(tail)
    except ValueError:
        raise UsageError(f"--dask {text}: {tail!r} is not a number of workers; {_SYNTAX}") from None
    if not 1 <= n <= 256:
        raise UsageError(f"--dask {text}: the number of workers must lie in 1..256")
    return "local", n


def _imports() -> tuple[Any, Any]:
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise UsageError("--dask needs the dask extra: pip install 'hybridperf[dask]'") from None
    return Client, LocalCluster


@contextmanager
def dask_client(address: str, *, timeout_s: float = 5.0) -> Iterator[Any]:
    """A ``distributed.Client`` for ranking, closed (with the cluster it started) on exit.

    ``"local"`` starts a LocalCluster with one single-threaded worker process per CPU core
    (``"local:N"``: N workers); any other address (``tcp://host:8786``) connects to a running
    scheduler and fails with a one-line :class:`UsageError` when it cannot be reached within
    ``timeout_s`` seconds.
    """
    Client, LocalCluster = _imports()
    where, n = parse_dask_address(address)
    if where == "local":
        workers = n or os.cpu_count() or 1
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                               silence_logs=logging.ERROR)
        try:
            with Client(cluster) as client:
                yield client
        finally:
            cluster.close()
        return
    try:
        client = Client(where, timeout=f"{timeout_s}s")
    except (OSError, TimeoutError, ValueError, TypeError) as exc:
        raise UsageError(f"--dask {where}: cannot reach a Dask scheduler ({type(exc).__name__}: "
                         f"{' '.join(str(exc).split())[:100]}); check the address, e.g. tcp://host:8786, "
                         "or use --dask local") from None
    try:
        yield client
    finally:
        client.close()
