"""A configuration space in chunks: feasibility, Ryoo metrics, screening and Pareto fronts, merged associatively."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from hybridperf.analytical.run import analyze
from hybridperf.errors import DescriptorError, HybridperfError
from hybridperf.hardware import GPUSpec
from hybridperf.kernel import KernelDescriptor
from hybridperf.search.pareto import pareto_mask
from hybridperf.sweep import launch_rows

if TYPE_CHECKING:
    from hybridperf.learn.model import TrainedModel

__all__ = ["OBJECTIVES", "ChunkResult", "RankSpace", "chunk_ranges", "config_rows", "merge_chunks", "predict_configs",
           "prediction_rows", "scan_chunk", "space_rows"]

OBJECTIVES = ["efficiency", "utilization"]
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
    return df.loc[pareto_mask(df[OBJECTIVES].to_numpy(), maximize=True)]


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
        kept = _fastest(predict_configs(space, surv), space.keep)
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


def prediction_rows(space: RankSpace, configs: pd.DataFrame) -> pd.DataFrame:
    """Sweep-format rows (kernel, gpu, size.*, config.*) for configurations, ready for predict_rows."""
    names = list(space.kernel.config_names)
    return config_rows(space.kernel_key, space.gpu_key, space.sizes, configs[names], names)


def config_rows(kernel: str, gpu: str, sizes: Mapping[str, float], configs: pd.DataFrame,
                 config_names: Sequence[str]) -> pd.DataFrame:
    """One problem size (``sizes``) with many configurations, as sweep rows."""
    params = pd.DataFrame({name: float(v) for name, v in sizes.items()}, index=configs.index)
    params[list(config_names)] = configs[list(config_names)].to_numpy(dtype=np.float64)
    return launch_rows(kernel, gpu, params, sizes, config_names)


def predict_configs(space: RankSpace, configs: pd.DataFrame) -> pd.DataFrame:
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
