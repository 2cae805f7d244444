"""Scanning a ranking space chunk by chunk, in this process or on a Dask cluster, merged into one result."""
# The solver's space is cut into units of work (:meth:`ConfigSpace.split`: partial configurations
# whose completions a worker builds and scans chunk by chunk), explicit configurations into row
# ranges. Every unit's result is merged with :func:`merge_chunks`, which is exact in any order, and
# the configurations the solver pruned are counted by constraint on the way.
from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import closing, nullcontext
from typing import Any

import numpy as np
import pandas as pd

from hybridperf.progress import task
from hybridperf.search.chunks import ChunkResult, RankSpace, chunk_ranges, merge_chunks, scan_configs, with_pruned
from hybridperf.search.space import Prefix

__all__ = ["scan_space", "scan_unit"]

Unit = Prefix | tuple[int, int] | None  # None: the solver's whole space, in this process


def _empty_configs(space: RankSpace) -> pd.DataFrame:
    if space.configs is not None:
        return space.configs.iloc[:0]
    return pd.DataFrame({"index": np.zeros(0, dtype=np.int64), **{n: np.zeros(0) for n in space.kernel.config_names}})


def _empty(space: RankSpace) -> ChunkResult:
    return scan_configs(space, _empty_configs(space))


def _delta(counts: Mapping[str, int], seen: dict[str, int]) -> dict[str, int]:
    out = {k: v - seen.get(k, 0) for k, v in counts.items() if v != seen.get(k, 0)}
    seen.update(counts)
    return out


def _work(space: RankSpace, unit: Unit, chunk_rows: int) -> Iterator[tuple[pd.DataFrame, dict[str, int]]]:
    """The chunks of configurations of one unit, each with what the solver pruned since the last one."""
    if isinstance(unit, tuple):
        assert space.configs is not None
        yield space.configs.iloc[unit[0]:unit[1]], {}
        return
    if space.configs is not None:  # unit None: every explicit configuration
        for a, b in chunk_ranges(len(space.configs), chunk_rows):
            yield space.configs.iloc[a:b], {}
        return
    assert space.solver is not None
    counts: dict[str, int] = {}
    seen: dict[str, int] = {}
    for cfg in space.solver.chunks(chunk_rows, start=unit, pruned=counts):
        yield cfg, _delta(counts, seen)
    rest = _delta(counts, seen)
    if rest:
        yield _empty_configs(space), rest


def _scan(space: RankSpace, cfg: pd.DataFrame, pruned: dict[str, int]) -> ChunkResult:
    return with_pruned(scan_configs(space, cfg), pruned)


def scan_unit(space: RankSpace, unit: Unit, chunk_rows: int) -> ChunkResult:
    """One unit of work scanned and merged (what a Dask worker runs: the units are the parallelism, so the
    boosters predict with one thread)."""
    from hybridperf.learn.booster import prediction_threads

    total: ChunkResult | None = None
    with prediction_threads(_regressors(space), 1):
        for cfg, pruned in _work(space, unit, chunk_rows):
            part = _scan(space, cfg, pruned)
            total = part if total is None else merge_chunks(total, part, space)
    return _empty(space) if total is None else total


def _regressors(space: RankSpace) -> list[Any]:
    """The boosters a chunk's prediction runs (none without a model)."""
    return space.model.regressors() if space.model is not None else []


def _cores() -> int:
    """CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _threaded(space: RankSpace, chunk_rows: int, jobs: int) -> Iterator[ChunkResult]:
    """Chunks scanned by ``jobs`` threads of this process (numpy, pandas and xgboost release the GIL in
    their heavy loops); at most ``jobs + 1`` chunks are held at a time."""
    from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

    from hybridperf.learn.booster import prediction_threads

    per_job = max(1, _cores() // jobs)  # the chunks are the parallelism: no more threads than cores
    with prediction_threads(_regressors(space), per_job), \
            ThreadPoolExecutor(max_workers=jobs) as pool:
        running: set[Future[ChunkResult]] = set()
        for cfg, pruned in _work(space, None, chunk_rows):
            running.add(pool.submit(_scan, space, cfg, pruned))
            if len(running) > jobs:
                done, running = wait(running, return_when=FIRST_COMPLETED)
                yield from (f.result() for f in done)
        yield from (f.result() for f in running)


def _parts(space: RankSpace, chunk_rows: int, client: Any, jobs: int) -> Iterator[ChunkResult]:
    if client is None and jobs > 1:
        yield from _threaded(space, chunk_rows, jobs)
        return
    if client is None:
        yield from (_scan(space, cfg, pruned) for cfg, pruned in _work(space, None, chunk_rows))
        return
    from distributed import as_completed

    units: list[Any]
    if space.configs is not None:
        units = chunk_ranges(len(space.configs), chunk_rows)
    else:
        pruned: dict[str, int] = {}
        units = space.solver.split(4 * max(1, sum(client.nthreads().values())), pruned)  # type: ignore[union-attr]
        yield with_pruned(_empty(space), pruned)
    remote = client.scatter(space, broadcast=True)
    futures = client.map(scan_unit, [remote] * len(units), units, [chunk_rows] * len(units), pure=False)
    for fut in as_completed(futures):
        yield fut.result()
        fut.release()


def scan_space(space: RankSpace, *, chunk_rows: int = 50_000, progress: bool = False, client: Any = None,
               jobs: int = 1) -> ChunkResult:
    """Scan every configuration of ``space`` and merge the chunks' results (exact in any order).

    Memory stays bounded by one chunk (``chunk_rows`` configurations) and the shortlist per
    process and thread. ``client``: a ``distributed.Client``; the units then run on its workers.
    ``jobs``: threads of this process that scan chunks side by side (without a client).
    ``progress``: report progress (:mod:`hybridperf.progress`; the command line draws a bar), counting
    configurations accounted for (scanned or pruned).
    """
    from hybridperf.errors import HybridperfError

    if chunk_rows < 1:
        raise HybridperfError(f"chunk_rows must be at least 1, got {chunk_rows}")
    if jobs < 1:
        raise HybridperfError(f"jobs must be at least 1, got {jobs}")
    total: ChunkResult | None = None
    with task(f"rank {space.kernel.name}: configurations", space.size()) if progress else nullcontext() as t:
        with closing(_parts(space, chunk_rows, client, jobs)) as parts:  # an error here stops the threads too
            for part in parts:
                total = part if total is None else merge_chunks(total, part, space)
                if t is not None:
                    t.advance(part.n_rows)
    return _empty(space) if total is None else total
