"""Prediction with a trained model: the rows a request means, the descriptors they use, times, intervals, reasons."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from hybridperf.analytical.mwp_cwp import REGIMES
from hybridperf.errors import HybridperfError
from hybridperf.kernel import KernelDescriptor, load_kernel, registered_kernel
from hybridperf.learn.domain import REASON_COLUMNS, out_of_domain, reason_text
from hybridperf.learn.features import analytical_features
from hybridperf.rowcheck import check_column_names, drop_bad_rows
from hybridperf.sweep import without_attrs

if TYPE_CHECKING:
    from hybridperf.learn.model import TrainedModel

__all__ = ["check_prediction_rows", "half_width_column", "log_times_on", "model_kernels", "predict_rows",
           "predict_spread", "rows_to_predict", "stacked_times"]

_LIMITER_NAMES = {0.0: "warps", 1.0: "registers", 2.0: "shared memory", 3.0: "blocks"}


def rows_to_predict(model: TrainedModel, *, rows: str | Path | None = None, kernel: str | None = None,
                    gpu: str | None = None, values: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """The rows a prediction request means: a file of rows (``rows``), or the grid of ``values`` for
    ``kernel`` on ``gpu`` (each defaulting to the model's only kernel or GPU)."""
    from hybridperf.grid import grid_rows
    from hybridperf.sweepfile import read_rows

    if rows is not None:
        return read_rows(rows).reset_index(drop=True)
    kernels, gpus = list(model.metadata.get("kernels", {})), list(model.metadata.get("gpus", {}))
    kernel = kernel or (kernels[0] if len(kernels) == 1 else None)
    gpu = gpu or (gpus[0] if len(gpus) == 1 else None)
    if kernel is None or gpu is None:
        raise HybridperfError(f"the model covers kernels {kernels} and GPUs {gpus}; name one with --kernel and --gpu")
    desc = model.descriptors.get(kernel) if registered_kernel(kernel) is None else None
    # A kernel the model trained under a name its descriptor does not carry (a family descriptor's member,
    # e.g. aiwc-csr-csr by aiwc-counted) keeps that name, so the model's training of it applies.
    name = kernel if desc is not None and desc.name != kernel else None
    if desc is None and registered_kernel(kernel) is None and _lookup(kernel) is None:
        desc = load_kernel(kernel, known=model.descriptors)  # a copy the model keeps under its file's path
    return grid_rows(desc or kernel, gpu, values or {}, name=name)


def _lookup(kernel: str) -> KernelDescriptor | None:
    """The descriptor a kernel name finds without a model's copies, or None."""
    try:
        return load_kernel(kernel)
    except HybridperfError:
        return None


def model_kernels(model: TrainedModel, rows: pd.DataFrame, kernels: Mapping[str, KernelDescriptor] | None = None
                  ) -> tuple[pd.DataFrame, dict[str, KernelDescriptor]]:
    """The rows (kernel names canonical) and the descriptors to compute their features with a model.

    The model's own copies come first. A descriptor given in ``kernels`` or registered in this process
    under a name the model holds must have the same sha256 (same file), else a HybridperfError says to
    retrain; other names are looked up. Rows that name a descriptor file whose descriptor the model
    holds under its name are renamed to that name (so the training domain applies to them).
    """
    own = model.descriptors
    out = dict(own)
    names = rows["kernel"].astype(str)
    rename = {}
    for name in names.unique():
        other = (kernels or {}).get(name) or registered_kernel(name)
        if other is None and name not in own and name.endswith(".toml") and Path(name).is_file():
            other = load_kernel(name)
        elif other is None and name not in own and not name.endswith(".toml"):
            other = _lookup(name)  # an alias (matvec) or a descriptor on the kernel path
        if other is not None and name not in own and other.name in own and other.sha256 == own[other.name].sha256:
            rename[name] = other.name  # a path or an alias (matvec) of a descriptor the model holds
            continue
        if name not in own:
            # The model holds this descriptor under its file's path (its training rows named it so): rename.
            same = [k for k, d in own.items() if d.name == name and (other is None or d.sha256 == other.sha256)]
            if len(same) == 1:
                rename[name] = same[0]
                continue
        if other is None:
            continue
        if name in own and other.sha256 != own[name].sha256:
            raise HybridperfError(
                f"kernel {name}: the descriptor given ({other.path or 'in memory'}) differs from the copy the model "
                "was trained with; retrain the model with it, or name the kernel without a path to use the model's "
                "copy")
        out[name] = other
    if rename:
        rows = rows.assign(kernel=names.replace(rename))
    return rows, out


def check_prediction_rows(model: TrainedModel, rows: pd.DataFrame, *, strict: bool = False,
                          kernels: Mapping[str, KernelDescriptor] | None = None) -> pd.DataFrame:
    """Rows to predict without those the model cannot (unknown kernel or GPU, parameters outside their
    descriptor): counted by reason in a warning, or a HybridperfError with ``strict``
    (:func:`hybridperf.rowcheck.drop_bad_rows`). Kernel and GPU aliases (``matvec``, ``h100``) become the names the
    model knows, as ``--kernel`` and ``--gpu`` do; a HybridperfError names a column named like a parameter of the
    rows' kernels but none (``config.BLOK``, ``config.block``), a parameter's column without its ``size.`` /
    ``config.`` prefix (where the prefixed one is absent), and a size the model's training rows gave that the rows
    leave out (the descriptor's default would stand in for the problem's size unsaid). ``kernels``: descriptors
    of kernel names, as :func:`model_kernels` takes them."""
    rows, descs = model_kernels(model, _canonical_gpus(rows), kernels)
    _check_columns(rows, descs, getattr(model.features, "domain_", {}), set(model.feature_columns))
    return drop_bad_rows(rows, descs, strict=strict, what="rows to predict")


def _canonical_gpus(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with each GPU name that finds a spec replaced by the spec's key (``h100`` -> ``h100-sxm``); names
    without a spec stay, for the row checks to report."""
    from hybridperf.hardware import load_gpu

    names = rows["gpu"].astype(str)
    rename = {}
    for name in names.unique():
        try:
            key = load_gpu(name).key
        except HybridperfError:
            continue
        if key != name:
            rename[name] = key
    return rows.assign(gpu=names.replace(rename)) if rename else rows


def _check_columns(rows: pd.DataFrame, descs: Mapping[str, KernelDescriptor],
                   domain: Mapping[str, Mapping[str, Any]], trained_columns: set[str]) -> None:
    """A HybridperfError for a column the rows' kernels cannot take or a size they leave out (see
    :func:`check_prediction_rows`; ``domain``: the model's training domain, whose sizes say which the training
    rows gave; ``trained_columns``: the model's design columns, which a typo check leaves alone)."""
    from hybridperf.kernel import resolve_kernels

    kernels = rows["kernel"].astype(str)
    found = {}
    for name in kernels.unique():
        try:
            found[name] = resolve_kernels([name], descs)[name]
        except HybridperfError:
            continue  # an unknown kernel: the row checks report it
    check_column_names(rows, found, exempt=trained_columns, what="rows to predict")
    _check_sizes(kernels, rows, found, domain)


def _check_sizes(kernels: pd.Series, rows: pd.DataFrame, found: Mapping[str, KernelDescriptor],
                 domain: Mapping[str, Mapping[str, Any]]) -> None:
    """A HybridperfError where the rows of a kernel of ``found`` do not give one of its sizes that the model's
    training rows gave. A size the training rows did not give either (an importer's default: a Kernel Tuner cache
    records no problem size) is the one training used; a kernel never trained has no such rows, and its rows keep
    the descriptor's defaults as an importer wrote them."""
    from hybridperf.sweep import param_name, size_column

    for name, d in found.items():
        mine = (kernels == name).to_numpy()
        given = {param_name(c) for c in domain.get(name, {}).get("sizes", {})}
        for size in [n for n in d.size_names if n in given]:
            col = size_column(rows.columns, size)  # size.<name>, or counter.<name> for a counter-described kernel
            if col is None:
                raise HybridperfError(f"rows to predict: no column size.{size} (a size of {name}); give every row "
                                      "its problem size (a size is never taken from the descriptor's default)")
            empty = mine & rows[col].isna().to_numpy()
            if empty.any():
                raise HybridperfError(f"rows to predict: {col} (a size of {name}) is empty in data row "
                                      f"{int(np.flatnonzero(empty)[0]) + 1}; give every row its problem size (a size "
                                      "is never taken from the descriptor's default)")


def half_width_column(level: float) -> str:
    """The :func:`predict_rows` column holding the log-space half width at coverage ``level``."""
    return f"half_width_{level * 100:g}"


def _plain_half_widths(model: TrainedModel, reasons: pd.DataFrame, levels: Sequence[float]) -> np.ndarray:
    """The estimator's plain log-space half widths (rows x levels), for a model without adaptive intervals."""
    est = model.estimator
    outside = (reasons["ood_size_factor"].to_numpy(dtype=np.float64) > 1.0) & (est.extrap_abs_log_errors_ is not None)
    return np.column_stack([np.where(outside, est.interval_half_width(c, extrapolation=True),
                                     est.interval_half_width(c)) for c in levels])


def _prepared(model: TrainedModel, rows: pd.DataFrame, features: pd.DataFrame | None,
              kernels: Mapping[str, KernelDescriptor] | None, *,
              reasons: bool = True) -> tuple[pd.DataFrame, pd.DataFrame, Any, Any]:
    """(rows with canonical kernel names, their features, the design matrix, the out-of-domain reasons or,
    without ``reasons``, None)."""
    rows, descs = model_kernels(model, rows, kernels)
    feats = analytical_features(rows, kernels=descs) if features is None else features
    X = model.features.transform(rows, features=feats)
    why = out_of_domain(rows, model.features.domain_, feats["regime"].to_numpy()) if reasons else None
    return rows, feats, X, why


def log_times_on(model: TrainedModel, rows: pd.DataFrame,
                 kernels: Mapping[str, KernelDescriptor] | None = None) -> np.ndarray:
    """The estimator's log predictions of ``rows``, their features computed (no donor stack: what a donor GPU's
    rows take in :func:`stacked_times`)."""
    X = _prepared(model, rows.reset_index(drop=True), None, kernels, reasons=False)[2]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(model.estimator.predict(X))


def stacked_times(model: TrainedModel, rows: pd.DataFrame, pred: np.ndarray,
                  kernels: Mapping[str, KernelDescriptor] | None = None) -> np.ndarray:
    """The estimator's predictions ``pred`` of ``rows`` with those of a GPU with few runs of their kernel combined
    with the kernel's well-trained GPUs' (the model's donor stacks, :mod:`hybridperf.learn.donors`); ``pred`` itself
    where the model has none."""
    from hybridperf.learn.donors import apply_donor_stacks

    stacks = {} if model.intervals is None else model.intervals.donor_stacks
    if not stacks:
        return pred
    with np.errstate(divide="ignore", invalid="ignore"):
        log_pred = np.log(np.asarray(pred, dtype=np.float64))
    return np.exp(apply_donor_stacks(stacks, rows, log_pred, lambda r: log_times_on(model, r, kernels)))


def predict_spread(model: TrainedModel, rows: pd.DataFrame, levels: Sequence[float], *,
                   features: pd.DataFrame | None = None,
                   kernels: Mapping[str, KernelDescriptor] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(predicted times, log-space half widths at ``levels``: rows x levels), the same numbers as
    :func:`predict_rows` gives in ``time_ms`` and the :func:`half_width_column` columns, without its
    labels and sentences (what a ranking scan needs of every configuration)."""
    rows, _, X, reasons = _prepared(model, without_attrs(rows), features, kernels, reasons=len(levels) > 0)
    pred = stacked_times(model, rows, model.estimator.predict(X), kernels)
    if reasons is None:  # the time alone
        return pred, np.empty((len(pred), 0))
    if model.intervals is not None:
        return pred, model.intervals.widths(X, reasons, rows["kernel"], None, levels)[1]
    return pred, _plain_half_widths(model, reasons, levels)


def _labels(codes: pd.Series, names: Mapping[Any, str]) -> np.ndarray:
    """The name of each numeric code ('' for NaN or a code without a name), looked up once per distinct code."""
    found, uniq = pd.factorize(codes.to_numpy(dtype=np.float64))  # NaN: code -1
    table = {float(k): n for k, n in names.items()}
    return np.array([table.get(float(u), "") for u in uniq] + [""], dtype=object)[found]  # -1: the last, ''


def _checked_request(model: Any, rows: Any, coverage: Any, levels: Sequence[Any], features: Any,
                     kernels: Mapping[str, KernelDescriptor] | None) -> pd.DataFrame:
    """The rows :func:`predict_rows` can predict (:func:`check_prediction_rows`), after a HybridperfError for
    arguments of the wrong kind."""
    if not all(hasattr(model, a) for a in ("estimator", "features", "descriptors")):  # a TrainedModel
        raise HybridperfError(f"predict_rows: model must be a trained model (hybridperf.load_model(path) reads a "
                              f"model file), got {type(model).__name__}")
    if not isinstance(rows, pd.DataFrame):
        raise HybridperfError(f"predict_rows: rows must be a pandas DataFrame with kernel, gpu, size.* and config.* "
                              f"columns (pandas.DataFrame(records) makes one from dicts), got {type(rows).__name__}")
    missing = [c for c in ("kernel", "gpu") if c not in rows.columns]
    if missing:
        raise HybridperfError(f"predict_rows: rows have no column {missing[0]!r}; name each row's "
                              f"{missing[0].upper() if missing[0] == 'gpu' else missing[0]} in it")
    if rows.empty:
        raise HybridperfError("predict_rows: no rows to predict")
    for what, value in [("coverage", coverage)] * (coverage is not None) + [("a level", v) for v in levels]:
        if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not 0 < value < 1:
            raise HybridperfError(f"predict_rows: {what} must be a number in (0, 1) (0.9 for a 90 % interval), "
                                  f"got {value!r}")
    if features is not None:
        raise HybridperfError("predict_rows: features= is aligned with rows the check could drop; pass "
                              "check=False with rows already checked (check_prediction_rows)")
    return check_prediction_rows(model, rows, kernels=kernels)


def _times_and_intervals(model: TrainedModel, rows: pd.DataFrame, X: Any, reasons: pd.DataFrame,
                         coverage: float | None, levels: Sequence[float],
                         kernels: Mapping[str, KernelDescriptor] | None = None) -> tuple[Any, Any, Any, Any]:
    """(time, interval low, high, half widths at ``levels`` or None) of the rows, as :func:`predict_rows` gives."""
    est = model.estimator
    pred, lo, hi = est.predict_with_interval(X, coverage)
    stacked = stacked_times(model, rows, pred, kernels)
    if stacked is not pred:  # the interval moves with the time (adaptive ones are made around it below)
        with np.errstate(divide="ignore", invalid="ignore"):
            lo, hi, pred = lo * (stacked / pred), hi * (stacked / pred), stacked
    cov = est.coverage if coverage is None else coverage
    unseen = reasons["ood_kernel"].to_numpy(dtype=bool)
    widths = None
    if model.intervals is not None and (cov is not None or len(levels)):
        half, widths = model.intervals.widths(X, reasons, rows["kernel"], cov, levels)
    elif len(levels):
        widths = _plain_half_widths(model, reasons, levels)
    if model.intervals is not None and cov is not None:
        ivs = model.intervals
        # A shift no held-out fit measured (training had one kernel, or one GPU) has no bound: a model of the
        # TITAN V seed-004 times was 19-660x off on an H200 and an H100, inside a 1.36 hi/lo band taken from
        # its size-extrapolation bins.
        for shift, rows_of in (("kernel", unseen), ("gpu", reasons["ood_gpu"].to_numpy(dtype=bool))):
            if not ivs.measured(shift):
                half = np.where(rows_of, np.inf, half)
        with np.errstate(invalid="ignore", over="ignore"):
            lo, hi = pred * np.exp(-half), pred * np.exp(half)
    elif cov is not None:  # the plain interval knows nothing of kernels never trained
        lo, hi = np.where(unseen, 0.0, lo), np.where(unseen, np.inf, hi)
    return pred, lo, hi, widths


def _infeasible_reasons(model: TrainedModel, rows: pd.DataFrame, feasible: np.ndarray,
                        kernels: Mapping[str, KernelDescriptor] | None) -> np.ndarray:
    """Why each row the constraints or the occupancy calculator rule out cannot launch ('' for the others), as
    ``analyze`` says it (computed again for those rows only)."""
    from hybridperf.analytical.run import analyze
    from hybridperf.kernel import resolve_kernels
    from hybridperf.learn.features import descriptor_params

    out = np.full(len(rows), "", dtype=object)
    pos = np.flatnonzero(~feasible)
    if not pos.size:
        return out
    bad = rows.iloc[pos].reset_index(drop=True)
    descs = model_kernels(model, bad, kernels)[1]
    for (kernel, gpu), idx in bad.groupby(["kernel", "gpu"], sort=False).indices.items():
        desc = resolve_kernels([str(kernel)], descs)[str(kernel)]
        params = descriptor_params(desc, bad.iloc[idx]).reset_index(drop=True)
        out[pos[idx]] = analyze(desc, str(gpu), params, models=("occupancy",)).reason
    return out


def predict_rows(model: TrainedModel, rows: pd.DataFrame, coverage: float | None = None, *,
                 features: pd.DataFrame | None = None, kernels: Mapping[str, KernelDescriptor] | None = None,
                 levels: Sequence[float] = (), check: bool = True) -> pd.DataFrame:
    """Predict time and interval, regime, limiter and the out-of-domain reasons of each row.

    ``rows`` holds kernel, gpu, size.* and config.* columns (no time needed); ``features`` may pass
    their precomputed :func:`analytical_features`. Kernel names find the descriptors the model was
    trained with, then ``kernels``, then the lookup (:func:`model_kernels`). Infeasible rows get NaN
    times, ``feasible = False`` and the reason in ``infeasible_reason`` (the constraint broken or the occupancy
    limit exceeded, as ``analyze`` names it; '' on feasible rows). The
    reason columns are those of :func:`hybridperf.learn.domain.out_of_domain`, with
    ``out_of_domain`` (any reason) and ``ood_reason`` (a sentence); the interval widens with each
    reason (see ConformalIntervals). A kernel the model never trained on is predicted with the
    fallback baseline, the average calibration and the learned residual; its interval is the one
    held-out kernels showed in training, or unbounded where training could not measure it. Likewise a
    GPU the model never trained on: the leave-GPU-out fits' interval, unbounded after training on one GPU.
    ``levels`` (coverages in (0, 1)) adds the log-space half width of the interval at each level,
    in the columns :func:`half_width_column` names (the row's predictive distribution, e.g. for
    :mod:`hybridperf.search.optimum`).

    ``check`` (the default) first refuses arguments of the wrong kind and rows that name a parameter's column
    wrongly or leave out a size the model trained with, and drops rows the model cannot predict with a warning
    counting them (:func:`check_prediction_rows`; the result keeps the index of the rows it predicts). Callers
    whose rows are already checked, or that pass ``features`` aligned with them, pass ``check=False``.
    """
    if isinstance(rows, pd.DataFrame):
        rows = without_attrs(rows)  # a loaded sweep's provenance, deep-copied by every pandas operation on it
    if check:
        rows = _checked_request(model, rows, coverage, levels, features, kernels)
    rows, feats, X, reasons = _prepared(model, rows, features, kernels)
    pred, lo, hi, widths = _times_and_intervals(model, rows, X, reasons, coverage, levels, kernels)
    out = pd.DataFrame(index=rows.index)
    out["time_ms"] = pred
    out["lo_ms"] = lo
    out["hi_ms"] = hi
    out["regime"] = _labels(feats["regime"], REGIMES)
    out["limiter"] = _labels(feats["limiter"], _LIMITER_NAMES)
    out["feasible"] = feats["feasible"].to_numpy() > 0
    out["infeasible_reason"] = _infeasible_reasons(model, rows, out["feasible"].to_numpy(), kernels)
    text = reason_text(reasons, rows["kernel"], rows["gpu"])
    out["out_of_domain"] = [bool(t) for t in text]
    out["ood_reason"] = text
    for col in REASON_COLUMNS:
        out[col] = reasons[col].to_numpy()
    if widths is not None:
        for j, level in enumerate(levels):
            out[half_width_column(level)] = widths[:, j]
    return out
