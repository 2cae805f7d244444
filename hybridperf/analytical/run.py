"""Run every analytical model on a kernel descriptor for a grid of parameter values."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from hybridperf.analytical.gpuperf import gpuperf
from hybridperf.analytical.hierarchy import hierarchy, limiter_names
from hybridperf.analytical.launch import launch_state
from hybridperf.analytical.mwp_cwp import REGIMES, mwp_cwp
from hybridperf.analytical.occupancy import occupancy
from hybridperf.analytical.roofline import roofline
from hybridperf.analytical.ryoo import ryoo_metrics
from hybridperf.analytical.scaled_counts import scaled_counts
from hybridperf.errors import HybridperfError
from hybridperf.hardware import GPUSpec, load_gpu
from hybridperf.kernel import KernelDescriptor, load_kernel
from hybridperf.profile import KernelProfile

__all__ = ["MODELS", "TIME_MODELS", "Analysis", "analyze", "check_models"]

# The one registry of model names: every analytical model ``analyze`` runs, and (in order of
# preference on ties) those that predict a time, which a hybrid model can use as its baseline.
MODELS = ("occupancy", "mwp-cwp", "gpuperf", "scaled-counts", "roofline", "hierarchical", "ryoo")
TIME_MODELS = ("mwp-cwp", "gpuperf", "scaled-counts", "roofline", "hierarchical")


def check_models(names: Sequence[str], allowed: Sequence[str] = MODELS) -> list[str]:
    """``names`` as a list, or a HybridperfError naming the first unknown one and the choices."""
    unknown = [m for m in names if m not in allowed]
    if unknown:
        raise HybridperfError(f"unknown model {unknown[0]!r}; choose from {', '.join(allowed)}")
    return list(names)


@dataclass(frozen=True, slots=True)
class Analysis:
    """Per-row parameters, feasibility, and each requested model's named terms."""

    kernel: KernelDescriptor
    gpu: GPUSpec
    params: pd.DataFrame
    feasible: np.ndarray
    reason: np.ndarray
    terms: Mapping[str, pd.DataFrame]
    profile: KernelProfile
    register_spill: np.ndarray

    def summary(self) -> pd.DataFrame:
        """One row per launch: parameters, each model's time (ms) and the interpretable terms."""
        out = self.params.copy()
        t = self.terms
        if "occupancy" in t:
            out["occupancy"] = t["occupancy"]["occupancy"].to_numpy()
            out["limiter"] = t["occupancy"]["limiter"].to_numpy()
        if "mwp-cwp" in t:
            m = t["mwp-cwp"]
            out["mwp_cwp_ms"] = m["time_ms"].to_numpy()
            out["mwp"] = m["mwp"].to_numpy()
            out["cwp"] = m["cwp"].to_numpy()
            out["regime"] = [REGIMES.get(int(r), "") if ok else "" for r, ok in zip(m["regime"], self.feasible)]
        if "gpuperf" in t:
            out["gpuperf_ms"] = t["gpuperf"]["time_ms"].to_numpy()
        if "scaled-counts" in t:
            out["scaled_counts_ms"] = t["scaled-counts"]["time_ms"].to_numpy()  # weight 1 unless calibrated
        if "roofline" in t:
            out["roofline_ms"] = t["roofline"]["time_ms"].to_numpy()
            bound = np.where(t["roofline"]["memory_bound"].to_numpy(), "memory", "compute")
            out["roofline_bound"] = np.where(self.feasible, bound, "")  # no label for what cannot launch
        if "hierarchical" in t:
            h = t["hierarchical"]
            out["hierarchical_ms"] = h["time_ms"].to_numpy()
            lim = h["limiter"].to_numpy()
            out["hierarchical_limiter"] = limiter_names(lim, self.feasible)
        if self.register_spill.any():
            out["register_spill"] = self.register_spill
        out["status"] = np.where(self.feasible, "ok", "infeasible: " + self.reason.astype(str))
        return out


def _numbers(name: str, values: Any) -> np.ndarray:
    """A parameter's values as float64, or a HybridperfError naming the parameter."""
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        shown = values
        if isinstance(values, pd.Series):  # the first cell that is no number
            text = values.notna() & pd.to_numeric(values, errors="coerce").isna()
            shown = values[text].iloc[0] if text.any() else values.iloc[0]
        raise HybridperfError(f"parameter {name}: {shown!r} is not a number (give numbers, e.g. {name}=4096)") from None


def _parameter_frame(params: Any) -> pd.DataFrame:
    """The rows ``analyze`` runs: a DataFrame as given (its index is the result's), or a mapping's scalars and
    lists broadcast against each other."""
    if isinstance(params, pd.DataFrame):
        return params
    if not isinstance(params, Mapping):
        raise HybridperfError(f"params must be a mapping of parameter name to a value or a list of values, or a "
                              f"pandas DataFrame of rows, got {type(params).__name__}")
    arrays = {k: np.atleast_1d(_numbers(k, v)) for k, v in params.items()}
    deep = [k for k, a in arrays.items() if a.ndim > 1]
    if deep:
        raise HybridperfError(f"parameter {deep[0]}: give a value or a flat list of values (got {arrays[deep[0]].ndim}"
                              " dimensions)")
    try:
        shaped = np.broadcast_arrays(*arrays.values()) if arrays else []
    except ValueError:
        lengths = ", ".join(f"{k}: {len(a)}" for k, a in arrays.items())
        raise HybridperfError(f"parameter lists differ in length ({lengths}); give lists of one length (one value per "
                              "row) or single values") from None
    return pd.DataFrame(dict(zip(arrays, shaped)))


def _per_row(df: pd.DataFrame, ok: np.ndarray) -> pd.DataFrame:
    """A model's terms with one row per launch (a model whose terms do not vary gives one row: it is repeated),
    numeric terms NaN where the launch is infeasible; copies only what it changes."""
    n = len(ok)
    if len(df) != n:
        df = df.iloc[np.arange(n) % len(df)].reset_index(drop=True)
    if not ok.all():
        df.loc[~ok, df.select_dtypes(include="number").columns] = np.nan
    return df


def analyze(kernel: KernelDescriptor | str, gpu: GPUSpec | str, params: Mapping[str, Any] | pd.DataFrame,
            models: Sequence[str] = MODELS, adjusting_weight: float = 1.0) -> Analysis:
    """Evaluate the descriptor and run the requested analytical models for every parameter row.

    Parameters
    ----------
    kernel, gpu : descriptor / spec or their names or paths.
    params : mapping of parameter name to a value or a list of values (single values broadcast against the
        lists), or a DataFrame of rows (its index is the summary's). Missing parameters take their descriptor
        defaults; an empty mapping is one launch of the defaults, a DataFrame without rows no launch.
    models : subset of :data:`MODELS`.
    adjusting_weight : seed 004 adjusting weight for ``scaled-counts`` (1 = uncalibrated), > 0.

    A launch the occupancy calculator or a constraint rules out, or whose descriptor launches no block or
    thread, is infeasible: no time, and its reason in ``Analysis.reason``.
    """
    kernel = load_kernel(kernel)
    gpu = load_gpu(gpu)
    models = check_models((models,) if isinstance(models, str) else models)
    frame = _parameter_frame(params)
    resolved = kernel.resolve({c: _numbers(c, frame[c]) for c in frame.columns})
    n = len(frame) if isinstance(params, pd.DataFrame) or len(frame.columns) else 1
    full = pd.DataFrame({k: np.broadcast_to(v, (n,)) for k, v in resolved.items()},
                        index=frame.index if len(frame) == n else None)
    ok, reasons = kernel.constraint_mask(resolved)
    ok = np.broadcast_to(ok, (n,)).copy()
    reason = np.broadcast_to(np.asarray(reasons, dtype=object), (n,)).copy()
    prof = kernel.profile(resolved)
    # Nothing launched: a [launch] formula giving 0 blocks or threads has no time (it read "ok" with NaN times).
    empty = np.broadcast_to((prof.blocks < 1) | (prof.threads_per_block < 1), (n,))
    reason = np.where(ok & empty, "the launch has no blocks or no threads (its [launch] formulas give 0)", reason)
    ok &= ~empty
    # A descriptor's register count is an estimate; nvcc never exceeds the architecture's maximum, it
    # spills the rest to local memory. Clamp (and report the spill) instead of calling the launch infeasible.
    spill = prof.registers_per_thread > gpu.limits.max_registers_per_thread
    spilled = np.maximum(prof.registers_per_thread - gpu.limits.max_registers_per_thread, 0.0)
    if spill.any():
        prof = dataclasses.replace(prof, registers_per_thread=np.minimum(prof.registers_per_thread,
                                                                         gpu.limits.max_registers_per_thread))
    occ = occupancy(gpu.limits, prof.threads_per_block, prof.registers_per_thread, prof.smem_per_block_bytes)
    reason = np.where(ok & ~occ.feasible, occ.reason, reason)
    ok &= occ.feasible
    st = launch_state(prof, gpu, occ=occ)
    terms: dict[str, pd.DataFrame] = {}
    with np.errstate(all="ignore"):
        for m in models:
            if m == "occupancy":
                df = occ.to_frame()
            elif m == "mwp-cwp":
                df = mwp_cwp(prof, gpu, launch=st).to_frame()
            elif m == "gpuperf":
                df = gpuperf(prof, gpu, launch=st).to_frame()
            elif m == "scaled-counts":
                df = scaled_counts(prof, gpu, launch=st, adjusting_weight=adjusting_weight).to_frame()
            elif m == "roofline":
                df = roofline(prof, gpu, launch=st).to_frame()
            elif m == "hierarchical":
                df = hierarchy(prof, gpu, launch=st, spilled_registers=spilled).to_frame()
            else:
                df = ryoo_metrics(prof.ryoo_instr, prof.ryoo_regions, prof.total_threads,
                                  prof.threads_per_block, st.active_blocks_per_sm, gpu.warp_size).to_frame()
            terms[m] = _per_row(df, ok)
    return Analysis(kernel=kernel, gpu=gpu, params=full, feasible=ok, reason=reason.astype(str), terms=terms,
                    profile=prof, register_spill=np.broadcast_to(spill, (n,)).copy())
