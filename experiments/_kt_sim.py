"""Kernel Tuner simulation-mode runs on recorded caches, for experiments/tuner_vs_kernel_tuner.py."""
from __future__ import annotations

import contextlib
import gzip
import io
import json
import random
import statistics
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import numpy.typing as npt

HUB = "kt-benchmark-hub"
HUB_OLD = f"{HUB}/currently_unused/cachefiles/KernelTuner data"
# (dataset, GPU spec stem, raw Kernel Tuner cache under shared/data/raw): the 10 caches of issue 17.
CACHES: tuple[tuple[str, str, str], ...] = (
    ("kt-convolution", "a100-pcie-40gb", f"{HUB}/cachefiles/convolution_milo/A100.json.gz"),
    ("kt-convolution", "rtx-a4000", f"{HUB}/cachefiles/convolution_milo/A4000.json.gz"),
    ("kt-convolution", "geforce-rtx-2080-ti", f"{HUB_OLD}/convolution/RTX_2080_Ti.json.gz"),
    ("kt-convolution", "geforce-rtx-3060-laptop", f"{HUB_OLD}/convolution/RTX_3060_laptop.json.gz"),
    ("kt-convolution", "titan-rtx", f"{HUB_OLD}/convolution/RTX_Titan.json.gz"),
    ("kt-dedispersion", "a100-pcie-40gb", f"{HUB}/cachefiles/dedispersion_milo/A100.json.gz"),
    ("kt-dedispersion", "rtx-a4000", f"{HUB}/cachefiles/dedispersion_milo/A4000.json.gz"),
    ("kt-gemm-rtx", "geforce-rtx-2080-ti", f"{HUB_OLD}/gemm/RTX_2080_Ti.json.gz"),
    ("kt-gemm-rtx", "geforce-rtx-3060-laptop", f"{HUB_OLD}/gemm/RTX_3060_laptop.json.gz"),
    ("kt-gemm-rtx", "titan-rtx", f"{HUB_OLD}/gemm/RTX_Titan.json.gz"),
)
WILLEMSEN = "kt-paper-willemsen/kernels/outputdata"
# Caches the loop was not developed on (tuner_vs_kernel_tuner.py --held-out): point-in-polygon on three GPUs, and
# hotspot and expdist on one (no other GPU: the loop's default prior is the analytical model there).
HELD_OUT: tuple[tuple[str, str, str], ...] = (
    ("kt-pnpoly", "geforce-rtx-2080-ti", f"{HUB_OLD}/pnpoly/RTX_2080_Ti.json.gz"),
    ("kt-pnpoly", "geforce-rtx-3060-laptop", f"{HUB_OLD}/pnpoly/RTX_3060_laptop.json.gz"),
    ("kt-pnpoly", "titan-rtx", f"{HUB_OLD}/pnpoly/RTX_Titan.json.gz"),
    ("kt-hotspot", "rtx-a4000", f"{WILLEMSEN}/hotspot/hotspot_NVIDIA RTX A4000_size-8192x8192_cache.json.gz"),
    ("kt-expdist", "rtx-a4000", f"{WILLEMSEN}/expdist/expdist_NVIDIA_RTX_A4000_size-32768x32768_cache.json.gz"),
)
# Caches whose Kernel Tuner search space takes minutes to build per run (12 and 11 tunable parameters: one
# random_sample run took 306 s on hotspot and 121 s on expdist, 2 shared cores): the loop and random order only.
KT_TOO_SLOW = frozenset({"kt-hotspot", "kt-expdist"})
# Kernel Tuner 1.5 strategies that run in simulation mode with only the base install, single-objective.
# Left out: brute_force (ignores max_fevals, KernelTuner/kernel_tuner#206), skopt (needs scikit-optimize),
# pyatf_strategies (needs pyATF), nsga2/nsga3 (multi-objective).
CORE_STRATEGIES = ("random_sample", "dual_annealing", "bayes_opt", "genetic_algorithm")
EXTRA_STRATEGIES = ("diff_evo", "pso", "firefly_algorithm", "simulated_annealing", "greedy_ils", "greedy_mls",
                    "mls", "ordered_greedy_mls", "basinhopping", "minimize", "hybrid_vndx",
                    "adaptive_tabu_greywolf")
# Strategies whose choices depend on max_fevals beyond stopping (simulated_annealing scales its cooling
# schedule to it, KernelTuner/kernel_tuner#149): run once per budget. The others are run once at the largest
# budget and read at each smaller one (tuner_vs_kernel_tuner.py checks that this gives the same configurations).
BUDGET_AWARE = frozenset({"simulated_annealing"})
# Strategies that pass max_fevals on as a limit on *all* calls of a scipy optimizer, repeats included
# (dual_annealing: scipy's maxfun). Given the distinct-configuration budget they stop after a fraction of it
# (15 distinct of 50 on the convolution A100 cache), so they get an unlimited inner limit and Kernel Tuner's
# own budget (distinct configurations) stops them. (minimize and basinhopping do not read max_fevals.)
INNER_LIMIT = frozenset({"dual_annealing"})


@dataclass(frozen=True, slots=True)
class KtSpace:
    """A prepared simulation cache: where it is, and what tune_kernel needs to accept it."""

    path: Path
    kernel_name: str
    problem_size: Any
    tune_params: dict[str, list[Any]]
    keys: frozenset[tuple[Any, ...]]
    optimum_ms: float
    n_configs: int
    n_failed: int


def prepare_cache(src: Path, dst: Path) -> KtSpace:
    """Write a copy of a Kernel Tuner cache with ``time`` = median of ``times`` (failed entries kept).

    The recorded ``time`` is the mean of the repeats; hybridperf's datasets use the median, so both searches
    chase the same optimum. The ``times`` arrays are dropped from the copy (smaller file, faster loading).
    """
    with gzip.open(src, "rt") as fh:
        text = fh.read()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:  # an unfinished (open) cache: Kernel Tuner closes it so
        data = json.loads(text.rstrip().removesuffix(",") + "}}")
    if not isinstance(data.get("problem_size"), (int, float, list)):  # expdist recorded 'callable'
        data["problem_size"] = [int(v) for v in src.name.split("size-")[1].split("_")[0].split("x")]
    names = list(data["tune_params_keys"])
    if names != list(data["tune_params"]):
        raise ValueError(f"{src}: tune_params_keys and tune_params disagree in order; cannot key the cache")
    best, failed = float("inf"), 0
    for key, entry in data["cache"].items():
        t, times = entry.get("time"), entry.pop("times", None)
        if isinstance(t, (int, float)) and t < 1e20:
            if not times:
                raise ValueError(f"{src}: entry {key} has no 'times' to take the median of")
            entry["time"] = float(statistics.median(times))
            best = min(best, entry["time"])
        else:
            failed += 1
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(json.dumps(data))
    keys = frozenset(tuple(e[n] for n in names) for e in data["cache"].values())
    return KtSpace(path=dst, kernel_name=data["kernel_name"], problem_size=data["problem_size"],
                   tune_params=data["tune_params"], keys=keys, optimum_ms=best, n_configs=len(keys), n_failed=failed)


@contextlib.contextmanager
def _seeded_lhs(seed: int) -> Iterator[None]:
    """Kernel Tuner 1.5 builds scipy's LatinHypercube without a seed (bayes_opt's initial sample,
    Searchspace.get_LHS_sample for diff_evo), so it draws fresh OS entropy; seed it for reproducible runs."""
    from scipy.stats import qmc

    original, rng = qmc.LatinHypercube, np.random.default_rng(seed)

    def seeded(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("rng", rng)
        return original(*args, **kwargs)

    targets = ["scipy.stats.qmc.LatinHypercube"]
    with contextlib.suppress(ImportError):
        import kernel_tuner.strategies.bayes_opt  # noqa: F401 - imported to patch its module-level name
        targets.append("kernel_tuner.strategies.bayes_opt.LatinHypercube")
    with contextlib.ExitStack() as stack:
        for target in targets:
            stack.enter_context(mock.patch(target, seeded))
        yield


class _InnerUnlimited:
    """A Kernel Tuner strategy object (any object with ``tune``, interface.py) that runs a named strategy with
    its own evaluation limit lifted; the budget tune_kernel already built from ``max_fevals`` still stops it."""

    def __init__(self, name: str) -> None:
        from kernel_tuner.interface import Options, strategy_map

        self.module, self.options = strategy_map[name], Options

    def tune(self, searchspace: Any, runner: Any, tuning_options: Any) -> Any:
        opts = dict(tuning_options.strategy_options)
        opts["max_fevals"] = 10**9
        tuning_options.strategy_options = self.options(opts)
        return self.module.tune(searchspace, runner, tuning_options)


def run_strategy(space: KtSpace, strategy: str, budget: int, seed: int) -> npt.NDArray[np.float64]:
    """Times (ms; NaN = failed configuration) of the distinct configurations Kernel Tuner evaluates, in order.

    Simulation mode, ``max_fevals=budget`` (Kernel Tuner counts distinct configurations: a repeat is served
    from the cache and not counted, a failed one is counted). The search space is exactly the cache's keys,
    failed ones included (Kernel Tuner's ``tune_cache`` would drop them: infer_restrictions_from_cache).
    Kernel Tuner 1.5 ignores its ``seed`` argument for these strategies; they draw from ``random`` and
    ``numpy.random``, which are seeded here.
    """
    from kernel_tuner import tune_kernel

    names = list(space.tune_params)
    keys = space.keys

    def in_cache(p: dict[str, Any]) -> bool:
        return tuple(p[n] for n in names) in keys

    random.seed(seed)
    np.random.seed(seed)
    strat: Any = _InnerUnlimited(strategy) if strategy in INNER_LIMIT else strategy
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), _seeded_lhs(seed):
        warnings.simplefilter("ignore")
        results, _ = tune_kernel(space.kernel_name, "/* simulation mode: never compiled */", space.problem_size, [],
                                 space.tune_params, restrictions=in_cache, cache=str(space.path),
                                 simulation_mode=True, strategy=strat, strategy_options={"max_fevals": budget},
                                 quiet=True, verbose=False)
    seen: set[tuple[Any, ...]] = set()
    times: list[float] = []
    for r in results:
        key = tuple(r[n] for n in names)
        if key in seen:
            continue
        seen.add(key)
        t = r.get("time")
        times.append(float(t) if "__error__" not in r and isinstance(t, (int, float)) else float("nan"))
    return np.asarray(times, dtype=np.float64)  # not cut at the budget: the log shows any overshoot
