"""Rank a kernel's configuration space: constraints, Ryoo metrics, Pareto pruning, predicted times."""
from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from hybridperf.analytical.run import analyze
from hybridperf.errors import DescriptorError, HybridperfError, UnknownGPUError, UnknownKernelError
from hybridperf.hardware import GPUSpec, load_gpu
from hybridperf.kernel import KernelDescriptor, load_kernel
from hybridperf.search.pareto import pareto_mask

if TYPE_CHECKING:
    from hybridperf.learn.model import TrainedModel

__all__ = [
    "ChunkResult",
    "RankResult",
    "RankSpace",
    "chunk_ranges",
    "merge_chunks",
    "prediction_rows",
    "rank_configs",
    "scan_chunk",
    "space_rows",
]

_OBJECTIVES = ["efficiency", "utilization"]
_UNDEFINED = "Ryoo metric undefined (check counts.ryoo_instr / ryoo_regions)"


@dataclass(frozen=True, slots=True)
class RankSpace:
    """Everything a chunk task needs (small and picklable, so it can be shipped to Dask workers).

    ``kernel_key`` and ``gpu_key`` are the names written in prediction rows (what
    :func:`hybridperf.kernel.load_kernel` and :func:`hybridperf.hardware.load_gpu` resolve).
    """

    kernel: KernelDescriptor
    gpu: GPUSpec
    sizes: Mapping[str, float]
    kernel_key: str
    gpu_key: str
    screen_bandwidth: bool = False
    pareto: bool = True
    model: TrainedModel | None = None
    keep: int = 10

    def __post_init__(self) -> None:
        if not self.pareto and self.model is None:
            raise HybridperfError("pareto=False ranks every feasible configuration by predicted time, so it needs "
                                  "a model; pass model=... or keep pareto=True")
        if self.keep < 1:
            raise HybridperfError(f"top must be at least 1, got {self.keep}")


@dataclass(frozen=True, slots=True)
class ChunkResult:
    """What one chunk (or a merge of chunks) leaves: counts and its surviving candidates.

    ``front`` holds the survivors (Pareto front, or the ``keep`` fastest predicted when not
    pruning); ``front_unscreened`` the front without bandwidth screening, kept as a fallback in
    case screening removes every configuration.
    """

    n_rows: int
    infeasible: Mapping[str, int]
    n_screened: int
    front: pd.DataFrame
    front_unscreened: pd.DataFrame | None = None


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
        out = pd.DataFrame({"kernel": self.kernel, "gpu": self.gpu}, index=self.candidates.index)
        for name, v in self.sizes.items():
            out[f"size.{name}"] = float(v)
        for c in self.candidates.columns:
            if c.startswith("config."):
                out[c] = self.candidates[c].to_numpy()
        return out

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


# ---------------------------------------------------------------------------------------------
# The space, chunk by chunk

def chunk_ranges(n: int, chunk_rows: int) -> list[tuple[int, int]]:
    """``[start, stop)`` index ranges covering ``range(n)`` in chunks of ``chunk_rows``."""
    if chunk_rows < 1:
        raise HybridperfError(f"chunk_rows must be at least 1, got {chunk_rows}")
    return [(s, min(s + chunk_rows, n)) for s in range(0, n, chunk_rows)]


def space_rows(kernel: KernelDescriptor, start: int, stop: int) -> pd.DataFrame:
    """Configurations ``start`` to ``stop - 1`` of the Cartesian product of config values.

    Same order as :meth:`KernelDescriptor.config_space` (last parameter fastest), but addressed by
    index (mixed-radix decoding), so chunks can be built independently on different workers.
    """
    free = [p.name for p in kernel.config if p.values is None]
    if free:
        raise DescriptorError(f"{kernel.name}: config parameter(s) {', '.join(free)} have no 'values' list, so the "
                              "space cannot be enumerated; add values = [...] or pass --space NAME=v1,v2")
    if not kernel.config:
        return pd.DataFrame(index=pd.RangeIndex(stop - start))
    values = [np.asarray(p.values, dtype=np.float64) for p in kernel.config]
    coords = np.unravel_index(np.arange(start, stop, dtype=np.int64), tuple(len(v) for v in values))
    return pd.DataFrame({p.name: v[c] for p, v, c in zip(kernel.config, values, coords)})


def _counts(reasons: np.ndarray) -> dict[str, int]:
    if reasons.size == 0:
        return {}
    names, n = np.unique(reasons.astype(str), return_counts=True)
    return {str(k): int(v) for k, v in zip(names, n)}


def _front(df: pd.DataFrame) -> pd.DataFrame:
    if df.empty:
        return df
    return df.loc[pareto_mask(df[_OBJECTIVES].to_numpy(), maximize=True)]


def scan_chunk(space: RankSpace, start: int, stop: int) -> ChunkResult:
    """Evaluate configurations ``[start, stop)``: feasibility, Ryoo metrics, screening, chunk front.

    Infeasible configurations (a ``[space]`` constraint broken, or over an occupancy limit) are
    counted by reason. With ``space.screen_bandwidth``, roofline memory-bound configurations are
    removed before the front is built (seed 003 Sec. 5.3: the metrics assume memory bandwidth is
    not the bottleneck). Without Pareto pruning, the chunk's ``space.keep`` fastest predicted
    configurations are kept instead.
    """
    cfg = space_rows(space.kernel, start, stop)
    params = cfg.copy()
    for name, v in space.sizes.items():
        params[name] = v
    models = ["occupancy", "ryoo"] + (["roofline"] if space.screen_bandwidth else [])
    res = analyze(space.kernel, space.gpu, params, models=models)
    ok = np.asarray(res.feasible, dtype=bool).copy()
    reason = np.asarray(res.reason, dtype=object).copy()
    eff = res.terms["ryoo"]["efficiency"].to_numpy(dtype=np.float64)
    util = res.terms["ryoo"]["utilization"].to_numpy(dtype=np.float64)
    undefined = ok & ~(np.isfinite(eff) & np.isfinite(util))
    reason[undefined] = _UNDEFINED
    ok &= ~undefined
    surv = cfg.loc[ok].copy()
    surv.insert(0, "index", np.arange(start, stop, dtype=np.int64)[ok])
    surv["efficiency"], surv["utilization"] = eff[ok], util[ok]
    spill = getattr(res, "register_spill", None)  # registers clamped at the GPU limit: the compiler spills
    surv["register_spill"] = np.zeros(int(ok.sum()), dtype=bool) if spill is None else np.asarray(spill)[ok]
    n_screened = 0
    unscreened = None
    if space.screen_bandwidth:
        mem = res.terms["roofline"]["memory_bound"].to_numpy(dtype=bool)[ok]
        surv["memory_bound"] = mem
        n_screened = int(mem.sum())
        if space.pareto:
            unscreened = _front(surv)
        surv = surv.loc[~mem]
    if space.pareto:
        kept = _front(surv)
    else:
        kept = _fastest(_predict(space, surv), space.keep)
    return ChunkResult(n_rows=stop - start, infeasible=_counts(reason[~ok]), n_screened=n_screened,
                       front=kept.reset_index(drop=True),
                       front_unscreened=None if unscreened is None else unscreened.reset_index(drop=True))


def _fastest(df: pd.DataFrame, k: int) -> pd.DataFrame:
    return df.sort_values(["time_ms", "index"], kind="stable").head(k)


def merge_chunks(a: ChunkResult, b: ChunkResult, space: RankSpace) -> ChunkResult:
    """Combine two chunk results (associative: any merge order gives the same survivors)."""
    infeasible = dict(a.infeasible)
    for k, v in b.infeasible.items():
        infeasible[k] = infeasible.get(k, 0) + v

    def cat(x: pd.DataFrame | None, y: pd.DataFrame | None) -> pd.DataFrame | None:
        if x is None or y is None:
            return x if y is None else y
        parts = [d for d in (x, y) if not d.empty]
        return pd.concat(parts, ignore_index=True) if parts else x

    front = cat(a.front, b.front)
    assert front is not None
    front = _front(front) if space.pareto else _fastest(front, space.keep)
    unscreened = cat(a.front_unscreened, b.front_unscreened)
    if unscreened is not None:
        unscreened = _front(unscreened)
    return ChunkResult(n_rows=a.n_rows + b.n_rows, infeasible=infeasible, n_screened=a.n_screened + b.n_screened,
                       front=front.reset_index(drop=True),
                       front_unscreened=None if unscreened is None else unscreened.reset_index(drop=True))


# ---------------------------------------------------------------------------------------------
# Prediction and ranking

def prediction_rows(space: RankSpace, configs: pd.DataFrame) -> pd.DataFrame:
    """Sweep-format rows (kernel, gpu, size.*, config.*) for configurations, ready for predict_rows."""
    rows = pd.DataFrame({"kernel": space.kernel_key, "gpu": space.gpu_key}, index=configs.index)
    for name, v in space.sizes.items():
        rows[f"size.{name}"] = float(v)
    for name in space.kernel.config_names:
        rows[f"config.{name}"] = configs[name].to_numpy(dtype=np.float64)
    return rows


def _predict(space: RankSpace, configs: pd.DataFrame) -> pd.DataFrame:
    out = configs.copy()
    if space.model is None or configs.empty:
        for c in ("time_ms", "lo_ms", "hi_ms"):
            out[c] = np.nan
        out["regime"], out["limiter"], out["out_of_domain"], out["ood_reason"] = "", "", False, ""
        return out
    from hybridperf.learn.model import predict_rows

    pred = predict_rows(space.model, prediction_rows(space, configs))
    for c in ("time_ms", "lo_ms", "hi_ms", "regime", "limiter", "out_of_domain", "ood_reason"):
        out[c] = pred[c].to_numpy()
    return out


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


def _key(obj: Any, loader: Any, ident: str) -> str:
    """The name rows should carry: the shipped name when it loads back to the same file, else the path."""
    try:
        if loader(ident).sha256 == obj.sha256:
            return ident
    except (UnknownKernelError, UnknownGPUError):
        pass
    return obj.path


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
    kernel_key = _key(desc, load_kernel, desc.name)  # with_space keeps the file's sha256
    gpu_key = _key(spec, load_gpu, Path(spec.path).stem)
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
        total = ChunkResult(n_rows=0, infeasible={}, n_screened=0, front=pd.DataFrame(columns=["index", *_OBJECTIVES]))
    notes: list[str] = []
    front, fallback = total.front, False
    if screen_bandwidth and front.empty and total.front_unscreened is not None and not total.front_unscreened.empty:
        front, fallback = total.front_unscreened, True
        notes.append(f"every feasible configuration is memory-bound by the roofline ({total.n_screened}); "
                     "screening was skipped so that something is ranked")
    front = front.sort_values("index").reset_index(drop=True)
    cands = _predict(space, front) if pareto else front
    ranked = _rank(space, cands)
    if ranked["out_of_domain"].any():
        notes.append(f"{int(ranked['out_of_domain'].sum())} of {len(ranked)} candidates are outside the model's "
                     "training domain; their times are extrapolations")
    return RankResult(kernel=kernel_key, gpu=gpu_key, sizes=dict(space.sizes), table=ranked.head(top),
                      candidates=ranked, space_size=n, infeasible=dict(total.infeasible),
                      n_screened=0 if fallback else total.n_screened,
                      n_pareto=len(front) if pareto else None, screened_fallback=fallback,
                      notes=tuple(notes))
