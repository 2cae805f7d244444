"""A configuration space in chunks: feasibility, Ryoo metrics, screening and the shortlist, merged associatively."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from hybridperf.analytical.run import TIME_MODELS, analyze
from hybridperf.errors import HybridperfError
from hybridperf.hardware import GPUSpec
from hybridperf.kernel import KernelDescriptor
from hybridperf.search.optimum import LEVELS, still_contending, width_columns
from hybridperf.search.pareto import pareto_mask
from hybridperf.search.space import ConfigSpace
from hybridperf.sweep import launch_rows

if TYPE_CHECKING:
    from hybridperf.learn.model import TrainedModel

__all__ = ["OBJECTIVES", "PRUNE_MODES", "ChunkResult", "RankSpace", "Shortlist", "analytical_time_column",
           "by_time_only", "chunk_ranges", "config_rows", "fill_k", "merge_chunks", "predict_configs",
           "prediction_rows", "scan_configs", "trim_top_k", "with_pruned",
           "with_ryoo_metrics"]

OBJECTIVES = ["efficiency", "utilization"]  # Ryoo et al. (seed 003 Eqs. 1-2), both maximised
# Configurations of one tie (identical objectives) the front keeps: the fastest predicted, then those of lowest
# index (see _tie_capped).
TIE_CAP = 1000
# union: Pareto front over Ryoo's metrics and the time, plus the model's top-k; ryoo: the paper's
# two-metric front; none: every feasible configuration ranked by predicted time.
PRUNE_MODES = ("union", "ryoo", "none")
_UNDEFINED = "Ryoo metric undefined (check counts.ryoo_instr / ryoo_regions)"
_PREDICTED = ("time_ms", "lo_ms", "hi_ms", "regime", "limiter", "out_of_domain", "ood_reason")


def analytical_time_column(model: str) -> str:
    """Candidate column holding an analytical model's time, e.g. ``mwp_cwp_ms`` for ``mwp-cwp``."""
    return f"{model.replace('-', '_')}_ms"


@dataclass(frozen=True, slots=True)
class RankSpace:
    """Everything a chunk task needs (small and picklable, so it can be shipped to Dask workers).

    ``kernel_key`` and ``gpu_key`` are the names written in prediction rows (what
    :func:`hybridperf.kernel.load_kernel` and :func:`hybridperf.hardware.load_gpu` resolve).
    ``prune`` is one of :data:`PRUNE_MODES`; ``top_k`` the number of the model's fastest predicted
    configurations the union keeps; ``keep`` the number ``prune="none"`` keeps; ``odds`` whether every
    configuration's interval widths are predicted and the dropped contenders kept, for the chance that
    the fastest is kept (:mod:`hybridperf.search.optimum`). The configurations
    are those of ``solver`` (the constrained space, built by :class:`ConfigSpace`) or ``configs``
    (explicit ones: an ``index`` column and every config parameter a column).
    """

    kernel: KernelDescriptor
    gpu: GPUSpec
    sizes: Mapping[str, float]
    kernel_key: str
    gpu_key: str
    screen_bandwidth: bool = False
    prune: str = "union"
    model: TrainedModel | None = None
    keep: int = 10
    top_k: int = 100
    solver: ConfigSpace | None = None
    configs: pd.DataFrame | None = None
    odds: bool = True

    def __post_init__(self) -> None:
        if (self.solver is None) == (self.configs is None):
            raise HybridperfError("RankSpace needs exactly one of solver (a ConfigSpace) and configs")
        if self.prune not in PRUNE_MODES:
            raise HybridperfError(f"unknown prune mode {self.prune!r}; choose from {', '.join(PRUNE_MODES)}")
        if self.prune == "none" and self.model is None:
            raise HybridperfError("prune='none' ranks every feasible configuration by predicted time, so it needs "
                                  "a model; pass one (-m MODEL; in Python: model=) or prune by 'union' or 'ryoo'")
        if self.keep < 1:
            raise HybridperfError(f"top must be at least 1, got {self.keep}")
        if self.top_k < 1:
            raise HybridperfError(f"top_k must be at least 1, got {self.top_k}")

    @property
    def time_objectives(self) -> list[str]:
        """Time columns the Pareto front minimises besides Ryoo's two metrics.

        ``union``: the model's predicted time or, without a model, every analytical model of the
        registry that predicts a time (:data:`hybridperf.analytical.run.TIME_MODELS`).
        """
        if self.prune != "union":
            return []
        return ["time_ms"] if self.model is not None else [analytical_time_column(m) for m in TIME_MODELS]

    @property
    def n_top(self) -> int:
        """How many of the fastest predicted configurations the selection keeps (0: none)."""
        if self.model is None:
            return 0
        return {"union": self.top_k, "none": self.keep}.get(self.prune, 0)

    def size(self) -> int:
        """Number of configurations to account for (the solver's Cartesian product, or the explicit ones)."""
        return self.solver.size() if self.solver is not None else len(self.configs)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class Shortlist:
    """Configurations kept by the selection (flags ``on_front`` and ``in_top_k``) and what it dropped:
    ``n_dropped`` configurations, the fastest predicted of them ``best_dropped_ms`` (NaN without a
    model), and those of them that could still be the fastest by their prediction intervals
    (``contenders``, see :func:`hybridperf.search.optimum.still_contending`; ``n_lost`` more of
    them than it keeps)."""

    kept: pd.DataFrame
    n_dropped: int = 0
    best_dropped_ms: float = float("nan")
    contenders: pd.DataFrame | None = None
    n_lost: int = 0


@dataclass(frozen=True, slots=True)
class ChunkResult:
    """What one chunk (or a merge of chunks) leaves: counts and its shortlist.

    ``unscreened`` is the shortlist built without bandwidth screening, kept as a fallback in case
    screening removes every configuration; ``best_screened_ms`` the fastest predicted time among
    the configurations screening removed.
    """

    n_rows: int
    infeasible: Mapping[str, int]
    n_screened: int
    shortlist: Shortlist
    unscreened: Shortlist | None = None
    best_screened_ms: float = float("nan")


def chunk_ranges(n: int, chunk_rows: int) -> list[tuple[int, int]]:
    """``[start, stop)`` index ranges covering ``range(n)`` in chunks of ``chunk_rows``."""
    if chunk_rows < 1:
        raise HybridperfError(f"chunk_rows must be at least 1, got {chunk_rows}")
    return [(s, min(s + chunk_rows, n)) for s in range(0, n, chunk_rows)]


def _counts(reasons: np.ndarray) -> dict[str, int]:
    if reasons.size == 0:
        return {}
    names, n = np.unique(reasons.astype(str), return_counts=True)
    return {str(k): int(v) for k, v in zip(names, n)}


def _nanmin(values: Sequence[float] | np.ndarray) -> float:
    """Smallest finite value, NaN when there is none (no model, or nothing there)."""
    a = np.asarray(values, dtype=np.float64)
    a = a[np.isfinite(a)]
    return float(a.min()) if a.size else float("nan")


def _tie_capped(obj: np.ndarray, on_front: np.ndarray, index: np.ndarray, time_ms: np.ndarray) -> np.ndarray:
    """``on_front`` keeping, of each group of front rows with identical objectives, the TIE_CAP fastest predicted
    (``time_ms``; NaN last), then of lowest ``index``.

    Ties stay on the front (seed 003 Fig. 6(b)), but parameters no count depends on multiply them: a descriptor
    with four such parameters of 40 values each put 2.5M tied configurations on the front, past 3 GB. The order
    is total, so the rows a tie keeps are the same whatever the chunking, and merges stay exact."""
    pos = np.flatnonzero(on_front)
    if pos.size <= TIE_CAP:
        return on_front
    _, group = np.unique(obj[pos], axis=0, return_inverse=True)
    order = np.lexsort((index[pos], time_ms[pos], group.ravel()))
    g = group.ravel()[order]
    first = np.r_[0, np.flatnonzero(g[1:] != g[:-1]) + 1]
    rank = np.arange(g.size) - np.repeat(first, np.diff(np.r_[first, g.size]))
    out = on_front.copy()
    out[pos[order[rank >= TIE_CAP]]] = False
    return out


def _select(df: pd.DataFrame, space: RankSpace) -> Shortlist:
    """The shortlist of ``df``: the Pareto front over the mode's objectives, plus the ``n_top``
    fastest predicted (ties by index, so the choice is a total order and merges are exact)."""
    n = len(df)
    on_front = np.zeros(n, dtype=bool)
    in_top = np.zeros(n, dtype=bool)
    if n and space.prune != "none":
        times = [df[c].to_numpy(dtype=np.float64) for c in space.time_objectives]
        # A time a model cannot give (NaN) counts as the slowest, so it never dominates anything.
        obj = np.column_stack([df[c].to_numpy(dtype=np.float64) for c in OBJECTIVES]
                              + [np.where(np.isnan(t), np.inf, t) for t in times])
        on_front = _tie_capped(obj, pareto_mask(obj, maximize=[True, True] + [False] * len(times)),
                               df["index"].to_numpy(), df["time_ms"].to_numpy(dtype=np.float64))
    if n and space.n_top:
        order = np.lexsort((df["index"].to_numpy(), df["time_ms"].to_numpy(dtype=np.float64)))  # NaN last
        in_top[order[:space.n_top]] = True
    keep = on_front | in_top
    dropped = df["time_ms"].to_numpy(dtype=np.float64)[~keep]
    kept = df.loc[keep].assign(on_front=on_front[keep], in_top_k=in_top[keep]).reset_index(drop=True)
    cont, lost = still_contending(kept, df.loc[~keep])
    return Shortlist(kept=kept, n_dropped=int((~keep).sum()), best_dropped_ms=_nanmin(dropped), contenders=cont,
                     n_lost=lost)


def _with_contenders(out: Shortlist, parts: Sequence[Shortlist], n_dropped: int, best: float) -> Shortlist:
    """``out`` (a selection from the kept rows of ``parts``) with the parts' drops added: counts, the
    fastest, and the contenders of all, filtered again against the new shortlist."""
    frames = [p.contenders for p in (*parts, out) if p.contenders is not None and not p.contenders.empty]
    lost = sum(p.n_lost for p in (*parts, out))
    cont = out.contenders
    if frames:
        cont, more = still_contending(out.kept, pd.concat(frames, ignore_index=True))
        lost += more
    return Shortlist(kept=out.kept, n_dropped=n_dropped, best_dropped_ms=best, contenders=cont, n_lost=lost)


def by_time_only(space: RankSpace) -> bool:
    """Whether the scan needs the model's time alone (``prune="none"`` with a model, no screening): Ryoo's
    metrics are then output columns, computed for the final candidates only (:func:`with_ryoo_metrics`)."""
    return space.prune == "none" and space.model is not None and not space.screen_bandwidth


def _scan_by_time(space: RankSpace, cfg: pd.DataFrame) -> ChunkResult:
    """:func:`scan_configs` for :func:`by_time_only`: one analysis per configuration, the model's features,
    which carry feasibility, register spills and whether Ryoo's metrics are defined (the reasons of the
    infeasible ones come from an occupancy analysis of those alone)."""
    from hybridperf.learn.features import analytical_features

    names = list(space.kernel.config_names)
    params = cfg[names].reset_index(drop=True)
    rows = prediction_rows(space, params)
    feats = analytical_features(rows, kernels={space.kernel_key: space.kernel})
    ok = feats["feasible"].to_numpy() > 0
    defined = np.isfinite(feats["log_ryoo_efficiency"].to_numpy()) & np.isfinite(feats["ryoo_utilization"].to_numpy())
    reason = np.full(len(params), "", dtype=object)
    if (~ok).any():
        sub = params.loc[~ok].assign(**space.sizes)
        reason[~ok] = analyze(space.kernel, space.gpu, sub, models=["occupancy"]).reason
    reason[ok & ~defined] = _UNDEFINED
    ok &= defined
    surv = params.loc[ok].reset_index(drop=True)
    surv.insert(0, "index", cfg["index"].to_numpy(dtype=np.int64)[ok])
    surv["efficiency"], surv["utilization"] = np.nan, np.nan
    surv["register_spill"] = feats["register_spill"].to_numpy()[ok] > 0
    surv = _with_spread(space, surv, rows.loc[ok], feats.loc[ok])
    return ChunkResult(n_rows=len(cfg), infeasible=_counts(reason[~ok]), n_screened=0, shortlist=_select(surv, space))


def with_ryoo_metrics(space: RankSpace, kept: pd.DataFrame) -> pd.DataFrame:
    """``kept`` with Ryoo's efficiency and utilization (seed 003 Eqs. 1-2) where :func:`by_time_only` left them out."""
    if not by_time_only(space) or kept.empty:
        return kept
    params = kept[list(space.kernel.config_names)].reset_index(drop=True).assign(**space.sizes)
    ry = analyze(space.kernel, space.gpu, params, models=["occupancy", "ryoo"]).terms["ryoo"]
    return kept.assign(efficiency=ry["efficiency"].to_numpy(dtype=np.float64),
                       utilization=ry["utilization"].to_numpy(dtype=np.float64))


def scan_configs(space: RankSpace, cfg: pd.DataFrame) -> ChunkResult:
    """Evaluate configurations (``cfg``: an ``index`` column and one column per config parameter):
    feasibility, Ryoo metrics, predicted times, screening, shortlist.

    Infeasible configurations (a ``[space]`` constraint broken, or over an occupancy limit) are
    counted by reason. With a model every feasible configuration's time is predicted, and with
    ``space.odds`` its interval widths (:func:`_with_spread`; labels, intervals and domain reasons
    are added to the final candidates by :func:`predict_configs`). With ``space.screen_bandwidth``,
    roofline memory-bound configurations are removed before the shortlist is built (seed 003 Sec. 5.3: the metrics
    assume memory bandwidth is not the bottleneck). The shortlist is the chunk's part of
    :func:`_select`.
    """
    if by_time_only(space) and len(cfg):
        return _scan_by_time(space, cfg)
    names = list(space.kernel.config_names)
    params = cfg[names].reset_index(drop=True)
    index = cfg["index"].to_numpy(dtype=np.int64)
    for name, v in space.sizes.items():
        params[name] = v
    timed = [m for m in TIME_MODELS if analytical_time_column(m) in space.time_objectives]
    models = ["occupancy", "ryoo"] + (["roofline"] if space.screen_bandwidth and "roofline" not in timed else [])
    res = analyze(space.kernel, space.gpu, params, models=models + timed)
    ok = np.asarray(res.feasible, dtype=bool).copy()
    reason = np.asarray(res.reason, dtype=object).copy()
    eff = res.terms["ryoo"]["efficiency"].to_numpy(dtype=np.float64)
    util = res.terms["ryoo"]["utilization"].to_numpy(dtype=np.float64)
    undefined = ok & ~(np.isfinite(eff) & np.isfinite(util))
    reason[undefined] = _UNDEFINED
    ok &= ~undefined
    surv = params.loc[ok, names].reset_index(drop=True)
    surv.insert(0, "index", index[ok])
    surv["efficiency"], surv["utilization"] = eff[ok], util[ok]
    surv["register_spill"] = np.asarray(res.register_spill, dtype=bool)[ok]  # registers clamped: nvcc spills
    for m in timed:
        surv[analytical_time_column(m)] = res.terms[m]["time_ms"].to_numpy(dtype=np.float64)[ok]
    surv = _with_spread(space, surv)
    n_screened, unscreened, best_screened = 0, None, float("nan")
    if space.screen_bandwidth:
        mem = res.terms["roofline"]["memory_bound"].to_numpy(dtype=bool)[ok]
        surv["memory_bound"] = mem
        n_screened = int(mem.sum())
        best_screened = _nanmin(surv["time_ms"].to_numpy(dtype=np.float64)[mem])
        unscreened = _select(surv, space)
        surv = surv.loc[~mem]
    return ChunkResult(n_rows=len(cfg), infeasible=_counts(reason[~ok]), n_screened=n_screened,
                       shortlist=_select(surv, space), unscreened=unscreened, best_screened_ms=best_screened)


def _merge(a: Shortlist | None, b: Shortlist | None, space: RankSpace) -> Shortlist | None:
    """Shortlist of the union of two disjoint parts.

    Exact for any merge order: a configuration on the global front is on the front of every
    part that holds it, and one of the global top-k is in its part's top-k, so both survive every
    merge; what a merge drops is counted once, so the counts and the fastest dropped add up.
    """
    if a is None or b is None:
        return a if b is None else b
    parts = [s.kept for s in (a, b) if not s.kept.empty]
    pool = pd.concat(parts, ignore_index=True) if parts else a.kept
    out = _select(pool, space)
    return _with_contenders(out, (a, b), a.n_dropped + b.n_dropped + out.n_dropped,
                            _nanmin([a.best_dropped_ms, b.best_dropped_ms, out.best_dropped_ms]))


def trim_top_k(short: Shortlist, space: RankSpace, k: int) -> Shortlist:
    """``short`` with its top-k cut to ``k <= space.top_k`` (exact: top-k sets are nested, and the
    front is unchanged); what the cut drops is added to the dropped count and fastest time."""
    out = _select(short.kept, dataclasses.replace(space, top_k=k))
    return _with_contenders(out, (short,), short.n_dropped + out.n_dropped,
                            _nanmin([short.best_dropped_ms, out.best_dropped_ms]))


def fill_k(short: Shortlist, budget: int, k_min: int) -> int:
    """The largest k whose union of the front and the model's k fastest holds at most ``budget``
    configurations, and at least ``k_min`` (the front is always whole, so it may exceed the budget)."""
    kept = short.kept
    order = np.lexsort((kept["index"].to_numpy(), kept["time_ms"].to_numpy(dtype=np.float64)))
    on_front = kept["on_front"].to_numpy(dtype=bool)
    added = np.cumsum(~on_front[order])  # configurations the first j of the order add to the front
    k = int(np.searchsorted(added, budget - int(on_front.sum()), side="right"))
    return max(k_min, min(k, len(kept)))


def merge_chunks(a: ChunkResult, b: ChunkResult, space: RankSpace) -> ChunkResult:
    """Combine two chunk results (associative: any merge order gives the same result)."""
    infeasible = dict(a.infeasible)
    for k, v in b.infeasible.items():
        infeasible[k] = infeasible.get(k, 0) + v
    short = _merge(a.shortlist, b.shortlist, space)
    assert short is not None
    return ChunkResult(n_rows=a.n_rows + b.n_rows, infeasible=infeasible, n_screened=a.n_screened + b.n_screened,
                       shortlist=short, unscreened=_merge(a.unscreened, b.unscreened, space),
                       best_screened_ms=_nanmin([a.best_screened_ms, b.best_screened_ms]))


def with_pruned(res: ChunkResult, pruned: Mapping[str, int]) -> ChunkResult:
    """``res`` with configurations the solver pruned (reason -> count) added to its rows and infeasible counts."""
    if not pruned:
        return res
    infeasible = dict(res.infeasible)
    for k, v in pruned.items():
        infeasible[k] = infeasible.get(k, 0) + v
    return dataclasses.replace(res, n_rows=res.n_rows + sum(pruned.values()), infeasible=infeasible)


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


def _with_spread(space: RankSpace, configs: pd.DataFrame, rows: pd.DataFrame | None = None,
                 feats: pd.DataFrame | None = None) -> pd.DataFrame:
    """``configs`` with what the scan needs of every configuration: ``time_ms`` and, with ``space.odds``, the
    half widths at :data:`hybridperf.search.optimum.LEVELS` (NaN without a model). The rest of
    :func:`predict_configs`'s columns are added to the final candidates only."""
    out = configs.copy()
    levels = LEVELS if space.odds else ()
    if space.model is None or configs.empty:
        out["time_ms"] = np.nan
        for c in width_columns(levels):
            out[c] = np.nan
        return out
    from hybridperf.learn.model import predict_spread

    rows = prediction_rows(space, configs) if rows is None else rows.reset_index(drop=True)
    time_ms, widths = predict_spread(space.model, rows, levels, features=None if feats is None else
                                     feats.reset_index(drop=True), kernels={space.kernel_key: space.kernel})
    out["time_ms"] = time_ms
    for j, c in enumerate(width_columns(levels)):
        out[c] = widths[:, j]
    return out


def predict_configs(space: RankSpace, configs: pd.DataFrame, rows: pd.DataFrame | None = None,
                    feats: pd.DataFrame | None = None) -> pd.DataFrame:
    """``configs`` with the model's prediction columns (time_ms, lo_ms, hi_ms, regime, limiter,
    out_of_domain, ood_reason, and the half widths at :data:`hybridperf.search.optimum.LEVELS`, by which
    the dropped configurations that could still be the fastest are found:
    :func:`hybridperf.search.optimum.still_contending`); NaN times and empty labels without a model.
    ``rows``/``feats``: the configurations' prediction rows and features where already computed."""
    out = configs.copy()
    if space.model is None or configs.empty:
        for c in ("time_ms", "lo_ms", "hi_ms"):
            out[c] = np.nan
        out["regime"], out["limiter"], out["out_of_domain"], out["ood_reason"] = "", "", False, ""
        return out
    from hybridperf.learn.model import predict_rows

    rows = prediction_rows(space, configs) if rows is None else rows.reset_index(drop=True)
    pred = predict_rows(space.model, rows, features=None if feats is None else feats.reset_index(drop=True),
                        kernels={space.kernel_key: space.kernel}, levels=LEVELS, check=False)
    for c in (*_PREDICTED, *width_columns()):
        out[c] = pred[c].to_numpy()
    return out
