"""HybridRegressor: analytical baseline x exp(residual learned by gradient boosting in log space)."""
from __future__ import annotations

import re
from typing import Any, Self

import numpy as np
import numpy.typing as npt
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.utils.validation import check_is_fitted, validate_data

from hybridperf.arrays import FloatArray
from hybridperf.learn.booster import default_booster, set_prediction_threads
from hybridperf.learn.calibration import GroupTable, apply_offsets, fit_offsets, shared_scale_fit, stack_weight
from hybridperf.learn.folds import HOLDOUT_ROWS, Split, forward_shift, forward_splits, held_out_parts, oof_splits
from hybridperf.learn.intervals import (
    conformal_half_width,
    conformity_scores,
    outside_training_range,
)
from hybridperf.learn.modes import CALIBRATIONS, MODES, WEIGHTINGS

__all__ = ["HybridRegressor", "default_booster"]

# The transfer fit keeps each trained GPU's own overhead for a kernel (HybridRegressor._own_overheads) only where at
# least this many, and this share, of every GPU's runs have a modelled time below the overhead (runs it dominates)
# and as many above it (runs that measure the scale).
_MIN_OVERHEAD_RUNS = 4
_MIN_OVERHEAD_SHARE = 0.01


def _runs_on_both_sides(below: np.ndarray, pair: np.ndarray) -> bool:
    """Whether every pair has at least :data:`_MIN_OVERHEAD_RUNS` and :data:`_MIN_OVERHEAD_SHARE` of its runs
    ``below`` its overhead, and as many above it."""
    for side in (below, ~below):
        runs = pd.Series(side).groupby(pair)
        if ((runs.sum() < _MIN_OVERHEAD_RUNS) | (runs.mean() < _MIN_OVERHEAD_SHARE)).any():
            return False
    return True


class HybridRegressor(RegressorMixin, BaseEstimator):
    """Predict positive times as baseline x exp(learned residual), residual learned in log space.

    Parameters
    ----------
    regressor : estimator, optional
        Learns the log-space residual; cloned into ``regressor_``. Default: :func:`default_booster`.
    baseline_column : int or str, optional
        Column of X holding the analytical baseline as log(time). ``None``: no baseline, the
        regressor learns log(time) directly (boosting only).
    mode : {"hybrid", "analytical", "calibrated", "boosting"}
        ``hybrid``: baseline x exp(regressor). ``analytical``: the baseline alone.
        ``calibrated``: baseline x one fitted scale (geometric mean of measured/baseline, per
        group with ``group_columns``). ``boosting``: ignore the baseline, learn log(time) from X.
    coverage : float or None
        Nominal coverage of the split-conformal intervals built from out-of-fold log residuals
        during ``fit``; ``None`` skips them (faster).
    n_splits : int
        Folds for the out-of-fold residuals (above 20,000 rows without groups: one 20% holdout).
    random_state : int or None
        Seed for the folds (the regressor has its own).
    group_columns : list of int or str, optional
        Columns of group ids (most specific first, e.g. a (kernel, GPU) id then a kernel id). With a
        baseline, each group's mean log residual is removed first (a per-group scale, the
        calibrated analytical model) and the regressor learns what remains; rows of an unseen
        group fall back to the next column's group, then to the overall mean.
    shrink_residual : bool
        Scale the learned residual by the weight in [0, 1] that best fits the out-of-fold
        residuals (a stacking weight), one weight per group of the last group column (e.g. per
        kernel) and an overall one: residuals that are noise (tiny or noisy data) shrink to 0,
        leaving the calibrated baseline; residuals with structure keep a weight near 1. With ordered
        ``groups`` (sizes) and group columns there are two sets: the forward fits' weights, which measure
        the residual beyond the sizes a fit saw and serve rows outside the sizes their first-column group
        (a kernel on a GPU) was trained on, or of a group never trained, and the random folds' weights,
        which serve rows inside them (a residual that does not extrapolate may still describe the sizes it
        was fitted on: bench-mb's forward weight was 0 while the random folds kept 1). Over the first
        doubling outside the trained sizes the weight moves linearly from one to the other, so a prediction
        does not jump at the range's edge. "Inside" is each size column's [min, max] of the group's training
        rows; a row without any size value counts as inside.
    calibration : {"scale", "affine"}
        How each group of the first group column is calibrated to the baseline: ``scale``, one
        factor (seed 004's adjusting weight); ``affine``, time = overhead + factor x baseline with
        0 <= overhead <= the group's fastest run (a fixed launch/measurement cost the analytical
        models leave out), fitted in log space when the group has 4+ runs spanning 2x in baseline.
    extrapolation_columns : list of int or str, or str, optional
        Columns (e.g. log problem sizes) beyond whose training range a row counts as an
        extrapolation: its interval uses the forward scores (see ``fit``'s ``groups``). A single
        string is a regular expression matched against the column names (like scikit-learn's
        ``make_column_selector(pattern=...)``).
    transfer : bool
        With a baseline, two or more group columns and a last-column group (a kernel) seen with two or
        more first-column groups (GPUs): also fit a transfer regressor for first-column groups never
        trained (a GPU with no runs). Its calibration stops at the second column (per kernel, overhead
        + scale with ``calibration="affine"``), so the regressor, which never sees the first column's
        id, must explain the differences between GPUs from the other columns (hardware ratios, the
        analytical terms): it learns the fraction of the baseline each GPU reaches, the quantity
        NeuSight (Lee et al., ASPLOS 2025) showed to carry over to unseen GPUs. With ``affine``, where
        every GPU's runs measure both an overhead and the scale, the overhead is each trained GPU's own
        (a property of the machine it was recorded on, which no hardware field tells) and is taken out of
        the regressor's target; a GPU with no runs takes the trained GPUs' median overhead
        (``_own_overheads``). Rows of a known first-column group are predicted as without it.
    weighting : {"uniform", "throughput"}
        ``throughput``: each training row weighs the fastest time of its problem over its own time (1 for
        the fastest configuration, 0.5 for one twice as slow; times ``sample_weight`` when given), a problem
        being the rows with one first-group-column id (a (kernel, GPU)) and the same extrapolation-column
        values (the sizes). The fit then spends its capacity on the fast configurations, the ones a ranking
        must get right: Ansor's cost model weights each program by its throughput for the same reason
        (Zheng et al., "Ansor", OSDI 2020, Sec. 5.2). A row alone in its problem (a sweep of sizes, no
        configurations) keeps weight 1, so such sweeps fit as with ``uniform``. Without group columns every
        row weighs 1; without extrapolation columns a first-column group is one problem. Each fit (the final
        one and every held-out refit) weighs its own rows only, so a held-out run never sets a training
        run's weight. As in Ansor the weights are not rescaled (the fastest run of a problem weighs 1), and
        they apply to the residual regressor and the scale calibrations; the affine calibration of a
        first-column group and the stacking weight are fitted unweighted.
    transfer_baseline_column : int or str, optional
        A column of X (a name not among X's columns is ignored) with an analytical time (log ms) that the
        transfer fit predicts every kernel's rows from, where it is finite on all of them, instead of the
        kernel's own ``baseline_column`` (``transfer_kernels_``).
        A kernel's own baseline is chosen for its shape once scaled per (kernel, GPU); a GPU with no runs has no
        such scale, so it needs the model that carries hardware differences: :func:`make_model` passes the
        hierarchical roofline, NeuSight's per-wave roofline, whose fraction the transfer regressor learns (issue
        11). Where such a kernel is trained on one GPU alone, the transfer fit is made for it too (without it, a
        GPU with no runs took the main fit, its kernel's own baseline and the one GPU's scale); as everywhere the
        transfer fit exists, it then also predicts the rows of kernels never trained (their baseline stays the
        fallback, ``unseen_baseline_column``, and their offset its overall one).
    unseen_baseline_column : str, optional
        The column of the baseline that rows of groups never trained (a kernel with no runs) are predicted
        from (the features' fallback). The overall offsets ``offset_`` and ``transfer_offset_``, which only
        those rows use, are then that column's mean log residual over every training row, rather than the mean
        residual of each row against its own baseline (which mixes in the calibration of baselines such rows
        never use).

    Attributes
    ----------
    regressor_ : fitted clone of ``regressor`` (``None`` in analytical/calibrated modes).
    offset_ : float, overall log-space scale (calibrated mode, or with group_columns; 0 otherwise).
    group_offsets_ : list of {group id: (log scale, overhead)}, one per group column (overhead 0
        except for affine-calibrated groups of the first column).
    transfer_regressor_ : the transfer regressor (``transfer``; None when not fitted).
    transfer_offsets_, transfer_offset_ : its per-group calibration tables (second group column on)
        and overall offset.
    transfer_kernels_ : the last-group-column ids (kernels) whose transfer fit predicts from
        ``transfer_baseline_column`` (sorted; those whose own baseline is another column).
    residual_weight_ : float, overall weight of the learned residual (1 unless shrink_residual).
    residual_weights_ : {group id: weight} for the last group column.
    within_weight_, within_weights_ : the same from the random folds, for rows inside their group's
        trained sizes (None and {} without forward fits, random folds, group or extrapolation columns, or
        ``shrink_residual``: then the weights above serve every row).
    size_ranges_ : {first-group-column id: (min, max) arrays over the extrapolation columns} of the
        training rows (empty without within weights).
    oof_abs_log_errors_ : sorted out-of-fold |log(pred/measured)| from random folds: the conformal
        scores for rows inside the training range.
    extrap_abs_log_errors_ : sorted forward scores (each size band predicted from the smaller
        ones; only with ordered ``groups``): the conformal scores for extrapolated rows.
    feature_min_, feature_max_ : training range of each column (finite values).
    extrapolation_mask_ : which columns define extrapolation.
    """

    def __init__(self, *, regressor: Any = None, baseline_column: int | str | None = None, mode: str = "hybrid",
                 coverage: float | None = 0.9, n_splits: int = 5, random_state: int | None = 0,
                 group_columns: Any = None, shrink_residual: bool = False, calibration: str = "scale",
                 extrapolation_columns: Any = None, transfer: bool = False, weighting: str = "uniform",
                 unseen_baseline_column: str | None = None, transfer_baseline_column: int | str | None = None) -> None:
        self.regressor = regressor
        self.baseline_column = baseline_column
        self.mode = mode
        self.coverage = coverage
        self.n_splits = n_splits
        self.random_state = random_state
        self.group_columns = group_columns
        self.shrink_residual = shrink_residual
        self.calibration = calibration
        self.extrapolation_columns = extrapolation_columns
        self.transfer = transfer
        self.weighting = weighting
        self.unseen_baseline_column = unseen_baseline_column
        self.transfer_baseline_column = transfer_baseline_column

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.target_tags.positive_only = True
        return tags

    # -- columns ---------------------------------------------------------------------------------

    def _baseline_index(self) -> int | None:
        if self.baseline_column is None or self.mode == "boosting":
            return None
        return self._indices([self.baseline_column])[0]

    def _indices(self, columns: Any) -> list[int]:
        """Positions of columns given by name (DataFrame input), by index, or by a name pattern."""
        names = [str(n) for n in getattr(self, "feature_names_in_", [])]
        if isinstance(columns, str):
            return [i for i, n in enumerate(names) if re.search(columns, n)]
        out = []
        for c in columns:
            if isinstance(c, str) and c not in names:
                raise ValueError(f"column {c!r} is not a column of X; columns: {', '.join(names[:20])}")
            i = names.index(c) if isinstance(c, str) else int(c)
            if not 0 <= i < self.n_features_in_:
                raise ValueError(f"column {c} is out of range for X with {self.n_features_in_} columns")
            out.append(i)
        return out

    def _column_mask(self, columns: Any) -> np.ndarray:
        mask = np.zeros(self.n_features_in_, dtype=bool)
        if columns is not None:
            mask[self._indices(columns)] = True
        return mask

    def _group_indices(self) -> list[int]:
        return [] if self.group_columns is None else self._indices(self.group_columns)

    def _base(self, X: np.ndarray) -> FloatArray:
        b = self._baseline_index()
        return X[:, b] if b is not None else np.zeros(X.shape[0])

    # -- fitting ---------------------------------------------------------------------------------

    def _fit_one(self, X: np.ndarray, target: np.ndarray, w: np.ndarray | None) -> Any:
        reg = clone(self.regressor) if self.regressor is not None else default_booster(self.random_state)
        params = reg.get_params()
        small = len(target) < HOLDOUT_ROWS and "n_jobs" in params
        if small:
            reg.set_params(n_jobs=1)  # threads only cost (OpenMP spin) on small data, badly so on a busy machine
        if w is None:
            reg.fit(X, target)
        else:
            reg.fit(X, target, sample_weight=w)
        if small:  # but it predicts with the threads asked for: a 200k-row scan is not small data
            set_prediction_threads(reg, params["n_jobs"])
        return reg

    def fit(self, X: npt.ArrayLike, y: npt.ArrayLike, sample_weight: npt.ArrayLike | None = None,
            groups: npt.ArrayLike | None = None) -> Self:
        """Fit on features X and measured times y (> 0).

        ``groups`` (optional) makes the out-of-fold residuals leave whole groups out (e.g. sizes),
        so the conformal intervals reflect extrapolation rather than interpolation.
        """
        X, y, w = self._check_fit_inputs(X, y, sample_weight)
        base = self._base(X)
        if not np.all(np.isfinite(base)):
            raise ValueError("the baseline column has NaN/inf rows (infeasible configs?); drop them before fitting")
        target = np.log(y) - base
        self.group_offsets_, self.offset_, self.regressor_ = self._fit_core(X, target, w)
        self._fit_transfer(X, target, w)
        finite = np.where(np.isfinite(X), X, np.nan)
        with np.errstate(all="ignore"):
            self.feature_min_ = np.nanmin(np.where(np.isnan(finite), np.inf, finite), axis=0)
            self.feature_max_ = np.nanmax(np.where(np.isnan(finite), -np.inf, finite), axis=0)
        self.residual_weight_ = 1.0
        self.residual_weights_: dict[float, float] = {}
        self.within_weight_: float | None = None
        self.within_weights_: dict[float, float] = {}
        self.size_ranges_: dict[float, tuple[np.ndarray, np.ndarray]] = {}
        self.oof_abs_log_errors_ = None
        self.extrap_abs_log_errors_ = None
        self.extrapolation_mask_ = self._column_mask(self.extrapolation_columns)
        self.heldout_: dict[str, np.ndarray] = {}
        want_stack = self.shrink_residual and self.regressor_ is not None
        if self.coverage is None and not want_stack:
            return self
        # Stacking weight: from forward fits when groups order the rows (sizes), else from random folds.
        fwd_splits = forward_splits(groups) if groups is not None and self.mode != "analytical" else None
        fwd = self._held_out_parts(fwd_splits, X, target, w) if fwd_splits else (None, None)
        rnd_splits = oof_splits(len(target), self.n_splits, None if fwd[0] is not None else groups,
                                self.random_state)
        rnd = self._oof_parts(X, target, w, rnd_splits)
        stack_off, stack_reg = fwd if fwd[0] is not None else rnd
        if stack_off is not None and want_stack:
            self.residual_weight_, self.residual_weights_ = self._stack_weights(X, target, stack_off, stack_reg)
            if fwd[0] is not None and rnd[0] is not None and self.extrapolation_mask_.any() and self._group_indices():
                self.within_weight_, self.within_weights_ = self._stack_weights(X, target, *rnd)
                self.size_ranges_ = self._size_ranges(X)
        if self.coverage is not None:
            self._keep_heldout(X, np.log(y), base, rnd, rnd_splits, fwd, fwd_splits)
        return self

    def _fit_transfer(self, X: np.ndarray, target: np.ndarray, w: np.ndarray | None) -> None:
        """The transfer regressor and its calibration (see ``transfer``), or None where it does not apply."""
        core = self._transfer_core(X, target, w)
        self.transfer_offsets_, self.transfer_offset_, self.transfer_regressor_, self.transfer_kernels_ = \
            core or ([], 0.0, None, [])

    def _transfer_base(self, X: np.ndarray, kernels: list[float]) -> FloatArray:
        """Each row's baseline (log ms) in the transfer fit: ``transfer_baseline_column`` for the rows of
        ``kernels`` (last-group-column ids), ``baseline_column`` for the others."""
        base = self._base(X)
        if not kernels:
            return base
        rows = np.isin(X[:, self._group_indices()[-1]], kernels)
        return np.where(rows, X[:, self._indices([self.transfer_baseline_column])[0]], base)

    def _rebased_kernels(self, X: np.ndarray, kernel: np.ndarray) -> list[float]:
        """The kernels (ids in ``kernel``) whose transfer fit takes ``transfer_baseline_column``: it is a column
        of X, finite on every row of the kernel and not already the kernel's baseline."""
        c = self.transfer_baseline_column
        if c is None or (isinstance(c, str) and c not in [str(n) for n in getattr(self, "feature_names_in_", [])]):
            return []  # e.g. a design matrix without analytical columns
        col, base = X[:, self._indices([c])[0]], self._base(X)
        ok = np.isfinite(kernel)
        per = pd.DataFrame({"finite": np.isfinite(col[ok]), "other": col[ok] != base[ok]}).groupby(kernel[ok])
        kept = per["finite"].all() & per["other"].any()
        return [float(k) for k in kept.index[kept.to_numpy()]]

    def _transfer_core(self, X: np.ndarray, target: np.ndarray,
                       w: np.ndarray | None) -> tuple[list[GroupTable], float, Any, list[float]] | None:
        """(calibration tables from the second group column on, overall offset, regressor, kernels predicted from
        ``transfer_baseline_column``) of the transfer fit on these rows (see ``transfer``), or None where it does
        not apply to them: no kernel is trained on two or more GPUs and none changes baseline."""
        idx = self._group_indices()
        if not (self.transfer and self.mode == "hybrid" and len(idx) >= 2 and self._baseline_index() is not None):
            return None
        first, last = X[:, idx[0]], X[:, idx[-1]]
        ok = np.isfinite(first) & np.isfinite(last)
        rebased = self._rebased_kernels(X, last)
        spread = pd.Series(first[ok]).groupby(last[ok]).nunique()
        if not ((spread >= 2).any() or rebased):
            return None
        w = self._fit_weights(X, target, w)  # from the rows' times, whatever baseline the transfer fit takes
        base = self._transfer_base(X, rebased)
        own = target - (base - self._base(X))  # log(time) - the transfer fit's baseline (0 shift on other rows)
        levels, _ = fit_offsets([X[:, j] for j in idx[1:]], own, w, base, affine=self.calibration == "affine")
        # The overall offset serves only kernels never trained, which keep ``baseline_column`` (the fallback):
        # the mean against it, as the main fit's, not against the rebased kernels' column.
        glob = self._unseen_offset(X, target, w, float(np.average(target, weights=w)))
        off = apply_offsets([X[:, j] for j in idx[1:]], levels, glob, base)
        if self.calibration == "affine" and len(idx) >= 2:
            off = self._own_overheads(X[:, idx[0]], X[:, idx[1]], own, base, levels[0], off)
        return levels, glob, self._fit_one(self._without_first_group(X), own - off, w), rebased

    @staticmethod
    def _own_overheads(pair: np.ndarray, kernel: np.ndarray, own: np.ndarray, base: np.ndarray,
                       table: GroupTable, off: np.ndarray) -> np.ndarray:
        """The transfer fit's calibration with each trained GPU's own overhead (``table``, the kernels' tables,
        changed in place; returns the training rows' offsets).

        Per kernel, one scale and one overhead per (kernel, GPU) pair (:func:`shared_scale_fit`): the regressor
        learns from each run's residual after its own GPU's overhead, and a GPU with no runs takes the median of
        the trained GPUs' overheads (the table's overhead). An overhead is a property of the machine a GPU was
        recorded on (the framework's dispatch, the timing), which no datasheet field tells; with one overhead
        per kernel, the regressor explained the GPUs' different overheads by their hardware fields and carried
        them to a GPU whose fields lay beyond them (NeuSight's elementwise ops, the A100 left out: its shortest
        runs 1.65x too slow; fitted per GPU, the P100's machine adds 35-51 us to an op, the others 18-30 us). Only where
        every GPU has runs below its overhead and runs above it (:data:`_MIN_OVERHEAD_RUNS`,
        :data:`_MIN_OVERHEAD_SHARE`): elsewhere the kernel keeps its one overhead, as before.
        """
        out = off.copy()
        for k, (log_s, a) in list(table.items()):
            rows = np.flatnonzero(kernel == k)
            if a <= 0 or len(np.unique(pair[rows])) < 2:
                continue  # no overhead fitted, or one GPU: its own overhead is the kernel's
            fit = shared_scale_fit(base[rows], own[rows], pair[rows], start=(log_s, a))
            if fit is None:
                continue
            log_s, per_pair = fit
            a_row = pd.Series(pair[rows]).map(per_pair).to_numpy(dtype=np.float64)
            # An overhead is a fixed cost only where runs measure it, and the scale only where runs measure that:
            # each GPU needs runs whose modelled time lies below its overhead and runs whose modelled time lies
            # above it. Sweeps of one problem size (Kernel Tuner's) have none of the first: there the fitted
            # "overhead" (0.08-1.8 ms of the convolution's 1.8-4.8 ms runs) soaks up a trend of the
            # configurations, and one per GPU moved the GPUs left out by -11 to +11 points of MAPE. Where every
            # run lies below (the scale collapsed, each overhead a GPU's whole level), the median overhead would
            # hide the GPUs' levels from the regressor, which learns them from the hardware fields.
            below = np.exp(log_s + base[rows]) < a_row
            known = np.isfinite(a_row)
            if not _runs_on_both_sides(below[known], pair[rows][known]):
                continue
            table[k] = (log_s, float(np.median(list(per_pair.values()))))
            with np.errstate(over="ignore", invalid="ignore"):
                own_off = np.log(np.exp(log_s) + a_row * np.exp(-base[rows]))
            out[rows[known]] = own_off[known]  # rows without a GPU id keep the kernel's offset
        return out

    def _transfer_log_predict(self, X: np.ndarray, levels: list[GroupTable], glob: float, reg: Any,
                              kernels: list[float], *, weights: np.ndarray) -> FloatArray:
        """Log predictions of rows of first-column groups never trained, by a transfer fit's parts (``kernels``:
        those predicted from ``transfer_baseline_column``), the learned residual scaled by ``weights``, except on
        the rows of ``kernels``: their stacking weight was measured on the residual of their own baseline, not on
        this one, so theirs is kept whole."""
        idx = self._group_indices()
        base = self._transfer_base(X, kernels)
        off = apply_offsets([X[:, j] for j in idx[1:]], levels, glob, base)
        if kernels:
            weights = np.where(np.isin(X[:, idx[-1]], kernels), 1.0, weights)
        return base + off + weights * reg.predict(self._without_first_group(X))

    def _fit_weights(self, X: np.ndarray, target: np.ndarray, w: np.ndarray | None) -> np.ndarray | None:
        """The training weights ``weighting`` asks for, from the rows of this fit alone (see the class docstring),
        times ``w`` when given. ``target`` is log(time) - baseline, so log(time) = target + baseline."""
        idx = self._group_indices()
        if self.weighting == "uniform" or not idx:
            return w
        sizes = np.flatnonzero(self._column_mask(self.extrapolation_columns))
        cols = idx[:1] + [int(j) for j in sizes]
        logy = pd.Series(target + self._base(X))
        fastest = logy.groupby([X[:, j] for j in cols], dropna=False, sort=False).transform("min")
        t = np.exp(fastest.to_numpy(dtype=np.float64) - logy.to_numpy())
        return t if w is None else w * t

    def _without_first_group(self, X: np.ndarray) -> np.ndarray:
        """X with the first group column (e.g. the (kernel, GPU) id) missing, so no tree can split on it."""
        Xt = X.copy()
        Xt[:, self._group_indices()[0]] = np.nan
        return Xt

    def _keep_heldout(self, X: np.ndarray, logy: np.ndarray, base: np.ndarray, rnd: tuple, rnd_splits: list | None,
                      fwd: tuple, fwd_splits: list | None) -> None:
        """Conformity scores and the held-out log predictions the product's intervals calibrate on.

        ``heldout_`` (training-time only, not saved): ``random`` and ``forward`` held-out log
        predictions (NaN where a row was not held out), with weights inside the trained sizes also
        ``random_forward`` (the random folds' predictions with the forward weights), ``fold`` (the
        random fold of each row) and ``shift`` (how far each forward-held-out row lies beyond its fit's
        training range, in the extrapolation columns' units, i.e. log2 of the size factor for log2 sizes).
        """
        # Each held-out row with the weight the model gives a row so placed against its own training sizes: a
        # random fold's rows mostly inside its fit's sizes, a forward fit's beyond them.
        # (Rows in no split have no held-out prediction: their weight never counts.)
        weights = {name: np.array(self._forward_weights(X), dtype=np.float64) for name in ("random", "forward")}
        if self._has_within():
            for name, splits in (("random", rnd_splits), ("forward", fwd_splits)):
                for tr, te in splits or []:
                    weights[name][te] = self._weights(X[te], self._size_ranges(X[tr]))
        for name, attr, (off, reg) in (("random", "oof_abs_log_errors_", rnd),
                                       ("forward", "extrap_abs_log_errors_", fwd)):
            if off is not None:
                pred = base + off + weights[name] * reg
                self.heldout_[name] = pred
                setattr(self, attr, conformity_scores(logy - pred))
        if self._has_within() and rnd[0] is not None:  # the difficulty's target (see fit_intervals)
            self.heldout_["random_forward"] = base + rnd[0] + self._forward_weights(X) * rnd[1]
        if rnd_splits is not None:
            self.heldout_["fold"] = np.full(len(logy), -1)
            for k, (_, te) in enumerate(rnd_splits):
                self.heldout_["fold"][te] = k
        if fwd_splits and self.extrapolation_mask_.any():
            self.heldout_["shift"] = forward_shift(X, self.extrapolation_mask_, fwd_splits)

    def held_out_log_predict(self, X: npt.ArrayLike, y: npt.ArrayLike,
                             splits: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        """Log predictions of each split's test rows by this estimator's settings refitted on the
        split's training rows (NaN for rows in no test part): held-out predictions for calibration."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, ensure_all_finite="allow-nan", dtype=np.float64)
        base = self._base(X)
        y = np.asarray(y, dtype=np.float64)
        if y.shape != (X.shape[0],) or not np.all(np.isfinite(y)) or np.any(y <= 0):
            raise ValueError("y must hold one finite, positive time per row of X")
        target = np.log(y) - base
        idx = self._group_indices()
        transfer = getattr(self, "transfer_regressor_", None) is not None
        out = np.full(len(target), np.nan)
        for tr, te in splits:
            # Rows of a last-column group (a kernel) the split never trained take the overall residual weight, as
            # the model gives a kernel it never trained (not the weight learned from that kernel's own residuals).
            # Inside or beyond the split's own training sizes, as the model weighs rows inside or beyond its own.
            weights = np.array(self._weights(X[te], self._size_ranges(X[tr]) if self._has_within() else None),
                               dtype=np.float64)  # a copy: the mapped weights are read-only
            if idx:
                weights[~np.isin(X[te, idx[-1]], X[tr, idx[-1]])] = self.residual_weight_
            # Rows of a first-column group (a GPU, a kernel) the split never trained are predicted as the model
            # predicts such rows: by a transfer fit on the split's training rows. Scored by the main fit's
            # regressor instead, the leave-GPU-out scores of NeuSight S6 measured a predictor the model never uses
            # for a GPU without runs: their 90 % quantile was 1.4-1.9x the held-out GPU's, and the intervals
            # covered 97-99.7 %. Where transfer does not apply to the split's rows (one GPU left), the main fit
            # predicts them, as a model of those rows would.
            new = ~np.isin(X[te, idx[0]], X[tr, idx[0]]) if transfer else np.zeros(len(te), dtype=bool)
            core = self._transfer_core(X[tr], target[tr], None) if new.any() else None
            if core is None:
                new[:] = False
            if not new.all():  # the main fit, unless every test row takes the transfer fit
                off, reg = self._held_out_parts([(tr, te)], X, target, None)
                out[te] = base[te] + off[te] + weights * reg[te]
            if core is not None:
                out[te[new]] = self._transfer_log_predict(X[te[new]], *core, weights=weights[new])
        return out

    def _check_fit_inputs(self, X: npt.ArrayLike, y: npt.ArrayLike,
                          sample_weight: npt.ArrayLike | None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Validated parameters and (X, y, weights): positive finite times, one non-negative weight per row."""
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.calibration not in CALIBRATIONS:
            raise ValueError(f"calibration must be 'scale' or 'affine', got {self.calibration!r}")
        if self.weighting not in WEIGHTINGS:
            raise ValueError(f"weighting must be one of {', '.join(WEIGHTINGS)}, got {self.weighting!r}")
        if self.coverage is not None and not 0 < self.coverage < 1:
            raise ValueError(f"coverage must be in (0, 1) or None, got {self.coverage!r}")
        X, y = validate_data(self, X, y, ensure_all_finite="allow-nan", y_numeric=True, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        if not np.all(np.isfinite(y)) or np.any(y <= 0):
            raise ValueError("y must hold finite, positive times; drop failed or invalid runs before fitting")
        w = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        if w is not None and (w.shape != y.shape or np.any(w < 0) or not np.any(w > 0)):
            raise ValueError("sample_weight must be one non-negative weight per row, not all zero")
        if self.mode in ("analytical", "calibrated") and self.baseline_column is None:
            raise ValueError(f"mode={self.mode!r} needs baseline_column (the log analytical time)")
        return X, y, w

    def _stack_weights(self, X: np.ndarray, target: np.ndarray, off: np.ndarray,
                       reg: np.ndarray) -> tuple[float, dict[float, float]]:
        """(overall weight, {last-group-column id: weight}) fitted to held-out (offset, regressor) parts."""
        ok = np.isfinite(off)
        r = target - off
        overall = stack_weight(r[ok], reg[ok], 0.0)
        per_group: dict[float, float] = {}
        idx = self._group_indices()
        if idx:
            g = X[:, idx[-1]]
            for v in np.unique(g[np.isfinite(g) & ok]):
                m = (g == v) & ok
                if m.sum() >= 3:
                    per_group[float(v)] = stack_weight(r[m], reg[m], overall)
        return overall, per_group

    def _size_ranges(self, X: np.ndarray) -> dict[float, tuple[np.ndarray, np.ndarray]]:
        """{first-group-column id: (min, max) over the extrapolation columns} of the rows of X (NaN: none)."""
        cols = np.flatnonzero(self.extrapolation_mask_)
        g = X[:, self._group_indices()[0]]
        out = {}
        for v in np.unique(g[np.isfinite(g)]):
            part = X[np.ix_(g == v, cols)]
            has = np.isfinite(part).any(axis=0)
            lo = np.min(np.where(np.isfinite(part), part, np.inf), axis=0)
            hi = np.max(np.where(np.isfinite(part), part, -np.inf), axis=0)
            out[float(v)] = (np.where(has, lo, np.nan), np.where(has, hi, np.nan))
        return out

    def _oof_parts(self, X: np.ndarray, target: np.ndarray, w: np.ndarray | None,
                   splits: list | None) -> tuple[np.ndarray | None, np.ndarray]:
        """Out-of-fold (offset, regressor) parts of the log prediction; (None, _) if folds can't be made."""
        zeros = np.zeros(len(target))
        if self.mode == "analytical":
            return zeros, zeros
        return (None, zeros) if splits is None else self._held_out_parts(splits, X, target, w)

    def _held_out_parts(self, splits: list[Split], X: np.ndarray, target: np.ndarray,
                        w: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        return held_out_parts(splits, X, target, w, self._fit_core, self._offsets)

    def _unseen_offset(self, X: np.ndarray, target: np.ndarray, w: np.ndarray | None, glob: float) -> float:
        """The overall offset, which serves only rows of groups never trained (kernels): with
        ``unseen_baseline_column``, the mean log residual of that column (the baseline such rows are predicted
        from) over every training row, not the mean of the rows' own baselines (a kernel whose baseline needs
        calibration, e.g. scaled counts at 1e-5x, pulled a recorded GH100 model's unseen kernels 90x too fast);
        ``glob`` unchanged without it."""
        if self.unseen_baseline_column is None:
            return glob
        fb = self._indices([self.unseen_baseline_column])[0]
        resid = target + self._base(X) - X[:, fb]
        ok = np.isfinite(resid)
        return float(np.average(resid[ok], weights=None if w is None else w[ok])) if ok.any() else glob

    def _fit_core(self, X: np.ndarray, target: np.ndarray,
                  w: np.ndarray | None) -> tuple[list[GroupTable], float, Any]:
        """Group offsets, overall offset and the residual regressor for one training set."""
        w = self._fit_weights(X, target, w)  # each fit's own rows: a held-out row never weighs a training row
        use_offsets = self.mode == "calibrated" or (
            self.group_columns is not None and self._baseline_index() is not None)
        levels: list[GroupTable] = []
        glob = 0.0
        if use_offsets:
            groups = [X[:, j] for j in self._group_indices()]
            levels, glob = fit_offsets(groups, target, w, self._base(X), affine=self.calibration == "affine")
            glob = self._unseen_offset(X, target, w, glob)
        reg = None
        if self.mode in ("hybrid", "boosting"):
            reg = self._fit_one(X, target - self._offsets(X, levels, glob), w)
        return levels, glob, reg

    # -- prediction ------------------------------------------------------------------------------

    def _offsets(self, X: np.ndarray, levels: list[GroupTable], glob: float) -> FloatArray:
        return apply_offsets([X[:, j] for j in self._group_indices()], levels, glob, self._base(X))

    def _group_weights(self, X: np.ndarray, per_group: dict[float, float], overall: float) -> np.ndarray:
        idx = self._group_indices()
        if not idx or not per_group:
            return np.full(X.shape[0], overall)
        return pd.Series(X[:, idx[-1]]).map(per_group).fillna(overall).to_numpy(np.float64)

    def _forward_weights(self, X: np.ndarray) -> np.ndarray:
        """Per-row residual weight beyond the trained sizes: the row's group weight, else the overall one."""
        return self._group_weights(X, self.residual_weights_, self.residual_weight_)

    def _has_within(self) -> bool:
        return getattr(self, "within_weight_", None) is not None

    def _weights(self, X: np.ndarray, ranges: dict[float, tuple[np.ndarray, np.ndarray]] | None = None) -> np.ndarray:
        """Per-row residual weight: inside the sizes its first-column group was trained on (``ranges``, default the
        model's) the random folds' weight, outside them or for a group never trained the forward fits' weight,
        linearly between over the first doubling (see ``shrink_residual``)."""
        fwd = self._forward_weights(X)
        if not self._has_within():
            return fwd
        inside = self._group_weights(X, self.within_weights_, self.within_weight_)
        ramp = np.clip(self._size_shift(X, self.size_ranges_ if ranges is None else ranges), 0.0, 1.0)
        return np.where(np.isnan(ramp), fwd, inside + (fwd - inside) * ramp)

    def _size_shift(self, X: np.ndarray, ranges: dict[float, tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        """How far each row lies outside its first-column group's sizes in ``ranges``, in the extrapolation
        columns' units (log2 of the size factor), largest over the columns the row and the group both have: 0
        inside (or with no such column), NaN for a group not in ``ranges``."""
        if not ranges:
            return np.full(X.shape[0], np.nan)
        keys = np.array(sorted(ranges), dtype=np.float64)
        lo = np.array([ranges[k][0] for k in keys])
        hi = np.array([ranges[k][1] for k in keys])
        g = X[:, self._group_indices()[0]]
        pos = np.clip(np.searchsorted(keys, g), 0, len(keys) - 1)  # one lookup for every group, not a loop
        x = X[:, np.flatnonzero(self.extrapolation_mask_)]
        with np.errstate(invalid="ignore"):
            out = np.fmax(x - hi[pos], lo[pos] - x)  # NaN where the row or the group has no such size
        shift = np.fmax(np.max(np.where(np.isnan(out), -np.inf, out), axis=1, initial=-np.inf), 0.0)
        return np.where(keys[pos] == g, shift, np.nan)

    def _log_predict(self, X: np.ndarray) -> np.ndarray:
        out = self._base(X) + self._offsets(X, self.group_offsets_, self.offset_)
        if self.regressor_ is not None:
            # Row-major for xgboost: a design matrix from a DataFrame is column-major, and predicting from it
            # took 0.93 s against 0.71 s (+0.08 s to convert) for 200k rows and 400 trees; the same values.
            out = out + self._weights(X) * self.regressor_.predict(np.ascontiguousarray(X))
        if getattr(self, "transfer_regressor_", None) is not None:
            idx = self._group_indices()
            unseen = ~pd.Series(X[:, idx[0]]).isin(list(self.group_offsets_[0])).to_numpy()
            if unseen.any():
                out[unseen] = self._transfer_log_predict(
                    X[unseen], self.transfer_offsets_, self.transfer_offset_, self.transfer_regressor_,
                    getattr(self, "transfer_kernels_", []), weights=self._weights(X[unseen]))
        return out

    def predict(self, X: npt.ArrayLike) -> np.ndarray:
        """Predicted times (same unit as y); NaN where the baseline is NaN (infeasible rows)."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, ensure_all_finite="allow-nan", dtype=np.float64)
        return np.exp(self._log_predict(X))

    def predict_interval(self, X: npt.ArrayLike, coverage: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Split-conformal interval (lo, hi) around :meth:`predict`, symmetric in log space."""
        _, lo, hi = self.predict_with_interval(X, coverage)
        return lo, hi

    def predict_with_interval(self, X: npt.ArrayLike,
                              coverage: float | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Prediction and its conformal interval from one pass of the regressor: (pred, lo, hi)."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, ensure_all_finite="allow-nan", dtype=np.float64)
        q = np.full(X.shape[0], self.interval_half_width(coverage))
        if self.extrap_abs_log_errors_ is not None:
            outside = outside_training_range(X, self.extrapolation_mask_, self.feature_min_, self.feature_max_)
            q[outside] = self.interval_half_width(coverage, extrapolation=True)
        mid = self._log_predict(X)
        return np.exp(mid), np.exp(mid - q), np.exp(mid + q)

    def interval_half_width(self, coverage: float | None = None, extrapolation: bool = False) -> float:
        """Log-space half width of the conformal interval at ``coverage`` (default: ``self.coverage``),
        from the forward scores when ``extrapolation`` (and they exist)."""
        check_is_fitted(self)
        scores = self.oof_abs_log_errors_
        if extrapolation and self.extrap_abs_log_errors_ is not None:
            scores = self.extrap_abs_log_errors_
        return conformal_half_width(scores, self.coverage if coverage is None else coverage)

    # -- state -----------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Every parameter and the fitted state as JSON values; the booster in xgboost's native JSON."""
        from hybridperf.learn.estimator_state import estimator_to_dict

        check_is_fitted(self)
        return estimator_to_dict(self)

    @classmethod
    def from_dict(cls, doc: Any) -> HybridRegressor:
        """The fitted estimator :meth:`to_dict` described (a ModelFileError if the state is malformed)."""
        from hybridperf.learn.estimator_state import estimator_from_dict

        return estimator_from_dict(cls, doc)
