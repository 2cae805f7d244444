"""HybridRegressor: analytical baseline x exp(residual learned by gradient boosting in log space)."""
from __future__ import annotations

from typing import Any, Self

import numpy as np
import numpy.typing as npt
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.model_selection import GroupKFold, KFold
from sklearn.utils.validation import check_is_fitted, validate_data

__all__ = ["MODES", "HybridRegressor", "default_booster"]

MODES = ("hybrid", "analytical", "calibrated", "boosting")
_HOLDOUT_ROWS = 20_000  # above this, conformal scores come from one 20% holdout instead of k folds
_DISCRETE_MAX = 32  # a training column with at most this many distinct values is treated as categorical


def _affine_fit(base: np.ndarray, resid: np.ndarray) -> tuple[float, float] | None:
    """Fit log(y) = log(s * B + a), B = exp(base), a in [0, min y], in log space; None if too few runs."""
    from scipy.optimize import least_squares

    ok = np.isfinite(base) & np.isfinite(resid)
    base, resid = base[ok], resid[ok]
    if len(base) < 4 or np.ptp(base) < np.log(2.0):
        return None
    y_min = float(np.min(np.exp(base + resid)))
    big = np.exp(-base)

    def f(p: np.ndarray) -> np.ndarray:
        return np.log(np.exp(p[0]) + p[1] * big) - resid

    fit = least_squares(f, x0=[float(np.mean(resid)), 0.0], bounds=([-np.inf, 0.0], [np.inf, y_min]))
    return (float(fit.x[0]), float(fit.x[1])) if fit.success else None


def _stack_weight(resid: np.ndarray, pred: np.ndarray, default: float) -> float:
    """Least-squares weight in [0, 1] of out-of-fold residual predictions (``default`` if undefined)."""
    ok = np.isfinite(resid) & np.isfinite(pred)
    den = float(np.sum(pred[ok] ** 2))
    return float(np.clip(np.sum(resid[ok] * pred[ok]) / den, 0.0, 1.0)) if den > 0 else default


def default_booster(random_state: int | None = 0, n_jobs: int = 2) -> Any:
    """The residual learner hybridperf uses unless told otherwise: a histogram XGBRegressor."""
    from xgboost import XGBRegressor

    return XGBRegressor(n_estimators=400, max_depth=6, learning_rate=0.05, subsample=0.8,
                        colsample_bytree=0.8, min_child_weight=2.0, reg_lambda=1.0, tree_method="hist",
                        random_state=random_state, n_jobs=n_jobs)


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
        ``calibrated``: baseline x one fitted scale (geometric mean of measured/baseline).
        ``boosting``: ignore the baseline, learn log(time) from X. These are the ablations.
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
    calibration : {"scale", "affine"}
        How each group of the first group column is calibrated to the baseline: ``scale``, one
        factor (seed 004's adjusting weight); ``affine``, time = overhead + factor x baseline with
        0 <= overhead <= the group's fastest run (a fixed launch/measurement cost the analytical
        models leave out), fitted in log space when the group has 4+ runs spanning 2x in baseline.
    shrink_residual : bool
        Scale the learned residual by the weight in [0, 1] that best fits the out-of-fold
        residuals (a stacking weight), one weight per group of the last group column (e.g. per
        kernel) and an overall one: residuals that are noise (tiny or noisy data) shrink to 0,
        leaving the calibrated baseline; residuals with structure keep a weight near 1.
    extrapolation_columns : list of int or str, optional
        Columns (e.g. log problem sizes) beyond whose training range a row counts as an
        extrapolation: its interval uses the forward scores (see ``fit``'s ``groups``).
    domain_columns : list of int or str, optional
        Columns whose training range defines the domain (default: all).
    categorical_columns : list of int or str, optional
        Columns whose training values are a closed set (GPU fields, config values): an unseen
        value is out of domain. Default: none.

    Attributes
    ----------
    regressor_ : fitted clone of ``regressor`` (``None`` in analytical/calibrated modes).
    offset_ : float, overall log-space scale (calibrated mode, or with group_columns; 0 otherwise).
    group_offsets_ : list of {group id: (log scale, overhead)}, one per group column (overhead 0
        except for affine-calibrated groups of the first column).
    residual_weight_ : float, overall weight of the learned residual (1 unless shrink_residual).
    residual_weights_ : {group id: weight} for the last group column.
    oof_abs_log_errors_ : sorted out-of-fold |log(pred/measured)| from random folds: the conformal
        scores for rows inside the training range.
    extrap_abs_log_errors_ : sorted forward scores (each size band predicted from the smaller
        ones; only with ordered ``groups``): the conformal scores for extrapolated rows.
    feature_min_, feature_max_ : training range of each column (finite values).
    domain_mask_, categorical_mask_ : which columns the out-of-domain check uses.
    """

    def __init__(self, regressor: Any = None, baseline_column: int | str | None = None, mode: str = "hybrid",
                 coverage: float | None = 0.9, n_splits: int = 5, random_state: int | None = 0,
                 domain_columns: Any = None, categorical_columns: Any = None, group_columns: Any = None,
                 shrink_residual: bool = False, calibration: str = "scale",
                 extrapolation_columns: Any = None) -> None:
        self.regressor = regressor
        self.extrapolation_columns = extrapolation_columns
        self.calibration = calibration
        self.shrink_residual = shrink_residual
        self.group_columns = group_columns
        self.domain_columns = domain_columns
        self.categorical_columns = categorical_columns
        self.baseline_column = baseline_column
        self.mode = mode
        self.coverage = coverage
        self.n_splits = n_splits
        self.random_state = random_state

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.target_tags.positive_only = True
        return tags

    # -- fitting ---------------------------------------------------------------------------------

    def _baseline_index(self) -> int | None:
        b = self.baseline_column
        if b is None or self.mode == "boosting":
            return None
        if isinstance(b, str):
            names = list(getattr(self, "feature_names_in_", []))
            if b not in names:
                raise ValueError(f"baseline_column {b!r} is not a column of X; columns: {', '.join(names[:20])}")
            return names.index(b)
        if not 0 <= int(b) < self.n_features_in_:
            raise ValueError(f"baseline_column {b} is out of range for X with {self.n_features_in_} columns")
        return int(b)

    def _indices(self, columns: Any) -> list[int]:
        """Positions of columns given by name (DataFrame input) or by index, in the given order."""
        names = list(getattr(self, "feature_names_in_", []))
        out = []
        for c in columns:
            if isinstance(c, str):
                if c not in names:
                    raise ValueError(f"column {c!r} is not a column of X")
                out.append(names.index(c))
            else:
                out.append(int(c))
        return out

    def _column_mask(self, columns: Any, default: bool) -> np.ndarray:
        if columns is None:
            return np.full(self.n_features_in_, default)
        mask = np.zeros(self.n_features_in_, dtype=bool)
        mask[self._indices(columns)] = True
        return mask

    def _fit_one(self, X: np.ndarray, target: np.ndarray, w: np.ndarray | None) -> Any:
        reg = clone(self.regressor) if self.regressor is not None else default_booster(self.random_state)
        if len(target) < _HOLDOUT_ROWS and "n_jobs" in reg.get_params():
            reg.set_params(n_jobs=1)  # threads only cost (OpenMP spin) on small data, badly so on a busy machine
        if w is None:
            reg.fit(X, target)
        else:
            reg.fit(X, target, sample_weight=w)
        return reg

    def fit(self, X: npt.ArrayLike, y: npt.ArrayLike, sample_weight: npt.ArrayLike | None = None,
            groups: npt.ArrayLike | None = None) -> Self:
        """Fit on features X and measured times y (> 0).

        ``groups`` (optional) makes the out-of-fold residuals leave whole groups out (e.g. sizes),
        so the conformal intervals reflect extrapolation rather than interpolation.
        """
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.coverage is not None and not 0 < self.coverage < 1:
            raise ValueError(f"coverage must be in (0, 1) or None, got {self.coverage!r}")
        X, y = validate_data(self, X, y, ensure_all_finite="allow-nan", y_numeric=True, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        if not np.all(np.isfinite(y)) or np.any(y <= 0):
            raise ValueError("y must hold finite, positive times; drop failed or invalid runs before fitting")
        w = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        if w is not None and (w.shape != y.shape or np.any(w < 0) or not np.any(w > 0)):
            raise ValueError("sample_weight must be one non-negative weight per row, not all zero")
        b = self._baseline_index()
        if self.mode in ("analytical", "calibrated") and self.baseline_column is None:
            raise ValueError(f"mode={self.mode!r} needs baseline_column (the log analytical time)")
        base = X[:, b] if b is not None else np.zeros(len(y))
        if not np.all(np.isfinite(base)):
            raise ValueError("the baseline column has NaN/inf rows (infeasible configs?); drop them before fitting")
        target = np.log(y) - base
        self.group_offsets_, self.offset_, self.regressor_ = self._fit_core(X, target, w)
        finite = np.where(np.isfinite(X), X, np.nan)
        with np.errstate(all="ignore"):
            self.feature_min_ = np.nanmin(np.where(np.isnan(finite), np.inf, finite), axis=0)
            self.feature_max_ = np.nanmax(np.where(np.isnan(finite), -np.inf, finite), axis=0)
        self.domain_mask_ = self._column_mask(self.domain_columns, default=True)
        self.categorical_mask_ = self._column_mask(self.categorical_columns, default=False)
        self.discrete_values_ = [np.unique(c[np.isfinite(c)]) if cat and len(np.unique(c[np.isfinite(c)])) <= _DISCRETE_MAX
                                 else None for c, cat in zip(X.T, self.categorical_mask_)]
        self.residual_weight_ = 1.0
        self.residual_weights_: dict[float, float] = {}
        self.oof_abs_log_errors_ = None
        self.extrap_abs_log_errors_ = None
        self.extrapolation_mask_ = self._column_mask(self.extrapolation_columns, default=False)
        want_stack = self.shrink_residual and self.regressor_ is not None
        if self.coverage is None and not want_stack:
            return self
        # Stacking weight: from forward fits when groups order the rows (sizes), else from random folds.
        fwd = self._forward_parts(X, target, w, groups) if groups is not None else (None, None)
        rnd = self._oof_parts(X, target, w, None if fwd[0] is not None else groups)
        stack_off, stack_reg = fwd if fwd[0] is not None else rnd
        if stack_off is not None and want_stack:
            ok = np.isfinite(stack_off)
            r = target - stack_off
            self.residual_weight_ = _stack_weight(r[ok], stack_reg[ok], 0.0)
            idx = self._group_indices()
            if idx:
                g = X[:, idx[-1]]
                for v in np.unique(g[np.isfinite(g) & ok]):
                    m = (g == v) & ok
                    if m.sum() >= 3:
                        self.residual_weights_[float(v)] = _stack_weight(r[m], stack_reg[m], self.residual_weight_)
        if self.coverage is not None:
            weights = self._weights(X)
            for attr, (off, reg) in (("oof_abs_log_errors_", rnd), ("extrap_abs_log_errors_", fwd)):
                if off is not None:
                    scores = np.abs(target - off - weights * reg)
                    setattr(self, attr, np.sort(scores[np.isfinite(scores)]))
        return self

    def _forward_parts(self, X: np.ndarray, target: np.ndarray, w: np.ndarray | None,
                       groups: npt.ArrayLike) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Each ordered group (size band) predicted by a fit on the smaller ones: (offset, regressor)
        parts, NaN for the first band; (None, None) with fewer than three bands."""
        g = np.asarray(groups, dtype=np.float64)
        bands = np.unique(g[np.isfinite(g)])
        if len(bands) < 3 or self.mode == "analytical":
            return None, None
        splits = [(np.flatnonzero(g < b), np.flatnonzero(g == b)) for b in bands[1:]]
        return self._held_out_parts([(tr, te) for tr, te in splits if len(tr) >= 2], X, target, w)

    def _held_out_parts(self, splits: list[tuple[np.ndarray, np.ndarray]], X: np.ndarray, target: np.ndarray,
                        w: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """(offset, regressor) parts of each split's test rows from a fit on its training rows; NaN elsewhere."""
        off = np.full(len(target), np.nan)
        reg_part = np.full(len(target), np.nan)
        for tr, te in splits:
            levels, glob, reg = self._fit_core(X[tr], target[tr], None if w is None else w[tr])
            off[te] = self._offsets(X[te], levels, glob)
            reg_part[te] = reg.predict(X[te]) if reg is not None else 0.0
        return off, reg_part

    def _weights(self, X: np.ndarray) -> np.ndarray:
        """Per-row residual weight: the row's group weight, else the overall one."""
        idx = self._group_indices()
        if not idx or not self.residual_weights_:
            return np.full(X.shape[0], self.residual_weight_)
        return pd.Series(X[:, idx[-1]]).map(self.residual_weights_).fillna(self.residual_weight_).to_numpy(np.float64)

    def _fit_core(self, X: np.ndarray, target: np.ndarray,
                  w: np.ndarray | None) -> tuple[list[dict[float, float]], float, Any]:
        """Group offsets, overall offset and the residual regressor for one training set."""
        use_offsets = self.mode == "calibrated" or (self.group_columns is not None and self._baseline_index() is not None)
        levels: list[dict[float, float]] = []
        glob = 0.0
        if use_offsets:
            if self.calibration not in ("scale", "affine"):
                raise ValueError(f"calibration must be 'scale' or 'affine', got {self.calibration!r}")
            glob = float(np.average(target, weights=w))
            base = X[:, self._baseline_index()] if self._baseline_index() is not None else np.zeros(len(target))
            for level, j in enumerate(self._group_indices()):
                col = X[:, j]
                frame = pd.DataFrame({"g": col, "t": target, "w": np.ones(len(col)) if w is None else w})
                frame = frame[np.isfinite(col)]
                sums = (frame.t * frame.w).groupby(frame.g).sum() / frame.w.groupby(frame.g).sum()
                table = {float(k): (float(v), 0.0) for k, v in sums.items() if np.isfinite(v)}
                if level == 0 and self.calibration == "affine":
                    for k in table:
                        m = col == k
                        fit = _affine_fit(base[m], target[m])
                        if fit is not None:
                            table[k] = fit
                levels.append(table)
        reg = None
        if self.mode in ("hybrid", "boosting"):
            reg = self._fit_one(X, target - self._offsets(X, levels, glob), w)
        return levels, glob, reg

    def _group_indices(self) -> list[int]:
        return [] if self.group_columns is None else self._indices(self.group_columns)

    def _offsets(self, X: np.ndarray, levels: list[dict[float, tuple[float, float]]], glob: float) -> np.ndarray:
        """Per-row log-space calibration: log(scale + overhead / baseline) of the row's group."""
        out = np.full(X.shape[0], np.nan)
        b = self._baseline_index()
        base = X[:, b] if b is not None else np.zeros(X.shape[0])
        for j, table in zip(self._group_indices(), levels):
            col = pd.Series(X[:, j])
            log_s = col.map({k: v[0] for k, v in table.items()}).to_numpy(dtype=np.float64)
            over = col.map({k: v[1] for k, v in table.items()}).to_numpy(dtype=np.float64)
            with np.errstate(over="ignore", invalid="ignore"):
                vals = np.where(over > 0, np.log(np.exp(log_s) + over * np.exp(-base)), log_s)
            fill = np.isnan(out) & ~np.isnan(vals)
            out[fill] = vals[fill]
        out[np.isnan(out)] = glob
        return out

    def _oof_parts(self, X: np.ndarray, target: np.ndarray, w: np.ndarray | None,
                   groups: npt.ArrayLike | None) -> tuple[np.ndarray | None, np.ndarray]:
        """Out-of-fold (offset, regressor) parts of the log prediction; (None, _) if folds can't be made."""
        n = len(target)
        zeros = np.zeros(n)
        if self.mode == "analytical":
            return zeros, zeros
        k = min(self.n_splits, n)
        if groups is None and n > _HOLDOUT_ROWS:
            # Large data: one split-conformal holdout costs one extra fit instead of k.
            te = np.random.default_rng(self.random_state).random(n) < 0.2
            splits = [(np.flatnonzero(~te), np.flatnonzero(te))]
        elif groups is not None:
            g = np.asarray(groups)
            k = min(k, len(np.unique(g)))
            if k < 2:
                return None, zeros
            splits = list(GroupKFold(n_splits=k).split(X, target, g))
        else:
            if k < 2:
                return None, zeros
            splits = list(KFold(n_splits=k, shuffle=True, random_state=self.random_state).split(X))
        return self._held_out_parts(splits, X, target, w)

    # -- prediction ------------------------------------------------------------------------------

    def _log_predict(self, X: np.ndarray) -> np.ndarray:
        b = self._baseline_index()
        base = X[:, b] if b is not None else np.zeros(X.shape[0])
        out = base + self._offsets(X, self.group_offsets_, self.offset_)
        if self.regressor_ is not None:
            out = out + self._weights(X) * self.regressor_.predict(X)
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
        if self.extrap_abs_log_errors_ is not None and self.extrapolation_mask_.any():
            cols = self.extrapolation_mask_
            outside = ((X[:, cols] > self.feature_max_[cols]) | (X[:, cols] < self.feature_min_[cols])).any(axis=1)
            q[outside] = self.interval_half_width(coverage, extrapolation=True)
        mid = self._log_predict(X)
        return np.exp(mid), np.exp(mid - q), np.exp(mid + q)

    def interval_half_width(self, coverage: float | None = None, extrapolation: bool = False) -> float:
        """Log-space half width of the conformal interval at ``coverage`` (default: ``self.coverage``),
        from the forward scores when ``extrapolation`` (and they exist)."""
        check_is_fitted(self)
        cov = self.coverage if coverage is None else coverage
        scores = self.oof_abs_log_errors_
        if extrapolation and self.extrap_abs_log_errors_ is not None:
            scores = self.extrap_abs_log_errors_
        if cov is None or scores is None or len(scores) == 0:
            return float("inf")
        scores = scores[np.isfinite(scores)]
        n = len(scores)
        rank = int(np.ceil((n + 1) * cov))
        return float(scores[rank - 1]) if rank <= n else float("inf")

    def out_of_domain(self, X: npt.ArrayLike) -> tuple[np.ndarray, list[list[int]]]:
        """Flag rows outside the training data: a domain column beyond its training range, or a value
        never seen in a categorical column (e.g. an unseen GPU or config value).

        Returns the flag per row and, per row, the indices of the offending columns.
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, ensure_all_finite="allow-nan", dtype=np.float64)
        bad = ((X < self.feature_min_) | (X > self.feature_max_)) & self.domain_mask_
        for j, vals in enumerate(self.discrete_values_):
            if vals is not None and len(vals):
                col = X[:, j]
                bad[:, j] |= np.isfinite(col) & ~np.isin(col, vals)
        bad &= np.isfinite(X)
        return bad.any(axis=1), [list(np.flatnonzero(r)) for r in bad]
