"""Non-dominated (Pareto) fronts as small pure numpy functions, chunk-friendly."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from hybridperf.arrays import BoolArray, IntArray
from hybridperf.errors import HybridperfError

__all__ = ["ParetoError", "merge_fronts", "pareto_mask", "pareto_ranks"]



class ParetoError(HybridperfError):
    """Objectives given to a Pareto function are malformed (NaN, wrong shape, bad directions)."""


def _as_loss(objectives: npt.ArrayLike, maximize: bool | Sequence[bool]) -> npt.NDArray[np.float64]:
    """Objectives as an (n, d) float array of losses: maximised columns negated (optuna's habit)."""
    a = np.asarray(objectives, dtype=np.float64)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2:
        raise ParetoError(f"objectives must be a 2-D array (rows x objectives), got {a.ndim} dimensions; "
                          "reshape it to (n_points, n_objectives)")
    d = a.shape[1]
    if np.isnan(a).any():
        bad = np.flatnonzero(np.isnan(a).any(axis=1))
        raise ParetoError(f"objectives hold NaN in {len(bad)} rows (e.g. row {bad[0]}); drop or fill those "
                          "points (infeasible configurations?) before computing the front")
    flags = np.broadcast_to(np.asarray(maximize, dtype=bool), (d,)) if np.ndim(maximize) == 0 else \
        np.asarray(maximize, dtype=bool)
    if flags.shape != (d,):
        raise ParetoError(f"maximize has {flags.size} flags for {d} objectives; give one bool or one per column")
    # + 0.0 folds -0.0 into 0.0 so that equal values compare (and group) as equal.
    return np.where(flags, -a, a) + 0.0


def _unique_rows(loss: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64], IntArray]:
    """Lexicographically sorted distinct rows and, for every input row, the index of its copy."""
    n = loss.shape[0]
    order = np.lexsort(loss.T[::-1])
    s = loss[order]
    new = np.ones(n, dtype=bool)
    if n > 1:
        new[1:] = np.any(s[1:] != s[:-1], axis=1)
    inverse = np.empty(n, dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    return s[new], inverse


def _front_of_sorted_unique(u: npt.NDArray[np.float64]) -> BoolArray:
    """Front of distinct, lexsorted loss rows (minimisation)."""
    m, d = u.shape
    on = np.zeros(m, dtype=bool)
    if m == 0:
        return on
    if d == 1:
        on[0] = True
        return on
    if d == 2:
        # Sorted by (x, y): a row is dominated iff an earlier row has y' <= y.
        prev_min = np.minimum.accumulate(np.concatenate([[np.inf], u[:-1, 1]]))
        return u[:, 1] < prev_min
    remaining = np.arange(m)
    while remaining.size:
        # The lexicographic minimum of what is left is never dominated; drop everything it dominates.
        top = remaining[0]
        on[top] = True
        keep = np.any(u[remaining] < u[top], axis=1)
        remaining = remaining[keep]
    return on


def pareto_mask(objectives: npt.ArrayLike, maximize: bool | Sequence[bool] = False) -> BoolArray:
    """Which points are non-dominated.

    Point *i* is dominated when some point *j* is at least as good in every objective and strictly
    better in one (Ryoo et al., CGO'08, Sec. 5.2: "no other point both above and to the right of
    it"). Maximised objectives are negated first, then everything is minimised (optuna's
    ``_is_pareto_front``). Ties and duplicate points are kept: two equal points never dominate each
    other, so both stay on the front (seed 003 Fig. 6(b): clusters of identical metrics).

    Parameters
    ----------
    objectives : array_like, shape (n_points, n_objectives) or (n_points,)
        Objective values; ``inf`` is allowed, NaN is not.
    maximize : bool or sequence of bool
        Direction of every objective (one flag for all, or one per column). Default: minimise.

    Returns
    -------
    ndarray of bool, shape (n_points,)
        True for points on the front. The result does not depend on the order of the points.

    Raises
    ------
    ParetoError
        On NaN values, a wrong shape, or a ``maximize`` list of the wrong length.

    Notes
    -----
    Two objectives: O(n log n) (sort, then a running minimum). More: O(n * front size).
    """
    loss = _as_loss(objectives, maximize)
    if loss.shape[0] == 0:
        return np.zeros(0, dtype=bool)
    uniq, inverse = _unique_rows(loss)
    return _front_of_sorted_unique(uniq)[inverse]


def merge_fronts(parts: Sequence[npt.ArrayLike], maximize: bool | Sequence[bool] = False) -> list[BoolArray]:
    """Merge the fronts of several chunks: which rows of each part lie on the front of their union.

    The front of a union equals the front of the union of the parts' fronts (a point dominated in
    its own chunk is dominated globally, and domination is transitive), so a large space can be
    streamed chunk by chunk, keeping only each chunk's front, and merged here in one step or as a
    tree reduction (each merge's output is again a valid part).

    Parameters
    ----------
    parts : sequence of array_like, each of shape (n_i, n_objectives)
        Objective values of each part (typically each chunk's front); empty parts are allowed.
    maximize : bool or sequence of bool
        As for :func:`pareto_mask`.

    Returns
    -------
    list of ndarray of bool
        One mask per part, True where the row is on the global front.
    """
    arrays = [np.asarray(p, dtype=np.float64) for p in parts]
    arrays = [a[:, None] if a.ndim == 1 else a for a in arrays]
    if not arrays:
        return []
    widths = {a.shape[1] for a in arrays if a.shape[0]}
    if len(widths) > 1:
        raise ParetoError(f"parts have different numbers of objectives {sorted(widths)}; "
                          "give every part the same columns")
    d = widths.pop() if widths else arrays[0].shape[1]
    arrays = [a.reshape(-1, d) for a in arrays]
    mask = pareto_mask(np.concatenate(arrays), maximize)
    bounds = np.cumsum([0] + [a.shape[0] for a in arrays])
    return [mask[bounds[i]:bounds[i + 1]] for i in range(len(arrays))]


def pareto_ranks(objectives: npt.ArrayLike, maximize: bool | Sequence[bool] = False,
                 max_rank: int | None = None) -> IntArray:
    """Non-dominated sorting: 0 for the front, 1 for the front of what is left, and so on.

    Useful to ask how deep into the layers a known optimum lies when it is not on the front.

    Parameters
    ----------
    objectives, maximize
        As for :func:`pareto_mask`.
    max_rank : int, optional
        Stop peeling after this many layers; remaining points get ``max_rank``.

    Returns
    -------
    ndarray of int, shape (n_points,)
    """
    loss = _as_loss(objectives, maximize)
    uniq, inverse = _unique_rows(loss)
    ranks = np.full(uniq.shape[0], -1, dtype=np.int64)
    left = np.arange(uniq.shape[0])
    layer = 0
    while left.size:
        if max_rank is not None and layer >= max_rank:
            ranks[left] = max_rank
            break
        on = _front_of_sorted_unique(uniq[left])  # a subset of sorted rows stays sorted
        ranks[left[on]] = layer
        left = left[~on]
        layer += 1
    return ranks[inverse]
