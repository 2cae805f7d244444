"""Rank a kernel's configuration space: constraints, Ryoo metrics, predicted times, pruning that keeps the best."""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from hybridperf.analytical.run import TIME_MODELS
from hybridperf.errors import HybridperfError
from hybridperf.hardware import GPUSpec, load_gpu
from hybridperf.kernel import KernelDescriptor, kernel_key, load_kernel
from hybridperf.learn.shortlist import MIN_GROUP_RUNS, hit_probability
from hybridperf.search.chunks import (
    OBJECTIVES,
    TIE_CAP,
    RankSpace,
    analytical_time_column,
    config_rows,
    fill_k,
    predict_configs,
    trim_top_k,
    with_ryoo_metrics,
)
from hybridperf.search.stream import scan_space
from hybridperf.search.user_space import user_space
from hybridperf.sweep import param_columns, param_name

if TYPE_CHECKING:
    from hybridperf.learn.model import TrainedModel

__all__ = ["FILL", "ODDS_MAX_CONFIGS", "RankResult", "rank_configs", "resolve_top_k"]

# By default the union's top-k fills the shortlist up to this share of the feasible configurations:
# the bound of EVALUATION.md's pruning target (>= 90% removed). Measured on the 11 ranking sweeps with
# models trained on 1% of each (experiments/results/ranking_pruning.md): a 1%-trained model needs k up
# to ~8% of the space to reach a configuration within 1% of the optimum on the convolution sweeps.
FILL = 0.1
# Above this many configurations (the space's size, before constraints) the dropped configurations that
# could be the fastest by their intervals (n_contenders) are not counted unless asked for (odds=True): it
# needs every configuration's interval widths (about a third of the scan's time) and, on spaces this
# large, intervals leave more than MAX_CONTENDERS of them (kt-convolution at W = H = 4096: 46% of
# 500,000 sampled configurations contend). The chance that the fastest is kept needs neither.
ODDS_MAX_CONFIGS = 2_000_000


@dataclass(frozen=True, slots=True)
class RankResult:
    """Ranked candidates of one (kernel, GPU, sizes) and the counts of every pruning stage.

    ``table`` is the top of ``candidates`` (ranked by predicted time; by Ryoo efficiency when no
    model was given). ``tie_with_best`` marks candidates whose prediction interval overlaps the
    best candidate's: they are indistinguishable by the model, measure them rather than trust
    the order. ``on_front`` / ``in_top_k`` say which selection kept a candidate.

    ``prune`` is the mode asked for; ``objectives`` the columns the Pareto front was taken over
    (empty for ``none``); ``top_k`` the k of the model's top-k (None when no top-k was kept) and
    ``fill`` the share of the feasible configurations it was chosen to fill (None when k was given);
    ``n_pareto`` / ``n_top_k`` how many candidates are on the front / in the top-k;
    ``n_pruned`` how many feasible configurations the selection dropped and ``best_pruned_ms``
    the fastest predicted time among them (NaN without a model), so a user sees whether pruning
    dropped something the model likes; ``best_screened_ms`` the same for bandwidth screening.

    With a model, ``p_fastest_kept`` is the chance that the truly fastest configuration (of those left
    after screening) is among ``candidates``, and ``p_fastest_in_table`` that it is among ``table``: how
    often the model's predicted-fastest share of that size held the fastest of its own held-out runs of
    the kernel (:mod:`hybridperf.learn.shortlist`; the union's share is its top-k's, the front it adds
    only raises the chance). NaN, with the reason in ``odds_note``, without a model, for Ryoo's front
    (not chosen by predicted time), on a GPU the model never ran the kernel on, where the kernel's
    training runs hold no (GPU, size) group of 10, or for a share finer than the held-out runs resolve.
    ``n_contenders`` counts the configurations not returned (pruned, or ranked below the candidates kept) whose
    intervals still allow them to be the fastest (:mod:`hybridperf.search.optimum`); 0 when ``odds_skipped``
    (``odds=False``, or a space of more than :data:`ODDS_MAX_CONFIGS` ranked without ``odds=True``).
    ``defaulted_sizes`` names the sizes ranked at the descriptor's default because no value gave them (a note
    says so: :meth:`defaulted_note`).
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
    prune: str = "union"
    objectives: tuple[str, ...] = ()
    top_k: int | None = None
    fill: float | None = None
    n_top_k: int | None = None
    n_pruned: int = 0
    best_pruned_ms: float = float("nan")
    best_screened_ms: float = float("nan")
    fixed: Mapping[str, float] = field(default_factory=dict)
    defaulted_sizes: tuple[str, ...] = ()
    p_fastest_kept: float = float("nan")
    p_fastest_in_table: float = float("nan")
    n_contenders: int = 0
    odds_skipped: bool = False
    odds_note: str = ""

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
        """One row per stage: ``stage``, ``configs``, ``share`` of the space, and ``best_ms``, the
        fastest predicted time in that set (NaN without a model)."""
        c = self.candidates

        def best(mask: Any) -> float:
            return float(c.loc[mask, "time_ms"].min()) if len(c) and mask.any() else np.nan

        rows: list[tuple[str, int, float]] = [("space", self.space_size, np.nan)]
        rows += [(f"infeasible: {r}", n, np.nan) for r, n in sorted(self.infeasible.items(), key=lambda kv: -kv[1])]
        rows += [("feasible", self.n_feasible, np.nan),
                 ("removed by bandwidth screening", self.n_screened, self.best_screened_ms)]
        if self.n_pareto is not None:
            rows.append(("Pareto survivors", self.n_pareto, best(c["on_front"])))
        if self.n_top_k is not None:
            rows.append((f"model top-k (k={self.top_k})", self.n_top_k, best(c["in_top_k"])))
        rows.append(("ranked" if self.prune != "none" else "ranked and returned", len(c),
                     best(np.ones(len(c), dtype=bool))))
        rows.append(("pruned" if self.prune != "none" else "ranked, not returned", self.n_pruned,
                     self.best_pruned_ms))
        df = pd.DataFrame(rows, columns=["stage", "configs", "best_ms"])
        df.insert(2, "share", df["configs"] / max(self.space_size, 1))
        return df

    def defaulted_note(self) -> str:
        """The note naming the sizes ranked at the descriptor's default ('' when every size was given)."""
        if not self.defaulted_sizes:
            return ""
        shown = ", ".join(f"{k}={self.sizes[k]:.15g}" for k in self.defaulted_sizes)
        return (f"ranked for the descriptor's default problem size {shown}: no value gave "
                f"{'it' if len(self.defaulted_sizes) == 1 else 'them'}; give your problem's size (sizes= in "
                f"Python, --set {self.defaulted_sizes[0]}=... on the command line)")

    def describe_pruning(self) -> str:
        """One line: the prune mode, the front's objectives and the top-k."""
        if self.prune == "none":
            return "prune: none (every feasible configuration ranked by predicted time)"
        text = f"prune: {self.prune} (Pareto front over {', '.join(self.objectives)}"
        if not self.top_k:
            return text + ")"
        filled = f", filled to {self.fill:.0%} of the feasible" if self.fill else ""
        return text + f", plus the model's {self.top_k} fastest predicted{filled})"

    def describe_odds(self) -> str:
        """One line: how likely the fastest configuration is among the candidates and the table, and how many
        configurations not returned could be the fastest by their intervals ('' without a model)."""
        if not self.odds_note:
            return ""
        if not np.isfinite(self.p_fastest_kept):
            text = f"chance the fastest is kept: unknown ({self.odds_note})"
        else:
            shown = (f"{self.p_fastest_in_table:.0%}" if np.isfinite(self.p_fastest_in_table)
                     else "unknown, a share finer than the held-out runs resolve")
            text = (f"chance the fastest configuration is among the {len(self.candidates)} ranked: "
                    f"{self.p_fastest_kept:.0%}; among the {len(self.table)} shown: {shown} (how often the model's "
                    f"predicted-fastest share held the fastest of its {self.odds_note})")
        if self.odds_skipped:
            return text
        return text + (f"; {self.n_contenders} configurations not returned could be the fastest by their "
                       "intervals")

    def pruning(self) -> dict[str, Any]:
        """How the pruning did, as plain values (for JSON output)."""
        return {"prune": self.prune, "objectives": list(self.objectives), "top_k": self.top_k, "fill": self.fill,
                "screened": self.n_screened, "on_front": self.n_pareto, "in_top_k": self.n_top_k,
                "ranked": len(self.candidates), "pruned": self.n_pruned, "best_pruned_ms": self.best_pruned_ms,
                "best_screened_ms": self.best_screened_ms, "screened_fallback": self.screened_fallback,
                "p_fastest_kept": self.p_fastest_kept, "p_fastest_in_table": self.p_fastest_in_table,
                "odds_note": self.odds_note,
                "contenders_dropped": None if self.odds_skipped else self.n_contenders,
                "odds_computed": not self.odds_skipped and bool(self.candidates["time_ms"].notna().any())}


def _rank(space: RankSpace, cands: pd.DataFrame) -> pd.DataFrame:
    if space.model is None:
        # No predicted time: the hierarchical roofline's where the union's front carries it (over the 18 shipped
        # sweep groups its fastest configuration measures 0.844 of the optimum, median, against 0.595 for Ryoo's
        # most efficient; experiments/results/kt_analytical_rank.md), else Ryoo's order (the paper's front).
        key = analytical_time_column("hierarchical")
        by, ascending = (["efficiency", "utilization", "index"], [False, False, True])
        if key in cands.columns:
            by, ascending = [key, *by], [True, *ascending]
        order = cands.sort_values(by, ascending=ascending, kind="stable", na_position="last")
        order["tie_with_best"] = False
    else:
        order = cands.sort_values(["time_ms", "index"], kind="stable")
        best = order.iloc[0] if len(order) else None
        order["tie_with_best"] = False if best is None else (
            (order["lo_ms"] <= best["hi_ms"]) & (order["hi_ms"] >= best["lo_ms"]))
    order.insert(0, "rank", np.arange(1, len(order) + 1))
    cols = ["rank", "index", *space.kernel.config_names, "time_ms", "lo_ms", "hi_ms", "tie_with_best", "regime",
            "limiter", "out_of_domain", "ood_reason", "efficiency", "utilization"]
    cols += ([] if space.model is not None else space.time_objectives) + ["on_front", "in_top_k"]
    cols += [c for c in ("register_spill", "memory_bound") if c in order.columns]
    return order[cols].rename(columns={n: f"config.{n}" for n in space.kernel.config_names}).reset_index(drop=True)


def _held_out_odds(model: Any, space: RankSpace, mode: str, kept_share: float,
                   table_share: float, pool: int) -> tuple[float, float, str]:
    """(p_fastest_kept, p_fastest_in_table, what they rest on or why they are unknown), from the model's
    held-out hit curve of the kernel (:func:`hybridperf.learn.shortlist.hit_probability`) at the shares of the
    ``pool`` configurations (feasible, not screened) the predicted-fastest candidates and the table hold."""
    if model is None:
        return np.nan, np.nan, ""
    if mode == "ryoo":
        return np.nan, np.nan, "Ryoo's front is not chosen by predicted time"
    curves = None if model.intervals is None else model.intervals.shortlist_hits
    if curves is None:
        return np.nan, np.nan, ("the model holds no held-out shortlist measurements (trained without intervals, or "
                                "by a hybridperf before them); retrain it")
    # The name the model's training rows gave the kernel: rows name a descriptor by its name or its path.
    same = [k for k, d in model.descriptors.items() if d.sha256 == space.kernel.sha256]
    names = [n for n in (space.kernel_key, *same) if n in model.features.domain_]
    name = names[0] if names else space.kernel_key
    if space.gpu_key not in model.features.domain_.get(name, {}).get("gpus", ()):
        return np.nan, np.nan, f"the model never ran {space.kernel_key} on {space.gpu_key}"
    curve = curves.get(name)
    if curve is None:
        return np.nan, np.nan, (f"no GPU and size of {space.kernel_key} has {MIN_GROUP_RUNS} training runs to "
                                "measure it on")
    p_kept, p_table = hit_probability(curve, kept_share, pool), hit_probability(curve, table_share, pool)
    if not np.isfinite(p_kept):
        return np.nan, np.nan, (f"a shortlist of {kept_share:.2%} of the feasible, unscreened configurations is finer "
                                f"than the model's held-out runs of {space.kernel_key} resolve ({curve['q'][0]:.2%})")
    groups = int(max(curve["groups"]))
    carried = ("" if curve.get("rho") is None else
               f", an order correlation of {curve['rho']:.2f} carried to this space's {pool:,} configurations")
    return p_kept, p_table, (f"held-out runs in {groups} GPU-and-size group{'s' if groups > 1 else ''} of "
                             f"{space.kernel_key}{carried}{_beyond_trained_sizes(model, name, space)}")


def _beyond_trained_sizes(model: Any, name: str, space: RankSpace) -> str:
    """'', or a clause saying that the problem's size lies outside the sizes the model's odds were measured at."""
    from hybridperf.learn.domain import factor_text, out_of_domain

    row = pd.DataFrame({"kernel": [name], "gpu": [space.gpu_key], **{f"size.{k}": [v] for k, v in space.sizes.items()}})
    factor = float(out_of_domain(row, model.features.domain_)["ood_size_factor"].iloc[0])
    return "" if factor <= 1 + 1e-9 else (f", all at trained sizes: this problem's size lies {factor_text(factor)} "
                                          "outside them, where the model's order was never measured")


def resolve_top_k(top_k: float, n_configs: int) -> int:
    """The number of the model's fastest configurations to keep among ``n_configs``: ``top_k``
    itself when it is a count (an int >= 1), ``ceil(top_k * n_configs)`` (at least 1) when it is a
    share in (0, 1) (scikit-learn's convention for sizes)."""
    if isinstance(top_k, (bool, np.bool_)) or not isinstance(top_k, (int, float, np.integer, np.floating)):
        raise HybridperfError(f"top_k must be a count (an integer >= 1) or a share of the space in (0, 1), "
                              f"got {top_k!r}")
    if isinstance(top_k, (int, np.integer)):
        if top_k < 1:
            raise HybridperfError(f"top_k must be at least 1, got {top_k}")
        return int(top_k)
    if not 0 < top_k < 1:
        raise HybridperfError(f"top_k as a float is a share of the space and must lie in (0, 1), got {top_k:g}; "
                              "give an integer for a count")
    return max(1, math.ceil(top_k * n_configs))


def _prune_mode(prune: str, pareto: bool | None) -> str:
    if pareto is None:
        return prune
    return "ryoo" if pareto else "none"


def _notes(res: RankResult, space: RankSpace) -> list[str]:
    """What a user should know about the pruning: the fallback without a model, what it dropped."""
    notes = [res.defaulted_note()] if res.defaulted_sizes else []
    if space.prune == "union" and space.model is None:
        notes.append("no model, so no predicted times for the union's top-k: kept the Pareto front over "
                     f"efficiency, utilization and the analytical times ({', '.join(TIME_MODELS)}) instead; "
                     "pass a model (-m) to keep the model's top-k as well")
    kept = float(res.candidates["time_ms"].min()) if len(res.candidates) else np.nan
    if res.prune != "none" and np.isfinite(res.best_pruned_ms) and not res.best_pruned_ms >= kept:
        notes.append(f"pruning dropped a configuration predicted at {res.best_pruned_ms:.4g} ms, faster than the best "
                     f"kept ({kept:.4g} ms); prune 'union' keeps the model's fastest configurations too")
    if np.isfinite(res.best_screened_ms) and not res.best_screened_ms >= kept:
        notes.append(f"bandwidth screening removed a configuration predicted at {res.best_screened_ms:.4g} ms, faster "
                     f"than the best kept ({kept:.4g} ms)")
    front = res.candidates[res.candidates["on_front"]] if res.prune != "none" else res.candidates.iloc[:0]
    objectives = [c for c in res.objectives if c in front.columns]
    if len(front) >= TIE_CAP and front.groupby(objectives, dropna=False).size().max() >= TIE_CAP:
        notes.append(f"the Pareto front holds ties of {TIE_CAP:,} or more configurations with identical objectives: "
                     f"of each such tie the {TIE_CAP:,} fastest predicted (without a model: of lowest index) are kept "
                     "(parameters that change no count multiply ties)")
    out_of_domain = int(res.candidates["out_of_domain"].sum())
    if out_of_domain:
        shown = int(res.table["out_of_domain"].sum())
        notes.append(f"{out_of_domain} of {len(res.candidates)} candidates ({shown} of the top {len(res.table)}) are "
                     "outside the model's training domain; their times are extrapolations")
    notes += _untrained_values(space)
    return notes


def _untrained_values(space: RankSpace) -> list[str]:
    """A note per searched parameter of which the model was trained on one value only: picks with other
    values are out of its domain (e.g. a filter size the user meant to keep)."""
    if space.model is None:
        return []
    seen = space.model.features.domain_.get(space.kernel_key, {}).get("configs", {})
    out = []
    for p in space.kernel.config:
        trained = seen.get(f"config.{p.name}", {}).get("values")
        if p.values is not None and len(p.values) > 1 and trained is not None and len(trained) == 1:
            v = trained[0]
            out.append(f"the model was trained on {p.name}={v:g} only, and the space searches {len(p.values)} values "
                       f"of it; fix it to rank within the model's domain (--set {p.name}={v:g})")
    return out


def rank_configs(model: TrainedModel | None, kernel: KernelDescriptor | str, gpu: GPUSpec | str,
                 sizes: Mapping[str, Any], *, space_overrides: Mapping[str, Sequence[float]] | None = None,
                 configs: pd.DataFrame | None = None, top: int = 10, prune: str = "union", top_k: float | None = None,
                 screen_bandwidth: bool = False, pareto: bool | None = None, chunk_rows: int = 50_000,
                 progress: bool = False, client: Any = None, jobs: int = 1, odds: bool | None = None) -> RankResult:
    """Enumerate a kernel's configuration space, prune it, and rank the survivors by predicted time.

    Stages: the space is the descriptor's ``[config]`` value lists, with the config parameters
    given in ``sizes`` fixed and ``space_overrides`` restricting others, built by a constraint
    solver that never forms a configuration breaking a ``[space]`` constraint (counted by the
    constraint that ruled it out, :class:`hybridperf.search.space.ConfigSpace`); or exactly the
    configurations of ``configs``. Each is checked against the GPU's occupancy limits
    (infeasible ones are counted by reason); Ryoo et al.'s efficiency and utilization (seed 003
    Eqs. 1-2) are computed and, with a model, every feasible configuration's time is predicted,
    chunk by chunk; with ``screen_bandwidth`` roofline memory-bound configurations are removed
    first (seed 003 Sec. 5.3); then ``prune`` selects the shortlist:

    - ``"union"`` (default): the Pareto front over efficiency, utilization (maximised) and the
      model's predicted time (minimised), united with the model's k fastest predicted
      configurations, so the configurations the model rates best are never dropped. By default k
      fills the shortlist up to :data:`FILL` (10%) of the feasible configurations (at least
      ``top``; the front is always kept whole); ``top_k`` sets k instead. The time
      objective breaks the ties of Ryoo's front (clusters of identical metrics, seed 003 Fig.
      6(b)) in favour of the fastest predicted. Without a model the front is taken over
      efficiency, utilization and the time of every analytical model of the registry
      (:data:`hybridperf.analytical.run.TIME_MODELS`) instead, and a note says so.
    - ``"ryoo"``: the paper's front over efficiency and utilization alone (ties kept; seed 003
      Sec. 5.2).
    - ``"none"``: no pruning; every feasible configuration is ranked and the ``top`` fastest
      predicted are returned (needs a model).

    Parameters
    ----------
    model : TrainedModel or None
        Predicts the times. ``None``: prune only, and rank by the hierarchical roofline's time (``union``) or by
        efficiency (``ryoo``, which computes no times).
    kernel, gpu : descriptor / spec, or a shipped name or TOML path.
    sizes : mapping of parameter -> one value: the problem size (defaults fill the rest) and any
        config parameter to fix (``--set filter_width=15``), which is then not searched.
    space_overrides : mapping of config parameter -> allowed values (a subset of the descriptor's).
    configs : explicit configurations to rank instead of the descriptor's space (one row each;
        ``config.*`` columns, as in a sweep, or columns named after the parameters; a missing
        parameter or empty cell takes its default; see :func:`hybridperf.search.user_space.user_space`
        for rows of other kernels or sizes and duplicates). ``index`` then refers to its rows;
        fixes and ``space_overrides`` keep the rows that match them.
    top : number of candidates in ``RankResult.table``.
    prune : ``"union"``, ``"ryoo"`` or ``"none"`` (see above).
    top_k : the union's k: None (fill to :data:`FILL` of the feasible configurations, at least
        ``top``), a count (int >= 1) or a share (float in (0, 1)) of the feasible configurations
        left after screening. Shares and the fill are applied exactly at the end; while
        streaming, up to that share of the whole space is held.
    screen_bandwidth : drop roofline memory-bound configurations before pruning.
    pareto : deprecated alias of ``prune``: ``False`` = ``"none"``, ``True`` = ``"ryoo"``.
    chunk_rows : configurations per chunk; memory stays bounded by one chunk plus the shortlist.
    progress : report the scan's progress (:mod:`hybridperf.progress`; the command line draws a bar).
    client : optional ``distributed.Client``; the same chunk function then runs on the cluster.
    jobs : threads of this process scanning chunks side by side (without a client).
    odds : compute the chance that the fastest configuration is kept (every configuration's interval
        widths predicted): None (default) for spaces of at most :data:`ODDS_MAX_CONFIGS` configurations.

    Returns
    -------
    RankResult
        The ranked table (rank, index, config.*, time_ms, lo_ms, hi_ms, tie_with_best, regime,
        limiter, out_of_domain, ood_reason, efficiency, utilization[, the analytical times],
        on_front, in_top_k, register_spill[, memory_bound]), the counts of every stage and what
        pruning dropped.
    """
    if isinstance(top, bool) or not isinstance(top, (int, np.integer)) or top < 1:
        raise HybridperfError(f"top must be a whole number >= 1 (the candidates shown), got {top!r}")
    desc = load_kernel(kernel, known=None if model is None else model.descriptors)
    spec = load_gpu(gpu)
    us = user_space(desc, sizes, restrict=space_overrides, candidates=configs)
    n = us.size()
    mode = _prune_mode(prune, pareto)
    k = max(top, math.ceil(FILL * n)) if top_k is None else resolve_top_k(top_k, n)
    space = RankSpace(kernel=us.kernel, gpu=spec, sizes=us.sizes, kernel_key=kernel_key(us.kernel), gpu_key=spec.key,
                      screen_bandwidth=screen_bandwidth, prune=mode, model=model, keep=top, top_k=k,
                      solver=us.space, configs=us.candidates,  # with_space keeps the path and sha256: same key
                      odds=n <= ODDS_MAX_CONFIGS if odds is None else bool(odds))
    total = scan_space(space, chunk_rows=chunk_rows, progress=progress, client=client, jobs=jobs)
    short, fallback = total.shortlist, False
    if screen_bandwidth and short.kept.empty and total.unscreened is not None and not total.unscreened.kept.empty:
        short, fallback = total.unscreened, True
    if space.n_top and mode == "union" and not isinstance(top_k, (int, np.integer)):
        # Shares are of what the selection chose from (feasible, not screened), known only now.
        n_sel = len(short.kept) + short.n_dropped
        final_k = fill_k(short, int(FILL * n_sel), top) if top_k is None else resolve_top_k(top_k, n_sel)
        short = trim_top_k(short, space, min(final_k, space.top_k))
        space = dataclasses.replace(space, top_k=min(final_k, space.top_k))
    kept = with_ryoo_metrics(space, short.kept.sort_values("index").reset_index(drop=True))
    ranked = _rank(space, predict_configs(space, kept))
    n_sel = len(short.kept) + short.n_dropped  # feasible and not screened: what the shortlist was chosen from
    n_top = int(ranked["in_top_k"].sum()) if mode == "union" else len(ranked)
    p_kept, p_table, odds_note = _held_out_odds(model, space, mode, n_top / max(n_sel, 1),
                                                min(top, len(ranked)) / max(n_sel, 1), n_sel)
    front = mode != "none"
    filled = top_k is None and mode == "union" and space.n_top > 0
    res = RankResult(kernel=space.kernel_key, gpu=space.gpu_key, sizes=dict(space.sizes), table=ranked.head(top),
                     candidates=ranked, space_size=n, infeasible=dict(total.infeasible),
                     n_screened=0 if fallback else total.n_screened,
                     n_pareto=int(ranked["on_front"].sum()) if front else None, screened_fallback=fallback,
                     prune=mode, objectives=tuple(OBJECTIVES + space.time_objectives) if front else (),
                     top_k=space.n_top or None, fill=FILL if filled else None,
                     n_top_k=int(ranked["in_top_k"].sum()) if space.n_top else None,
                     n_pruned=short.n_dropped, best_pruned_ms=short.best_dropped_ms,
                     best_screened_ms=np.nan if fallback else total.best_screened_ms, fixed=dict(us.fixed),
                     defaulted_sizes=us.defaulted,
                     p_fastest_kept=p_kept, p_fastest_in_table=p_table, odds_note=odds_note,
                     n_contenders=len(short.contenders) + short.n_lost if short.contenders is not None else 0,
                     odds_skipped=model is not None and not space.odds)
    notes = _notes(res, space)
    if fallback:
        notes.insert(0, f"every feasible configuration is memory-bound by the roofline ({total.n_screened}); "
                     "screening was skipped so that something is ranked")
    return dataclasses.replace(res, notes=tuple(notes))
