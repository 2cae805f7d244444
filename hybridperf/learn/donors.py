"""A GPU with few runs of a kernel, predicted through the GPUs the kernel was trained on well (donor stacks)."""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from hybridperf.arrays import FloatArray

__all__ = ["MIN_STACK_RUNS", "DonorStack", "apply_donor_stacks", "few_run_pairs", "fit_donor_stack",
           "stacks_from_dict", "stacks_to_dict"]

# A GPU needs at least this many runs of a kernel held out by the intervals' fits (family ``few``) to fit its stack
# (as many as those fits need to hold out a fifth of them at a time).
MIN_STACK_RUNS = 10
# An own weight this close to 1 leaves the prediction as it is (no stack kept).
_OWN_ONLY = 1.0 - 1e-6


@dataclass(frozen=True, slots=True)
class DonorStack:
    """log t = ``level`` + ``weights[0]`` x own log prediction + sum over ``donors`` of ``weights[i + 1]`` x the
    model's log prediction of the same row on that donor GPU (weights >= 0, summing to 1).

    EVALUATION.md's S4: a user measures a few dozen configurations on their GPU beside GPUs with thousands of runs.
    The booster then learns that GPU's shape of the configuration space from a handful of residuals, while the
    measured ranking of the configurations carries across GPUs almost unchanged (CLBlast Xgemm: the best of the
    RTX 2080 Ti's five fastest configurations is the TITAN RTX's optimum, and the RTX 3060 laptop's; the model
    trained with 50 TITAN RTX runs, asked for the TITAN RTX's rows as if they ran on the 2080 Ti, ranks them with
    top-5 1.0 where its own prediction has 0.942). So a GPU's own prediction is blended with the model's
    predictions of the same configurations on each well-trained GPU of its kernel (a donor: its fields and
    analytical terms in place of the GPU's), in log space, by convex weights and one level fitted on the GPU's own
    runs (non-negative least squares of the centred columns, renormalised; the level the median residual). The fit
    sees honest predictions only: each run as the intervals' fit that held it out predicted it, on its GPU and on
    each donor (:func:`hybridperf.learn.uncertainty.calibration_residuals`, family ``few``). Scored by the final
    model on a donor instead, a run's donor prediction had learned from the run itself (configurations are unique
    per GPU, so a leaf holding one holds a third of its rows), and the intervals calibrated on them covered 75.7 %
    at 90 % against 80.0 % (CLBlast S4, TITAN RTX, seed 0). The intervals score each run with the stack fitted on
    the GPU's other runs (:func:`hybridperf.learn.uncertainty._donor_stacks`). experiments/results/donor_stacks.md
    has what the stacks measured."""

    donors: tuple[str, ...]
    weights: tuple[float, ...]
    level: float


def few_run_pairs(kernels: np.ndarray, gpus: np.ndarray) -> Iterator[tuple[str, str, np.ndarray, list[str]]]:
    """(kernel, GPU, positions of its runs, donor GPUs) of each GPU with few runs of a kernel: fewer than
    :data:`hybridperf.learn.domain.FEW_RUNS_SHARE` of the kernel's best-covered GPU's, at least
    :data:`MIN_STACK_RUNS`; its donors the kernel's GPUs that are not few."""
    from hybridperf.learn.domain import FEW_RUNS_SHARE

    for kernel in np.unique(kernels):
        runs = pd.Series(gpus[kernels == kernel]).value_counts()
        few = runs < FEW_RUNS_SHARE * runs.max()
        donors = sorted(str(g) for g in runs[~few].index)
        for gpu in runs[few].index:
            mine = np.flatnonzero((kernels == kernel) & (gpus == gpu))
            if len(mine) >= MIN_STACK_RUNS:
                yield str(kernel), str(gpu), mine, donors


def fit_donor_stack(logy: FloatArray, own: FloatArray, donors: FloatArray) -> tuple[tuple[float, ...], float] | None:
    """(weights, level) of log t ~ level + [own, donors] @ weights, weights >= 0 summing to 1 (least squares of the
    centred columns, then renormalised; the level the median residual), on the rows where every column is finite;
    None with fewer than :data:`MIN_STACK_RUNS` such rows or where the own prediction takes all the weight."""
    from scipy.optimize import nnls

    A = np.column_stack([own, donors])
    ok = np.isfinite(A).all(axis=1) & np.isfinite(logy)
    if ok.sum() < MIN_STACK_RUNS:
        return None
    A, b = A[ok], logy[ok]
    w, _ = nnls(A - A.mean(axis=0), b - b.mean())
    if not np.isfinite(w).all() or w.sum() <= 0 or w[0] / w.sum() >= _OWN_ONLY:
        return None
    w = w / w.sum()
    return tuple(float(x) for x in w), float(np.median(b - A @ w))


def apply_donor_stacks(stacks: Mapping[tuple[str, str], DonorStack], rows: pd.DataFrame, log_pred: FloatArray,
                       donor_log_predict: Callable[[pd.DataFrame], FloatArray]) -> FloatArray:
    """``log_pred`` with the rows of each stacked (kernel, GPU) predicted by its stack; ``donor_log_predict`` gives
    the model's log predictions of rows (their ``gpu`` set to a donor). A row a donor cannot predict (NaN: its
    configuration cannot launch there) keeps its own prediction."""
    if not stacks:
        return log_pred
    kernels, gpus = rows["kernel"].astype(str).to_numpy(), rows["gpu"].astype(str).to_numpy()
    out = np.array(log_pred, dtype=np.float64, copy=True)
    for (kernel, gpu), st in stacks.items():
        pos = np.flatnonzero((kernels == kernel) & (gpus == gpu))
        if not pos.size:
            continue
        mine = rows.iloc[pos]
        parts = [out[pos]] + [np.asarray(donor_log_predict(mine.assign(gpu=d)), dtype=np.float64) for d in st.donors]
        stacked = st.level + np.column_stack(parts) @ np.asarray(st.weights)
        out[pos] = np.where(np.isfinite(stacked), stacked, out[pos])
    return out


def stacks_to_dict(stacks: Mapping[tuple[str, str], DonorStack]) -> list[dict[str, Any]]:
    """The stacks as JSON values (for the model file), sorted by kernel and GPU."""
    return [{"kernel": k, "gpu": g, "donors": list(s.donors), "weights": list(s.weights), "level": s.level}
            for (k, g), s in sorted(stacks.items())]


def stacks_from_dict(doc: Any) -> dict[tuple[str, str], DonorStack]:
    """The stacks :func:`stacks_to_dict` described (a ModelFileError where they do not fit together)."""
    from hybridperf.learn.persist import ModelFileError

    out: dict[tuple[str, str], DonorStack] = {}
    for item in doc:  # types and ranges checked by the model file schema
        key = (str(item["kernel"]), str(item["gpu"]))
        donors, weights = tuple(str(d) for d in item["donors"]), tuple(float(w) for w in item["weights"])
        if len(weights) != len(donors) + 1 or key[1] in donors or len(set(donors)) != len(donors):
            raise ModelFileError(f"model file donor stack of {key[0]!r} on {key[1]!r} needs one weight for its own "
                                 "prediction and one per donor, each donor another GPU once; retrain the model")
        if abs(sum(weights) - 1.0) > 1e-6 or key in out:
            raise ModelFileError(f"model file donor stack of {key[0]!r} on {key[1]!r} is given twice or its weights "
                                 "do not sum to 1; retrain the model")
        out[key] = DonorStack(donors=donors, weights=weights, level=float(item["level"]))
    return out
