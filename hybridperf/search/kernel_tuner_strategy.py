"""The measure-next loop as a Kernel Tuner search strategy (``tune_kernel(..., strategy=HybridperfStrategy(...))``)."""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hybridperf.errors import HybridperfError
from hybridperf.learn.model import TrainedModel
from hybridperf.search.acquisition import StopDecision
from hybridperf.search.ensemble import FeaturePool
from hybridperf.search.loop import LoopOptions, next_batch
from hybridperf.search.prior import make_prior
from hybridperf.sweep import launch_rows

__all__ = ["HybridperfStrategy", "PicksStrategy", "space_rows_from_kernel_tuner"]


def space_rows_from_kernel_tuner(kernel: str, gpu: str, sizes: Mapping[str, float], names: list[str],
                                 configs: list[tuple[Any, ...]]) -> pd.DataFrame:
    """Kernel Tuner configurations (tuples in ``names`` order) as hybridperf sweep rows of one problem."""
    try:
        values = np.asarray(configs, dtype=np.float64).reshape(len(configs), len(names))
    except (TypeError, ValueError):
        raise HybridperfError(f"Kernel Tuner parameters {names} hold non-numeric values; hybridperf's descriptors "
                              "take numbers (encode choices as integers, e.g. 0/1)") from None
    params = pd.DataFrame(values, columns=names)
    for name, v in sizes.items():
        params[name] = float(v)
    return launch_rows(kernel, gpu, params, list(sizes), names)


class HybridperfStrategy:
    """A Kernel Tuner strategy object that runs hybridperf's measure-next loop.

    Kernel Tuner (>= 1.0) accepts any object with ``tune(searchspace, runner, tuning_options)``
    as ``strategy=`` (kernel_tuner/interface.py); this one measures the loop's batches through
    Kernel Tuner's own cost function, so caching, restrictions, observers and the ``max_fevals``
    / ``time_limit`` budget work as for Kernel Tuner's strategies. Kernel Tuner is imported only
    when ``tune`` runs.

    Parameters
    ----------
    kernel, gpu : hybridperf kernel descriptor and GPU spec (shipped names or TOML paths); the
        descriptor's config parameters must be named as in ``tune_params``.
    sizes : the problem size as descriptor size parameters (unset ones take the descriptor's defaults).
    prior : one of :data:`hybridperf.search.prior.PRIORS`; ``prior_rows`` (sweeps of the kernel on
        other GPUs) and ``model`` feed it.
    options : :class:`LoopOptions`; ``budget`` defaults to Kernel Tuner's ``max_fevals``.
    stop : end the search when the loop's stop rule says so (else run to the budget).
    seed : random seed of the loop.

    Attributes
    ----------
    stops_ : the stop decision of every batch chosen after the start (after ``tune``).
    prior_ : the prior used, as text.
    """

    def __init__(self, kernel: str, gpu: str, *, sizes: Mapping[str, float] | None = None, prior: str = "auto",
                 prior_rows: pd.DataFrame | None = None, model: TrainedModel | None = None,
                 options: LoopOptions | None = None, budget: int | None = None, stop: bool = False,
                 seed: int = 0) -> None:
        self.kernel = kernel
        self.gpu = gpu
        self.sizes = sizes
        self.prior = prior
        self.prior_rows = prior_rows
        self.model = model
        self.options = options
        self.budget = budget
        self.stop = stop
        self.seed = seed

    def _budget(self, tuning_options: Any) -> int | None:
        if self.budget is not None:
            return int(self.budget)
        b = getattr(tuning_options.get("budget"), "max_fevals", None) if hasattr(tuning_options, "get") else None
        if b is None and hasattr(tuning_options, "strategy_options"):
            b = tuning_options.strategy_options.get("max_fevals")
        return int(b) if b else None

    def tune(self, searchspace: Any, runner: Any, tuning_options: Any) -> list[dict[str, Any]]:
        """Kernel Tuner's strategy entry point: returns the results of the configurations measured."""
        from kernel_tuner.strategies.common import CostFunc
        from kernel_tuner.util import StopCriterionReached

        names = list(searchspace.tune_params.keys())
        configs = [tuple(c) for c in searchspace.list]
        pool = FeaturePool.of(space_rows_from_kernel_tuner(self.kernel, self.gpu, self.sizes or {}, names, configs))
        pr = make_prior(self.prior, pool, prior_rows=self.prior_rows, model=self.model, seed=self.seed)
        self.prior_ = f"{pr.name}: {pr.note}"
        self.stops_: list[StopDecision] = []
        cost = CostFunc(searchspace, tuning_options, runner)
        objective, higher = tuning_options.objective, tuning_options.objective_higher_is_better
        if isinstance(objective, (list, tuple)):  # Kernel Tuner 1.x: one entry per objective
            if len(objective) != 1:
                raise HybridperfError(f"the loop optimises one objective; Kernel Tuner passed {list(objective)}")
            objective = objective[0]
            higher = higher[0] if isinstance(higher, (list, tuple)) else higher
        budget = self._budget(tuning_options)
        measured: list[int] = []
        logs: list[float] = []
        try:
            while budget is None or len(measured) < budget:
                step = next_batch(pool, pr, measured, logs, budget=budget, options=self.options,
                                  seed=self.seed * 1000 + len(self.stops_) + len(measured))
                if step.stop is not None:
                    self.stops_.append(step.stop)
                    if self.stop and step.stop.stop:
                        break
                if step.positions.size == 0:
                    break
                for pos in step.positions:  # one at a time: the budget may end mid-batch
                    n0 = len(cost.results)
                    cost.eval_all([list(configs[pos])])
                    res = cost.results[n0:]
                    measured.append(int(pos))
                    logs.append(_log_objective(res[-1] if res else {}, objective, bool(higher)))
        except StopCriterionReached:
            pass
        return cost.results


def _log_objective(result: Mapping[str, Any], objective: str, higher_is_better: bool) -> float:
    """log of a result's objective (negated when higher is better); NaN for a failed configuration."""
    v = result.get(objective)
    if "__error__" in result or not isinstance(v, (int, float)) or not np.isfinite(v) or v <= 0:
        return float("nan")
    return float(-np.log(v) if higher_is_better else np.log(v))


class PicksStrategy:
    """A Kernel Tuner strategy object that measures exactly the given configurations, in order (the offline route:
    ``tune_kernel(..., strategy=PicksStrategy.from_file("batch.json"), cache="my-cache.json")`` measures a batch
    ``hybridperf suggest -o batch.json`` wrote and appends it to the cache).

    Parameters
    ----------
    configurations : one ``{parameter: value}`` mapping per configuration.
    """

    def __init__(self, configurations: Sequence[Mapping[str, Any]]) -> None:
        self.configurations = configurations

    @classmethod
    def from_file(cls, path: str | Path) -> PicksStrategy:
        """The configurations of a picks file written by :func:`hybridperf.search.measure_next.write_picks`."""
        try:
            doc = json.loads(Path(path).read_text())
            configs = list(doc["configurations"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise HybridperfError(f"{path}: not a picks file ({type(exc).__name__}: {exc}); write one with "
                                  "'hybridperf suggest ... -o batch.json'") from None
        return cls(configs)

    def tune(self, searchspace: Any, runner: Any, tuning_options: Any) -> list[dict[str, Any]]:
        """Kernel Tuner's strategy entry point: measure the configurations (a budget or time limit may cut it)."""
        from kernel_tuner.strategies.common import CostFunc
        from kernel_tuner.util import StopCriterionReached

        names = list(searchspace.tune_params.keys())
        missing = [n for n in names if any(n not in c for c in self.configurations)]
        if missing:
            raise HybridperfError(f"the picks lack parameter {missing[0]!r} of tune_params; suggest for the same "
                                  "kernel and parameters")
        cost = CostFunc(searchspace, tuning_options, runner)
        try:
            cost.eval_all([[c[n] for n in names] for c in self.configurations])
        except StopCriterionReached:
            pass
        return cost.results
