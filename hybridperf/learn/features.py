"""Design matrix for the learned models: analytical terms, parameters and GPU fields per sweep row."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from hybridperf.analytical.run import analyze
from hybridperf.errors import HybridperfError
from hybridperf.hardware import load_gpu
from hybridperf.kernel import load_kernel

__all__ = ["BASELINES", "FEATURE_VERSION", "baseline_column", "param_columns", "size_metric", "sweep_features"]

FEATURE_VERSION = 1
# Analytical baselines a hybrid model can multiply its learned residual onto (log ms columns).
BASELINES = {
    "mwp-cwp": "log_mwp_cwp_ms",
    "gpuperf": "log_gpuperf_ms",
    "scaled-counts": "log_scaled_counts_ms",
    "roofline": "log_roofline_ms",
}
_LIMITERS = {"warps": 0.0, "registers": 1.0, "shared memory": 2.0, "blocks": 3.0}
_MODELS = ("occupancy", "mwp-cwp", "gpuperf", "scaled-counts", "roofline", "ryoo")


def baseline_column(name: str) -> str:
    """Feature column holding the log-ms time of an analytical baseline."""
    try:
        return BASELINES[name]
    except KeyError:
        raise HybridperfError(f"unknown baseline {name!r}; choose from {', '.join(BASELINES)}") from None


def param_columns(df: pd.DataFrame) -> list[str]:
    """The sweep's size.* and config.* columns, in table order."""
    return [c for c in df.columns if c.startswith(("size.", "config."))]


def size_metric(sweep: pd.DataFrame) -> np.ndarray:
    """Per-row problem size: the largest size.* parameter (max(M, N, K) for GEMM, N otherwise)."""
    cols = [c for c in sweep.columns if c.startswith("size.")]
    if not cols:
        raise HybridperfError("sweep has no size.* columns; size extrapolation needs size parameters")
    return sweep[cols].apply(pd.to_numeric, errors="coerce").max(axis=1).to_numpy(dtype=np.float64)


def _log(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x > 0, np.log(np.where(x > 0, x, 1.0)), np.nan)


def _group_features(kernel: str, gpu_name: str, rows: pd.DataFrame) -> pd.DataFrame:
    desc = load_kernel(kernel)
    gpu = load_gpu(gpu_name)
    known = desc.parameters
    params = pd.DataFrame(index=rows.index)
    # Parameters come from size.*/config.* columns and, for counter-described kernels, counter.*.
    for col in [*param_columns(rows), *(c for c in rows.columns if c.startswith("counter."))]:
        name = col.split(".", 1)[1]
        if name in known and name not in params:
            v = pd.to_numeric(rows[col], errors="coerce").to_numpy(dtype=np.float64)
            # Sweeps merged from sources that did not vary a parameter leave it empty: use the default.
            if np.isnan(v).any() and known[name].default is not None:
                v = np.where(np.isnan(v), known[name].default, v)
            params[name] = v
    res = analyze(desc, gpu, params.reset_index(drop=True), models=_MODELS)
    t = res.terms
    mc, gp, sc, rf = t["mwp-cwp"], t["gpuperf"], t["scaled-counts"], t["roofline"]
    oc, ry = t["occupancy"], t["ryoo"]
    prof = res.profile
    f: dict[str, np.ndarray] = {
        "log_mwp_cwp_ms": _log(mc.time_ms.to_numpy()),
        "log_gpuperf_ms": _log(gp.time_ms.to_numpy()),
        "log_scaled_counts_ms": _log(sc.raw_time_ms.to_numpy()),
        "log_roofline_ms": _log(rf.time_ms.to_numpy()),
        "log_roofline_bound_ms": _log(rf.bound_ms.to_numpy()),
        "log_roofline_compute_ms": _log(rf.compute_ms.to_numpy()),
        "log_roofline_memory_ms": _log(rf.memory_ms.to_numpy()),
        "mwp": mc.mwp.to_numpy(), "cwp": mc.cwp.to_numpy(), "regime": mc.regime.to_numpy(np.float64),
        "log_mwp_peak_bw": _log(mc.mwp_peak_bw.to_numpy()),
        "mem_cycles_share": (mc.mem_cycles / (mc.mem_cycles + mc.comp_cycles)).to_numpy(),
        "occupancy": oc.occupancy.to_numpy(),
        "limiter": oc.limiter.map(_LIMITERS).to_numpy(np.float64),
        "active_blocks_per_sm": oc.active_blocks_per_sm.to_numpy(),
        "waves": rf.waves.to_numpy(), "wave_efficiency": rf.wave_efficiency.to_numpy(),
        "log_ryoo_efficiency": _log(ry.efficiency.to_numpy()),
        "ryoo_utilization": ry.utilization.to_numpy(),
        "log_arithmetic_intensity": _log(rf.arithmetic_intensity.to_numpy()),
        "memory_bound": rf.memory_bound.to_numpy(np.float64),
        "itilp": gp.itilp.to_numpy(), "itmlp": gp.itmlp.to_numpy(),
    }
    texec = gp.t_exec.to_numpy()
    for b in ("b_itilp", "b_memlp", "b_fp", "b_serial", "t_overlap", "t_comp", "t_mem"):
        f[f"{b}_share"] = gp[b].to_numpy() / texec
    for name in ("comp_insts", "fp_insts", "sfu_insts", "smem_insts", "sync_insts", "coal_mem_insts",
                 "uncoal_mem_insts", "registers_per_thread", "smem_per_block_bytes", "threads_per_block"):
        f[f"log1p_{name}"] = np.log1p(getattr(prof, name))
    f["log_total_threads"] = _log(prof.total_threads)
    f["log_blocks"] = _log(prof.blocks)
    f["log_dram_bytes"] = _log(prof.dram_bytes)
    f["log_flops_total"] = _log(prof.flops * prof.total_threads)
    for name in ("sm_count", "core_clock_mhz", "dram_bandwidth_gbs", "peak_fp32_gflops", "l2_cache_kib"):
        f[f"gpu_{name}"] = np.full(len(rows), float(getattr(gpu, name)))
    f["gpu_cc"] = np.full(len(rows), float(gpu.compute_capability))
    f["gpu_smem_per_sm_kib"] = np.full(len(rows), gpu.limits.smem_per_sm_bytes / 1024)
    out = pd.DataFrame(f, index=rows.index)
    out["register_spill"] = res.register_spill.astype(np.float64)
    out["feasible"] = res.feasible.astype(np.float64)
    return out


def sweep_features(df: pd.DataFrame, *, extra_params: Sequence[str] | None = None) -> pd.DataFrame:
    """Features for every row of a sweep table (columns ``kernel``, ``gpu``, ``size.*``, ``config.*``).

    Rows are grouped by (kernel, gpu); each group's descriptor and spec run every analytical model
    once, vectorised. Parameters become features as given and, for size parameters, as log2.
    Infeasible configurations get NaN analytical features and ``feasible = 0``.

    Returns
    -------
    DataFrame aligned with ``df.index``: the analytical terms (log times in ``log_*_ms``), counts,
    occupancy and limiter, Ryoo metrics, GPUPerf benefit shares, GPU fields and the parameters.
    """
    missing = [c for c in ("kernel", "gpu") if c not in df.columns]
    if missing:
        raise HybridperfError(f"sweep has no {missing[0]!r} column; features need kernel and gpu per row")
    index = df.index
    df = df.reset_index(drop=True)  # positional alignment: the caller's index may repeat labels
    parts = [_group_features(str(k), str(g), rows) for (k, g), rows in df.groupby(["kernel", "gpu"], sort=False)]
    feats = pd.concat(parts).sort_index() if parts else pd.DataFrame(index=df.index)
    cols = list(param_columns(df)) + list(extra_params or [])
    for col in cols:
        v = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=np.float64)
        feats[col] = v
        if col.startswith("size."):
            feats[f"log2_{col}"] = np.log2(np.where(v > 0, v, np.nan))
    feats.index = index
    return feats
