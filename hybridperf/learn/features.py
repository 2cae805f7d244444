"""Design matrix for the learned models: analytical terms, parameters and GPU fields per sweep row."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Self

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from hybridperf.analytical.hierarchy import LEVEL_COLUMNS, LEVELS
from hybridperf.analytical.run import MODELS, TIME_MODELS, analyze
from hybridperf.errors import HybridperfError
from hybridperf.hardware import GPUSpec, load_gpu
from hybridperf.kernel import KernelDescriptor, parse_kernel_text, resolve_kernels
from hybridperf.learn.baseline import (
    BASELINE_COLUMN,
    GROUP_COLUMNS,
    add_baseline,
    add_group_ids,
    baseline_column,
    choose_baselines,
)
from hybridperf.learn.domain import size_columns, training_domain
from hybridperf.sweep import param_columns, size_metric, without_attrs

__all__ = ["FEATURE_VERSION", "PARAM_FEATURE_PREFIXES", "SweepFeatures", "analytical_features", "descriptor_params",
           "gpu_features"]

FEATURE_VERSION = 8
# Columns of the "params" feature set: the parameters themselves and the GPU's datasheet fields.
PARAM_FEATURE_PREFIXES = ("size.", "config.", "log2_size.", "gpu_")
_LIMITERS = {"warps": 0.0, "registers": 1.0, "shared memory": 2.0, "blocks": 3.0}


def _log(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x > 0, np.log(np.where(x > 0, x, 1.0)), np.nan)


def descriptor_params(desc: KernelDescriptor, rows: pd.DataFrame) -> pd.DataFrame:
    """The descriptor's parameters of sweep rows (bare names): from size.*/config.* columns and, for
    counter-described kernels, counter.*; empty cells take the parameter's default."""
    known = desc.parameters
    params = pd.DataFrame(index=rows.index)
    for col in [*param_columns(rows), *(c for c in rows.columns if c.startswith("counter."))]:
        name = col.split(".", 1)[1]
        if name in known and name not in params:
            v = pd.to_numeric(rows[col], errors="coerce").to_numpy(dtype=np.float64)
            # Sweeps merged from sources that did not vary a parameter leave it empty: use the default.
            if np.isnan(v).any() and known[name].default is not None:
                v = np.where(np.isnan(v), known[name].default, v)
            params[name] = v
    return params


def _group_features(desc: KernelDescriptor, gpu_name: str, rows: pd.DataFrame) -> pd.DataFrame:
    gpu = load_gpu(gpu_name)
    params = descriptor_params(desc, rows)
    res = analyze(desc, gpu, params.reset_index(drop=True), models=MODELS)
    t = res.terms
    mc, gp, sc, rf = t["mwp-cwp"], t["gpuperf"], t["scaled-counts"], t["roofline"]
    oc, ry, hi = t["occupancy"], t["ryoo"], t["hierarchical"]
    prof = res.profile
    times = {"mwp-cwp": mc.time_ms, "gpuperf": gp.time_ms, "scaled-counts": sc.raw_time_ms, "roofline": rf.time_ms,
             "hierarchical": hi.time_ms}
    f: dict[str, np.ndarray] = {baseline_column(m): _log(times[m].to_numpy()) for m in TIME_MODELS}
    f.update({
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
    })
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
    f.update(_hierarchy_features(hi, prof, gpu))
    f.update({k: np.full(len(rows), v) for k, v in gpu_features(gpu).items()})
    out = pd.DataFrame(f, index=rows.index)
    out["register_spill"] = res.register_spill.astype(np.float64)
    out["feasible"] = res.feasible.astype(np.float64)
    return out


def _hierarchy_features(hi: pd.DataFrame, prof: Any, gpu: GPUSpec) -> dict[str, np.ndarray]:
    """The hierarchical roofline's terms as ratios that mean the same on every GPU: each level's share of
    the time, the limiting level, waves and tail, L2 reuse, spills, and the kernel's intensities over the
    GPU's (NeuSight's insight: workload per SM over hardware per SM transfers across GPUs)."""
    time = hi.time_ms.to_numpy()
    # The block-launch floor has no share column of its own (the limiter code and the bound carry it): it is
    # set on few specs, and one more column reshuffles the boosters' column sampling on every dataset.
    f = {f"h_share_{col.removesuffix('_ms')}": hi[col].to_numpy() / time for level, col in zip(LEVELS, LEVEL_COLUMNS)
         if level != "block launch"}
    flops = prof.flops * prof.total_threads
    dram = hi.dram_traffic_bytes.to_numpy()
    f.update({
        "log_hierarchical_bound_ms": _log(hi.bound_ms.to_numpy()),
        "h_bound_share": hi.bound_ms.to_numpy() / time,
        "h_limiter": hi.limiter.to_numpy(np.float64),
        "log1p_h_full_waves": np.log1p(hi.full_waves.to_numpy()),
        "h_tail_fraction": hi.tail_fraction.to_numpy(),
        "h_l2_hit_ratio": hi.l2_hit_ratio.to_numpy(),
        "h_spill_fraction": hi.spill_fraction.to_numpy(),
        "log_h_dram_over_l2": _log(dram / hi.l2_traffic_bytes.to_numpy()),
        "log_intensity_over_balance": _log(flops / dram / (gpu.peak_fp32_gflops / gpu.dram_bandwidth_gbs)),
        "log_reuse_over_l2": _log(prof.reread_distance_bytes / (gpu.l2_cache_kib * 1024.0)),
        "log_wave_bytes_over_l2": _log(dram / np.maximum(hi.full_waves.to_numpy() + (hi.tail_fraction.to_numpy() > 0),
                                                        1.0) / (gpu.l2_cache_kib * 1024.0)),
    })
    return f


def gpu_features(gpu: GPUSpec) -> dict[str, float]:
    """The GPU as hardware ratios rather than an identity: bytes per FLOP at each level, SMs, clock, L2
    and shared memory per SM (the quantities NeuSight normalises its tile features by), the board
    power, which decides whether a part sustains its boost clock, and the share of its peak issue rate
    that power sustains (the hierarchical roofline's power cap; NaN where the spec does not give them)."""
    peak = gpu.peak_fp32_gflops
    smem_gbs = gpu.smem_bytes_per_cycle_per_sm * gpu.sm_count * gpu.core_clock_mhz / 1e3
    issue_per_s = gpu.issue_per_cycle_per_sm * gpu.warp_size * gpu.sm_count * gpu.core_clock_hz
    powered = (np.nan if gpu.tdp_w is None or gpu.energy_per_inst_pj is None
               else gpu.tdp_w / (gpu.energy_per_inst_pj * 1e-12) / issue_per_s)
    return {
        "gpu_dram_bytes_per_flop": gpu.dram_bandwidth_gbs / peak,
        "gpu_l2_bytes_per_flop": gpu.l2_bandwidth_gbs / peak,
        "gpu_smem_bytes_per_flop": smem_gbs / peak,
        "gpu_sm_count": float(gpu.sm_count),
        "gpu_core_clock_mhz": gpu.core_clock_mhz,
        "gpu_l2_kib_per_sm": gpu.l2_cache_kib / gpu.sm_count,
        "gpu_smem_per_sm_kib": gpu.limits.smem_per_sm_bytes / 1024,
        "gpu_registers_per_lane": gpu.limits.registers_per_sm / gpu.fp32_lanes_per_sm,
        "gpu_tdp_w": np.nan if gpu.tdp_w is None else float(gpu.tdp_w),  # power bounds the clock a part sustains
        "gpu_powered_issue_share": powered,  # thread instructions/s the board power sustains over the peak rate
    }


def analytical_features(df: pd.DataFrame, *, extra_params: Sequence[str] | None = None,
                        kernels: Mapping[str, KernelDescriptor] | None = None) -> pd.DataFrame:
    """Features for every row of a sweep table (columns ``kernel``, ``gpu``, ``size.*``, ``config.*``).

    Rows are grouped by (kernel, gpu); each group's descriptor and spec run every analytical model
    once, vectorised. Parameters become features as given and, for size parameters, as log2.
    Infeasible configurations get NaN analytical features and ``feasible = 0``. A row's kernel name
    finds its descriptor in ``kernels`` (e.g. the copies a model keeps) first, else by
    :func:`hybridperf.kernel.load_kernel`.

    Returns
    -------
    DataFrame aligned with ``df.index``: the analytical terms (log times in ``log_*_ms``), counts,
    occupancy and limiter, Ryoo metrics, GPUPerf benefit shares, GPU fields and the parameters.
    """
    missing = [c for c in ("kernel", "gpu") if c not in df.columns]
    if missing:
        raise HybridperfError(f"sweep has no {missing[0]!r} column; features need kernel and gpu per row")
    index = df.index
    df = without_attrs(df).reset_index(drop=True)  # positional alignment: the caller's index may repeat labels
    descs = resolve_kernels(df["kernel"].astype(str).unique(), kernels)
    parts = [_group_features(descs[str(k)], str(g), rows)
             for (k, g), rows in df.groupby(["kernel", "gpu"], sort=False)]
    feats = pd.concat(parts).sort_index() if parts else pd.DataFrame(index=df.index)
    cols = list(param_columns(df)) + list(extra_params or [])
    for col in cols:
        v = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=np.float64)
        feats[col] = v
        if col.startswith("size."):
            feats[f"log2_{col}"] = np.log2(np.where(v > 0, v, np.nan))
    feats.index = index
    return feats


class SweepFeatures(TransformerMixin, BaseEstimator):
    """Sweep rows -> the hybrid model's design matrix, with the analytical baseline chosen at fit.

    ``fit`` runs every analytical model on the training rows (:func:`analytical_features`),
    chooses each kernel's baseline, and records the training domain; ``transform`` adds the
    chosen baseline (``log_baseline_ms``) and the (kernel, GPU) and kernel group ids, and returns
    the columns fixed at fit, as float64.

    Parameters
    ----------
    baseline : {"auto", "none"} or a model of :data:`hybridperf.analytical.run.TIME_MODELS`
        ``auto``: per kernel, the model whose shape fits the measured times best once scaled per
        (kernel, GPU) (:func:`hybridperf.learn.baseline.choose_baselines`; needs ``y``);
        ``none``: no baseline column (boosting only); a model name: that model for every kernel.
    size_aware : bool
        Score baselines by how they extrapolate to the largest training sizes (the product's use)
        rather than by their spread over all sizes.
    columns : {"all", "params"}
        ``all``: analytical terms, parameters and GPU fields; ``params``: parameters and GPU fields
        only (the boosting-on-raw-parameters ablation).
    group_ids : bool
        Add the :data:`hybridperf.learn.baseline.GROUP_COLUMNS` ids (needed by per-group calibration).

    Attributes
    ----------
    baselines_ : dict, kernel -> baseline model chosen for it.
    baseline_ : str or None, the fallback baseline for kernels never trained (None without baseline).
    columns_ : list of str, the output columns.
    domain_ : dict, the training domain (:func:`hybridperf.learn.domain.training_domain`).
    descriptors_ : dict, kernel name -> the descriptor trained with; kept in the model file (its TOML
        text), so a saved model computes its kernels' features without the descriptor files.

    ``fit``, ``transform`` and ``fit_transform`` accept ``features=``, the rows' precomputed
    :func:`analytical_features`, so that callers that refit often (the measure-next loop,
    evaluation) run the analytical models once.
    """

    def __init__(self, *, baseline: str = "auto", size_aware: bool = True, columns: str = "all",
                 group_ids: bool = True) -> None:
        self.baseline = baseline
        self.size_aware = size_aware
        self.columns = columns
        self.group_ids = group_ids

    def fit(self, X: pd.DataFrame, y: Any = None, *, features: pd.DataFrame | None = None,
            kernels: Mapping[str, KernelDescriptor] | None = None) -> Self:
        """Choose the baselines and fix the output columns from the training rows ``X`` and times ``y``
        (``kernels``: descriptors to use for kernel names before looking them up)."""
        rows = _rows(X)
        if self.columns not in ("all", "params"):
            raise HybridperfError(f"columns must be 'all' or 'params', got {self.columns!r}")
        self.descriptors_ = resolve_kernels(rows["kernel"].astype(str).unique(), kernels)
        feats = analytical_features(rows, kernels=self.descriptors_) if features is None else features
        feasible = feats["feasible"].to_numpy() > 0
        if not feasible.all():
            raise HybridperfError(
                f"{int((~feasible).sum())} measured rows are infeasible by the occupancy model (their descriptor "
                "resources exceed the GPU's limits); fix the descriptor or the GPU spec"
            )
        row_kernels = rows["kernel"].astype(str).to_numpy()
        if self.baseline == "none":
            mapping, fallback = {}, None
        elif self.baseline == "auto":
            if y is None:
                raise HybridperfError("baseline='auto' chooses the baseline from measured times; pass y")
            y = np.asarray(y, dtype=np.float64)
            sizes = size_metric(rows) if self.size_aware and param_columns(rows, "size.") else None
            mapping, fallback = choose_baselines(feats, y, row_kernels, rows["gpu"].to_numpy(), sizes)
        else:
            baseline_column(self.baseline)
            mapping, fallback = {k: self.baseline for k in np.unique(row_kernels)}, self.baseline
        cols = [c for c in feats.columns if c != "feasible"]
        if self.columns == "params":
            cols = [c for c in cols if c.startswith(PARAM_FEATURE_PREFIXES)]
        self.baselines_ = dict(mapping)
        self.baseline_ = fallback
        self.columns_ = cols + ([BASELINE_COLUMN] if fallback is not None else []) + (
            list(GROUP_COLUMNS) if self.group_ids else [])
        self.domain_ = training_domain(rows, feats["regime"].to_numpy(), size_columns(rows, self.descriptors_))
        self.n_features_out_ = len(self.columns_)
        return self

    def transform(self, X: pd.DataFrame, *, features: pd.DataFrame | None = None) -> pd.DataFrame:
        """The design matrix of rows ``X`` (float64 DataFrame aligned with ``X``; NaN for infeasible rows)."""
        check_is_fitted(self, "columns_")
        rows = _rows(X)
        feats = analytical_features(rows, kernels=self.descriptors_) if features is None else features
        if self.baseline_ is not None:
            feats = add_baseline(feats, rows["kernel"].astype(str).to_numpy(), self.baselines_, self.baseline_)
        if self.group_ids:
            feats = add_group_ids(feats, rows)
        return feats.reindex(columns=self.columns_).astype(np.float64)

    def fit_transform(self, X: pd.DataFrame, y: Any = None, *, features: pd.DataFrame | None = None,
                      kernels: Mapping[str, KernelDescriptor] | None = None, **_: Any) -> pd.DataFrame:
        if features is None:
            descs = resolve_kernels(_rows(X)["kernel"].astype(str).unique(), kernels)
            features = analytical_features(X, kernels=descs)
        return self.fit(X, y, features=features, kernels=kernels).transform(X, features=features)

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        check_is_fitted(self, "columns_")
        return np.asarray(self.columns_, dtype=object)

    def to_dict(self) -> dict[str, Any]:
        """Parameters and fitted state as JSON values (for the model file)."""
        check_is_fitted(self, "columns_")
        return {"params": self.get_params(), "baselines_": dict(self.baselines_), "baseline_": self.baseline_,
                "columns_": list(self.columns_), "domain_": self.domain_,
                **_descriptor_state(getattr(self, "descriptors_", {}))}

    @classmethod
    def from_dict(cls, doc: Any) -> SweepFeatures:
        """The fitted transformer :meth:`to_dict` described (a ModelFileError if malformed)."""
        from hybridperf.learn.persist import ModelFileError

        try:
            ft = cls(**doc["params"])
            ft.baselines_ = {str(k): str(v) for k, v in dict(doc["baselines_"]).items()}
            ft.baseline_ = None if doc["baseline_"] is None else str(doc["baseline_"])
            ft.columns_ = [str(c) for c in doc["columns_"]]
            ft.domain_ = dict(doc["domain_"])
            ft.descriptors_ = _stored_descriptors(doc.get("descriptors_") or {}, doc.get("descriptor_texts_") or {})
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, ModelFileError):
                raise
            raise ModelFileError(f"model file feature state is malformed ({type(exc).__name__}: {exc}); "
                                 "retrain the model") from None
        for name in [*ft.baselines_.values(), *([ft.baseline_] if ft.baseline_ else [])]:
            if name not in TIME_MODELS:
                raise ModelFileError(f"model file names unknown baseline {name!r}; retrain the model")
        ft.n_features_out_ = len(ft.columns_)
        return ft

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.string = True
        tags.requires_fit = True
        return tags


def _descriptor_state(descriptors: Mapping[str, KernelDescriptor]) -> dict[str, Any]:
    """The model file's record of the descriptors: kernel name -> (descriptor name, sha256), and each
    distinct TOML text once, by sha256 (a family descriptor serves many kernel names). Descriptors built
    in memory (no text) are left out: their kernels are looked up by name when the model is loaded."""
    kept = {k: d for k, d in sorted(descriptors.items()) if d.text}
    return {"descriptors_": {k: {"name": d.name, "sha256": d.sha256} for k, d in kept.items()},
            "descriptor_texts_": {d.sha256: d.text for d in kept.values()}}


def _stored_descriptors(kernels: Mapping[str, Any], texts: Mapping[str, str]) -> dict[str, KernelDescriptor]:
    """The descriptors a model file keeps, parsed by the descriptor reader (formulas through the safe
    evaluator; no code runs) and checked against their recorded sha256."""
    import hashlib

    from hybridperf.learn.persist import ModelFileError

    parsed = {}
    for sha, text in texts.items():
        if hashlib.sha256(text.encode("utf-8")).hexdigest() != sha:
            raise ModelFileError(f"model file descriptor text {sha[:12]}... does not match its sha256; restore "
                                 "or retrain the model")
        parsed[sha] = parse_kernel_text(text, f"model file descriptor {sha[:12]}...")
    out = {}
    for key, entry in kernels.items():
        desc = parsed.get(entry["sha256"])
        if desc is None or desc.name != entry["name"]:
            raise ModelFileError(f"model file descriptor of kernel {key!r} is missing or misnamed; retrain the model")
        out[str(key)] = desc
    return out


def _rows(X: Any) -> pd.DataFrame:
    if not isinstance(X, pd.DataFrame):
        raise HybridperfError(f"SweepFeatures takes sweep rows as a DataFrame (kernel, gpu, size.*, config.*), got "
                              f"{type(X).__name__}")
    return X

