"""Rank a kernel's configuration space: constraints, Ryoo metrics, Pareto pruning, predicted times."""
from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from hybridperf.errors import DescriptorError, HybridperfError
from hybridperf.hardware import GPUSpec, load_gpu
from hybridperf.kernel import KernelDescriptor, load_kernel
from hybridperf.search.chunks import (
    OBJECTIVES,
    ChunkResult,
    RankSpace,
    chunk_ranges,
    config_rows,
    merge_chunks,
    predict_configs,
    scan_chunk,
)
from hybridperf.sweep import param_columns, param_name

if TYPE_CHECKING:
    from hybridperf.learn.model import TrainedModel

__all__ = ["RankResult", "rank_configs"]


@dataclass(frozen=True, slots=True)
class RankResult:
    """Ranked candidates of one (kernel, GPU, sizes) and the counts of every pruning stage.

    ``table`` is the top of ``candidates`` (ranked by predicted time; by Ryoo efficiency when no
    model was given). ``tie_with_best`` marks candidates whose prediction interval overlaps the
    best candidate's: they are indistinguishable by the model, measure them rather than trust
    the order.
    """

    kernel: str  # as rows name it: shipped name, or descriptor path
    gpu: str  # shipped spec name (file stem), or spec path
    sizes: Mapping[str, float]
    table: pd.DataFrame
    candidates: pd.DataFrame
    space_size: int
    infeasible: Mapping[str, int]
    n_screened: int
    n_pareto: int | None
    screened_fallback: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)

    def rows(self) -> pd.DataFrame:
        """The candidates as sweep-format rows (kernel, gpu, size.*, config.*), e.g. for suggest_next."""
        configs = [param_name(c) for c in param_columns(self.candidates, "config.")]
        params = self.candidates[[f"config.{c}" for c in configs]].set_axis(configs, axis=1)
        return config_rows(self.kernel, self.gpu, self.sizes, params, configs)

    @property
    def n_infeasible(self) -> int:
        return int(sum(self.infeasible.values()))

    @property
    def n_feasible(self) -> int:
        return self.space_size - self.n_infeasible

    def counts(self) -> pd.DataFrame:
        """One row per stage (``stage``, ``configs``, ``share`` of the space) for printing."""
        rows = [("space", self.space_size)]
        rows += [(f"infeasible: {r}", n) for r, n in sorted(self.infeasible.items(), key=lambda kv: -kv[1])]
        rows += [("feasible", self.n_feasible), ("removed by bandwidth screening", self.n_screened)]
        rows += [] if self.n_pareto is None else [("Pareto survivors", self.n_pareto)]
        rows += [("ranked", len(self.candidates))]
        df = pd.DataFrame(rows, columns=["stage", "configs"])
        df["share"] = df["configs"] / max(self.space_size, 1)
        return df


def _rank(space: RankSpace, cands: pd.DataFrame) -> pd.DataFrame:
    if space.model is None:
        order = cands.sort_values(["efficiency", "utilization", "index"], ascending=[False, False, True])
        order["tie_with_best"] = False
    else:
        order = cands.sort_values(["time_ms", "index"], kind="stable")
        best = order.iloc[0] if len(order) else None
        order["tie_with_best"] = False if best is None else (
            (order["lo_ms"] <= best["hi_ms"]) & (order["hi_ms"] >= best["lo_ms"]))
    order.insert(0, "rank", np.arange(1, len(order) + 1))
    cols = ["rank", "index", *space.kernel.config_names, "time_ms", "lo_ms", "hi_ms", "tie_with_best", "regime",
            "limiter", "out_of_domain", "ood_reason", "efficiency", "utilization"]
    cols += [c for c in ("register_spill", "memory_bound") if c in order.columns]
    return order[cols].rename(columns={n: f"config.{n}" for n in space.kernel.config_names}).reset_index(drop=True)


def _check_overrides(kernel: KernelDescriptor, overrides: Mapping[str, Sequence[float]]) -> None:
    # Features are rebuilt from the shipped descriptor, which rejects values outside its lists.
    params = {p.name: p for p in kernel.config}
    for name, vals in overrides.items():
        p = params.get(name)
        if p is None:
            raise DescriptorError(f"{kernel.name}: --space names unknown config parameter {name!r}; "
                                  f"config parameters: {', '.join(params)}")
        if p.values is not None:
            bad = [v for v in vals if float(v) not in p.values]
            if bad:
                raise DescriptorError(f"{kernel.name}: --space {name}={bad[0]:g} is not among the descriptor's values "
                                      f"({', '.join(f'{v:g}' for v in p.values)}); restrict to a subset or edit the "
                                      "descriptor")
        if not vals:
            raise DescriptorError(f"{kernel.name}: --space {name} has no values; give at least one")


def _sizes(kernel: KernelDescriptor, sizes: Mapping[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    names = set(kernel.size_names)
    for name, v in sizes.items():
        if name not in names:
            what = "a config parameter (use space_overrides / --space)" if name in kernel.config_names else "unknown"
            raise DescriptorError(f"{kernel.name}: size {name!r} is {what}; sizes: {', '.join(kernel.size_names)}")
        arr = np.atleast_1d(np.asarray(v, dtype=np.float64))
        if arr.size != 1:
            raise HybridperfError(f"{kernel.name}: rank one problem size at a time; {name} has {arr.size} values")
        out[name] = float(arr[0])
    # Fill size defaults and check bounds; config values are pinned so an overridden default can't fail.
    resolved = kernel.resolve({**out, **{p.name: p.values[0] for p in kernel.config if p.values}})
    return {n: float(np.asarray(resolved[n])) for n in kernel.size_names}


def _iterate(space: RankSpace, ranges: list[tuple[int, int]], client: Any) -> Iterable[ChunkResult]:
    if client is None:
        for start, stop in ranges:
            yield scan_chunk(space, start, stop)
        return
    from distributed import as_completed

    remote = client.scatter(space, broadcast=True)
    futures = client.map(scan_chunk, [remote] * len(ranges), [r[0] for r in ranges], [r[1] for r in ranges])
    for fut in as_completed(futures):
        yield fut.result()
        fut.release()


def rank_configs(model: TrainedModel | None, kernel: KernelDescriptor | str, gpu: GPUSpec | str,
                 sizes: Mapping[str, Any], *, space_overrides: Mapping[str, Sequence[float]] | None = None,
                 top: int = 10, screen_bandwidth: bool = False, pareto: bool = True, chunk_rows: int = 200_000,
                 progress: bool = False, client: Any = None) -> RankResult:
    """Enumerate a kernel's configuration space, prune it, and rank the survivors by predicted time.

    Stages: every configuration of the descriptor's ``[config]`` value lists (optionally
    restricted by ``space_overrides``) is checked against the ``[space]`` constraints and the
    GPU's occupancy limits (infeasible ones are counted by reason); Ryoo et al.'s efficiency and
    utilization (seed 003 Eqs. 1-2) are computed; with ``screen_bandwidth`` roofline
    memory-bound configurations are removed first (seed 003 Sec. 5.3); with ``pareto`` only the
    configurations on the efficiency/utilization Pareto front (both maximised, ties kept; seed
    003 Sec. 5.2) survive; the survivors' times and intervals are predicted by ``model``.

    Parameters
    ----------
    model : TrainedModel or None
        Predicts the survivors' times. ``None``: prune only, rank by efficiency.
    kernel, gpu : descriptor / spec, or a shipped name or TOML path.
    sizes : mapping of size parameter -> value (one problem size; defaults fill the rest).
    space_overrides : mapping of config parameter -> allowed values (a subset of the descriptor's).
    top : number of candidates in ``RankResult.table``.
    screen_bandwidth, pareto : pruning stages (see above). ``pareto=False`` predicts every
        feasible configuration and keeps the ``top`` fastest (needs a model).
    chunk_rows : configurations per chunk; memory stays bounded by one chunk plus the fronts.
    progress : show a tqdm bar on stderr.
    client : optional ``distributed.Client``; the same chunk function then runs on the cluster.

    Returns
    -------
    RankResult
        The ranked table (rank, index, config.*, time_ms, lo_ms, hi_ms, tie_with_best, regime,
        limiter, out_of_domain, ood_reason, efficiency, utilization, register_spill[, memory_bound]) and the
        counts of every stage.
    """
    desc = load_kernel(kernel)
    spec = load_gpu(gpu)
    if space_overrides:
        _check_overrides(desc, space_overrides)
        desc = desc.with_space({k: tuple(float(v) for v in vs) for k, vs in space_overrides.items()})
    kernel_key, gpu_key = desc.key, spec.key  # with_space keeps the descriptor's path
    space = RankSpace(kernel=desc, gpu=spec, sizes=_sizes(desc, sizes), kernel_key=kernel_key, gpu_key=gpu_key,
                      screen_bandwidth=screen_bandwidth, pareto=pareto, model=model, keep=top)
    n = desc.space_size()
    ranges = chunk_ranges(n, chunk_rows)
    total: ChunkResult | None = None
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=n, unit="cfg", unit_scale=True, file=sys.stderr, desc=f"rank {desc.name}")
    try:
        for part in _iterate(space, ranges, client):
            total = part if total is None else merge_chunks(total, part, space)
            if bar is not None:
                bar.update(part.n_rows)
    finally:
        if bar is not None:
            bar.close()
    if total is None:
        total = ChunkResult(n_rows=0, infeasible={}, n_screened=0, front=pd.DataFrame(columns=["index", *OBJECTIVES]))
    notes: list[str] = []
    front, fallback = total.front, False
    if screen_bandwidth and front.empty and total.front_unscreened is not None and not total.front_unscreened.empty:
        front, fallback = total.front_unscreened, True
        notes.append(f"every feasible configuration is memory-bound by the roofline ({total.n_screened}); "
                     "screening was skipped so that something is ranked")
    front = front.sort_values("index").reset_index(drop=True)
    cands = predict_configs(space, front) if pareto else front
    ranked = _rank(space, cands)
    if ranked["out_of_domain"].any():
        notes.append(f"{int(ranked['out_of_domain'].sum())} of {len(ranked)} candidates are outside the model's "
                     "training domain; their times are extrapolations")
    return RankResult(kernel=kernel_key, gpu=gpu_key, sizes=dict(space.sizes), table=ranked.head(top),
                      candidates=ranked, space_size=n, infeasible=dict(total.infeasible),
                      n_screened=0 if fallback else total.n_screened,
                      n_pareto=len(front) if pareto else None, screened_fallback=fallback,
                      notes=tuple(notes))
