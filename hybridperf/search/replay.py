"""Replay of the measure-next loop on a recorded exhaustive sweep: trajectories, seeds and strategies side by side."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from hybridperf.errors import HybridperfError
from hybridperf.learn.model import TrainedModel
from hybridperf.progress import task
from hybridperf.search.ensemble import FeaturePool
from hybridperf.search.loop import LoopOptions, next_batch
from hybridperf.search.prior import Prior, make_prior

__all__ = ["STRATEGIES", "Comparison", "Trajectory", "compare_strategies", "replay", "replay_pool", "replay_prior"]

STRATEGIES = ("model", "random")


@dataclass(frozen=True, slots=True)
class Trajectory:
    """A replayed tuning run, one row per measurement in ``steps``.

    ``steps``: ``n_measured``, ``index`` (row of the group), the config columns, ``time_ms`` (NaN:
    the configuration failed), ``best_ms`` so far, ``fraction_of_optimum`` (optimum / best so far;
    1.0 = optimum found), ``batch`` (0: the start), ``p_better`` and ``expected_gain`` (the stop
    rule's estimates when the batch was chosen), ``stop_rule`` (the rule said stop before this
    batch) and ``why``.
    ``stopped_at``: measurements done when the rule first said stop (None: never).
    """

    steps: pd.DataFrame
    optimum_ms: float
    strategy: str
    seed: int
    space_size: int
    stopped_at: int | None
    prior: str = ""

    def measurements_to(self, fraction: float = 0.99) -> int | None:
        """Measurements used when ``optimum / best found`` first reached ``fraction`` (None: never)."""
        hit = self.steps.loc[self.steps["fraction_of_optimum"] >= fraction, "n_measured"]
        return int(hit.iloc[0]) if len(hit) else None

    def summary(self) -> dict[str, Any]:
        """One line: measurements, fraction of the optimum at the end, measurements to 99%, where the rule stopped."""
        last = self.steps.iloc[-1] if len(self.steps) else None
        at = self.steps.loc[self.steps["n_measured"] == self.stopped_at] if self.stopped_at else None
        return {"strategy": self.strategy, "seed": self.seed, "measured": int(last["n_measured"]) if last is not None
                else 0, "best_fraction_of_optimum": float(last["fraction_of_optimum"]) if last is not None else 0.0,
                "measurements_to_99pct": self.measurements_to(0.99), "stopped_at": self.stopped_at,
                "fraction_at_stop": float(at["fraction_of_optimum"].iloc[0]) if at is not None and len(at) else None,
                "failed": int(self.steps["time_ms"].isna().sum())}


@dataclass(frozen=True, slots=True)
class Comparison:
    """Replays of several strategies and seeds on one group, with the prior the model loop used."""

    runs: list[Trajectory] = field(default_factory=list)
    prior: str = ""

    def summary(self) -> pd.DataFrame:
        """One row per run (:meth:`Trajectory.summary`)."""
        return pd.DataFrame([r.summary() for r in self.runs])

    def steps(self) -> pd.DataFrame:
        """Every run's steps, with ``strategy`` and ``seed`` columns first."""
        parts = [r.steps.assign(strategy=r.strategy, seed=r.seed) for r in self.runs]
        df = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
        return df[["strategy", "seed", *[c for c in df.columns if c not in ("strategy", "seed")]]] if parts else df


def _group(sweep: pd.DataFrame, kernel: str, gpu: str, sizes: Mapping[str, float] | None) -> pd.DataFrame:
    rows = sweep.loc[(sweep["kernel"].astype(str) == str(kernel)) & (sweep["gpu"].astype(str) == str(gpu))]
    for name, v in (sizes or {}).items():
        col = f"size.{name}"
        if col not in rows.columns:
            raise HybridperfError(f"sweep has no column {col!r}; sizes: "
                                  f"{', '.join(c[5:] for c in rows.columns if c.startswith('size.')) or 'none'}")
        rows = rows.loc[np.isclose(pd.to_numeric(rows[col], errors="coerce"), float(v))]
    size_cols = [c for c in rows.columns if c.startswith("size.")]
    if rows.empty:
        raise HybridperfError(f"no rows for kernel {kernel!r} on {gpu!r} with sizes {dict(sizes or {})}; "
                              "check the names (kernel, gpu columns) and --set values")
    if size_cols and len(rows[size_cols].drop_duplicates()) > 1:
        raise HybridperfError(f"the sweep holds {len(rows[size_cols].drop_duplicates())} problem sizes for {kernel} on "
                              f"{gpu}; pick one with sizes={{...}}")
    return rows.reset_index(drop=True)


def replay_pool(sweep: pd.DataFrame, kernel: str, gpu: str, sizes: Mapping[str, float] | None = None) -> FeaturePool:
    """The rows of one (kernel, gpu, sizes) group of a sweep and their features, for repeated replays."""
    return FeaturePool.of(_group(sweep, kernel, gpu, sizes))


def replay_prior(sweep: pd.DataFrame, pool: FeaturePool, kind: str = "auto", *,
                 prior_rows: pd.DataFrame | None = None, model: TrainedModel | None = None, seed: int = 0) -> Prior:
    """The prior for replaying ``pool`` (see :func:`hybridperf.search.prior.make_prior`).

    Without ``prior_rows``, a transfer prior learns from the sweep's rows of the same kernel on
    the *other* GPUs (what a user tuning a new GPU has: old sweeps); the replayed GPU's own rows
    are never part of a prior.
    """
    gpu = set(pool.rows["gpu"].astype(str))
    if prior_rows is None and kind in ("auto", "transfer"):
        same = sweep["kernel"].astype(str).isin(set(pool.rows["kernel"].astype(str)))
        others = sweep.loc[same & ~sweep["gpu"].astype(str).isin(gpu)]
        prior_rows = others if len(others) else None
    elif prior_rows is not None:
        prior_rows = prior_rows.loc[~prior_rows["gpu"].astype(str).isin(gpu)]
    return make_prior(kind, pool, prior_rows=prior_rows, model=model, seed=seed)


def _times(rows: pd.DataFrame) -> np.ndarray:
    ok = (rows["status"].astype(str) == "ok").to_numpy() if "status" in rows.columns else np.ones(len(rows), bool)
    t = pd.to_numeric(rows["time_ms"], errors="coerce").to_numpy(dtype=np.float64)
    return np.where(ok & (t > 0), t, np.nan)


def replay(sweep: pd.DataFrame, kernel: str, gpu: str, sizes: Mapping[str, float] | None = None, *,
           budget: int = 50, seed: int = 0, strategy: str = "model", prior: str | Prior = "auto",
           options: LoopOptions | None = None, pool: FeaturePool | None = None, stop: bool = False) -> Trajectory:
    """Run the measure-next loop on a recorded exhaustive sweep (measurements come from the sweep).

    ``strategy="model"``: :func:`hybridperf.search.loop.next_batch` until ``budget``
    configurations are measured (or, with ``stop``, until the stop rule says stop); ``"random"``:
    configurations in a random order (the baseline). A failed configuration costs a measurement
    and never becomes the best. ``prior``: a :class:`Prior` or a kind for :func:`replay_prior`
    (computed here; pass a Prior and ``pool`` from :func:`replay_pool` to replay many seeds
    without recomputing features and priors).
    """
    if strategy not in STRATEGIES:
        raise HybridperfError(f"strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    if budget < 1:
        raise HybridperfError(f"budget must be >= 1, got {budget}")
    pool = pool if pool is not None else replay_pool(sweep, kernel, gpu, sizes)
    t = _times(pool.rows)
    n = len(pool.rows)
    budget = min(budget, n)
    note = ""
    cols: dict[str, list[Any]] = {"batch": [], "p_better": [], "expected_gain": [], "stop_rule": [], "why": []}
    stopped_at = None
    if strategy == "random":
        order = list(np.random.default_rng(seed).permutation(n)[:budget])
        cols = {"batch": [0] * budget, "p_better": [np.nan] * budget, "expected_gain": [np.nan] * budget,
                "stop_rule": [False] * budget, "why": ["random"] * budget}
    else:
        pr = prior if isinstance(prior, Prior) else replay_prior(sweep, pool, prior, seed=seed)
        note = f"{pr.name}: {pr.note}"
        order = []
        k = 0
        while len(order) < budget:
            step = next_batch(pool, pr, order, np.log(t[order]) if order else [], budget=budget, options=options,
                              seed=seed * 1000 + k)
            if step.positions.size == 0:
                break
            k += 1
            said = bool(step.stop is not None and step.stop.stop)
            if said and stopped_at is None:
                stopped_at = len(order)
                if stop:
                    break
            order += [int(i) for i in step.positions]
            m = step.positions.size
            cols["batch"] += [k - 1] * m
            cols["p_better"] += [step.stop.p_better if step.stop else np.nan] * m
            cols["expected_gain"] += [step.stop.expected_gain if step.stop else np.nan] * m
            cols["stop_rule"] += [said] * m
            cols["why"] += step.why
    return _trajectory(pool, t, order, cols, strategy, seed, stopped_at, note)


def _trajectory(pool: FeaturePool, t: np.ndarray, order: list[int], cols: dict[str, list[Any]], strategy: str,
                seed: int, stopped_at: int | None, note: str) -> Trajectory:
    m = np.asarray(order, dtype=np.int64)
    optimum = float(np.nanmin(t)) if np.isfinite(t).any() else float("nan")
    best = np.fmin.accumulate(t[m]) if m.size else np.zeros(0)
    steps = pd.DataFrame({"n_measured": np.arange(1, m.size + 1), "index": m})
    config = [c for c in pool.rows.columns if c.startswith("config.")]
    steps[config] = pool.rows[config].to_numpy()[m] if m.size else np.zeros((0, len(config)))
    steps["time_ms"], steps["best_ms"] = t[m], best
    steps["fraction_of_optimum"] = np.nan_to_num(optimum / best, nan=0.0)
    for k, v in cols.items():
        steps[k] = v[: m.size]
    return Trajectory(steps=steps, optimum_ms=optimum, strategy=strategy, seed=seed, space_size=len(pool.rows),
                      stopped_at=stopped_at, prior=note)


def compare_strategies(sweep: pd.DataFrame, kernel: str, gpu: str, sizes: Mapping[str, float] | None = None, *,
                       seeds: int = 3, seed_offset: int = 0, strategies: Sequence[str] = STRATEGIES,
                       prior: str = "auto", prior_rows: pd.DataFrame | None = None,
                       model: TrainedModel | None = None, n_jobs: int = 1, **replay_options: Any) -> Comparison:
    """Replay each strategy with seeds ``seed_offset .. seed_offset + seeds - 1`` on one group (features and
    prior computed once; ``n_jobs`` threads run the replays: xgboost and numpy release the GIL)."""
    pool = replay_pool(sweep, kernel, gpu, sizes)
    pr = replay_prior(sweep, pool, prior, prior_rows=prior_rows, model=model, seed=seed_offset) \
        if "model" in strategies else None
    jobs = [(st, s) for st in strategies for s in range(seed_offset, seed_offset + seeds)]

    with task(f"replay {kernel} on {gpu}: runs", len(jobs)) as t:
        def run(job: tuple[str, int]) -> Trajectory:
            out = replay(sweep, kernel, gpu, sizes, seed=job[1], strategy=job[0], pool=pool,
                         prior=pr if pr else "none", **replay_options)
            t.advance()
            return out
        if n_jobs > 1:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=n_jobs) as ex:
                runs = list(ex.map(run, jobs))
        else:
            runs = [run(j) for j in jobs]
    return Comparison(runs=runs, prior=f"{pr.name}: {pr.note}" if pr else "")
