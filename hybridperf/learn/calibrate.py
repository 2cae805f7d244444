"""Fit machine parameters no datasheet gives (latencies, departure delays, Gamma) to recorded runs."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd

from hybridperf.analytical.run import analyze
from hybridperf.errors import HybridperfError
from hybridperf.files import atomic_write_text
from hybridperf.hardware import MODEL_KEYS, OPTIONAL_MODEL_KEYS, OPTIONAL_SPEC_KEYS, SPEC_KEYS, GPUSpec, load_gpu
from hybridperf.progress import task
from hybridperf.sweep import param_columns, training_rows

_MAX_ITER = 40  # Powell iterations (each a line search per parameter)

__all__ = ["DEFAULT_BOUNDS", "Calibration", "calibrate_gpu", "write_gpu_spec"]

# Parameters each model reads, with (low, high) bounds in cycles (or plain numbers).
DEFAULT_BOUNDS: dict[str, dict[str, tuple[float, float]]] = {
    "mwp-cwp": {"dram_latency_cycles": (100, 2000), "departure_delay_coal_cycles": (0.5, 100),
                "departure_delay_uncoal_cycles": (0.5, 200), "issue_cycles": (0.1, 16)},
    "gpuperf": {"dram_latency_cycles": (100, 2000), "departure_delay_coal_cycles": (0.5, 100),
                "avg_inst_latency_cycles": (1, 40), "sync_gamma": (1, 500), "l1_hit_latency_cycles": (1, 200)},
    # The power cap (pJ per thread instruction, ms), the launch overhead (us) and the cycles an SM takes to start
    # a block, of the hierarchical roofline.
    "hierarchical": {"energy_per_inst_pj": (1, 1000), "power_burst_ms": (0.01, 100), "launch_overhead_us": (0.1, 1000),
                     "block_launch_cycles": (1, 10000)},
}
# Where a spec has no block-launch floor, its fit starts from the one measured on GH100 (H100 SXM, H200).
BLOCK_LAUNCH_START_CYCLES = 157.0
_TIME_COLUMN = {"mwp-cwp": "time_ms", "gpuperf": "time_ms", "hierarchical": "time_ms"}


@dataclass(frozen=True, slots=True)
class Calibration:
    """Fitted parameters, the calibrated spec, and the log-space error before and after."""

    gpu: GPUSpec
    model: str
    fitted: Mapping[str, float]
    initial: Mapping[str, float]
    log_rmse_before: float
    log_rmse_after: float
    n_runs: int
    # Fitted parameters that ended within 1 % of a bound of DEFAULT_BOUNDS: the runs did not pin them down inside
    # the plausible range (or the model misses something the parameter stands in for).
    at_bounds: tuple[str, ...] = ()


def _log_errors(rows: pd.DataFrame, gpu: GPUSpec, model: str) -> np.ndarray:
    out = []
    for kernel, g in rows.groupby("kernel", sort=False):
        # Another kernel's parameter (bench-mb's ITERS beside vecadd's rows) is an empty column on these rows; a text
        # column (NeuSight's config.op) is data no descriptor reads.
        values = {c.split(".", 1)[1]: pd.to_numeric(g[c], errors="coerce") for c in param_columns(g)}
        params = pd.DataFrame({k: v for k, v in values.items() if v.notna().any()})
        res = analyze(str(kernel), gpu, params.reset_index(drop=True), models=[model])
        pred = res.terms[model][_TIME_COLUMN[model]].to_numpy()
        out.append(np.log(pred) - np.log(g["time_ms"].to_numpy(dtype=float)))
    return np.concatenate(out)


def calibrate_gpu(sweep: pd.DataFrame, gpu: GPUSpec | str, *, model: str = "mwp-cwp",
                  parameters: Sequence[str] | None = None, max_rows: int = 3000, seed: int = 0) -> Calibration:
    """Fit the GPU's machine parameters of ``model`` to the ok runs of that GPU (MODELS.md section 6).

    Minimises the RMSE of log(predicted / measured) over the parameters, within
    :data:`DEFAULT_BOUNDS`, with scipy's bounded Powell search in log-parameter space (the
    models are piecewise, so a derivative-free method). At most ``max_rows`` runs (a seeded
    random subset) are used.
    """
    gpu = load_gpu(gpu)
    if model not in DEFAULT_BOUNDS:
        raise HybridperfError(f"calibration supports models {', '.join(DEFAULT_BOUNDS)}, got {model!r}")
    bounds = DEFAULT_BOUNDS[model]
    names = list(parameters or bounds)
    unknown = [n for n in names if n not in bounds]
    if unknown:
        raise HybridperfError(f"cannot calibrate {unknown[0]!r} for {model}; choose from {', '.join(bounds)}")
    power = [n for n in names if n in ("energy_per_inst_pj", "power_burst_ms")]
    if power and (gpu.tdp_w is None or gpu.energy_per_inst_pj is None):
        raise HybridperfError(f"{gpu.name} has no power cap to calibrate ({power[0]}): its spec needs tdp_w and "
                              "process_nm (or energy_per_inst_pj); add them, or calibrate launch_overhead_us alone")
    rows = training_rows(sweep)
    stem = Path(gpu.path).stem
    rows = rows[(rows["gpu"] == stem) | (rows["gpu"] == gpu.name)]
    if len(rows) < 2:
        raise HybridperfError(f"need at least 2 ok runs on {gpu.name} to calibrate, found {len(rows)}")
    if len(rows) > max_rows:
        rows = rows.sample(max_rows, random_state=seed)
    start = {n: getattr(gpu, n) for n in names}
    if start.get("block_launch_cycles", 0.0) is None:
        start["block_launch_cycles"] = BLOCK_LAUNCH_START_CYCLES
    x0 = np.log([start[n] for n in names])
    lb = np.log([bounds[n][0] for n in names])
    ub = np.log([bounds[n][1] for n in names])

    def spec(x: np.ndarray) -> GPUSpec:
        return gpu.replace(**{n: float(v) for n, v in zip(names, np.exp(x))})

    def loss(x: np.ndarray) -> float:
        with np.errstate(all="ignore"):
            e = _log_errors(rows, spec(x), model)
        return float(np.sqrt(np.mean(e**2))) if np.all(np.isfinite(e)) else 1e6

    from scipy.optimize import minimize

    before = loss(np.clip(x0, lb, ub))
    with task(f"calibrate {model}: Powell iterations (at most {_MAX_ITER})", _MAX_ITER) as t:
        res = minimize(loss, np.clip(x0, lb, ub), method="Powell", bounds=list(zip(lb, ub)),
                       options={"maxiter": _MAX_ITER, "xtol": 1e-3, "ftol": 1e-4}, callback=lambda xk: t.advance())
    best = res.x if res.fun <= before else np.clip(x0, lb, ub)
    fitted = {n: float(v) for n, v in zip(names, np.exp(best))}
    note = (f"calibrated: {model} fitted to {len(rows)} runs of {', '.join(sorted(rows['kernel'].unique()))} "
            f"(log RMSE {before:.3f} -> {min(before, res.fun):.3f}), {date.today().isoformat()}")
    sources = dict(gpu.sources)
    sources.update({f"model.{n}": note for n in names})
    cal = dataclasses.replace(spec(best), sources=sources)
    at = tuple(n for n, v, lo, hi in zip(names, best, lb, ub) if min(v - lo, hi - v) < np.log(1.01))
    return Calibration(gpu=cal, model=model, fitted=fitted, initial={n: float(v) for n, v in start.items()},
                       log_rmse_before=before, log_rmse_after=min(before, float(res.fun)), n_runs=len(rows),
                       at_bounds=at)


def _toml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_gpu_spec(gpu: GPUSpec, path: str | Path, *, name: str | None = None) -> Path:
    """Write a spec file (the format of hybridperf/gpus) atomically, e.g. after calibration."""
    lines = ["format_version = 1", f"name = {_toml_str(name or gpu.name)}",
             f"compute_capability = {_toml_str(gpu.compute_capability)}", "", "[spec]"]
    for section, keys in (("spec", SPEC_KEYS + OPTIONAL_SPEC_KEYS), ("model", MODEL_KEYS + OPTIONAL_MODEL_KEYS)):
        if section == "model":
            lines += ["", "[model]"]
        for k in keys:
            if getattr(gpu, k) is None:
                continue
            source = _toml_str(gpu.sources.get(f"{section}.{k}", "unknown"))
            lines.append(f"{k} = {{ value = {float(getattr(gpu, k))!r}, source = {source} }}")
    return atomic_write_text(path, "\n".join(lines) + "\n")
