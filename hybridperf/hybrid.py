"""HybridRegressor: analytical baseline x exp(residual learned by gradient boosting in log space)."""
from __future__ import annotations

from typing import Any, Self

import numpy as np
import numpy.typing as npt
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.model_selection import GroupKFold, KFold
from sklearn.utils.validation import check_is_fitted, validate_data

__all__ = ["MODES", "HybridRegressor", "default_booster"]

MODES = ("hybrid", "analytical", "calibrated", "boosting")
_HOLDOUT_ROWS = 20_000  # above this, conformal scores come from one 20% holdout instead of k folds
_DISCRETE_MAX = 32  # a training column with at most this many distinct values is treated as categorical


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
    domain_columns : list of int or str, optional
        Columns whose training range defines the domain (default: all).
    categorical_columns : list of int or str, optional
        Columns whose training values are a closed set (GPU fields, config values): an unseen
        value is out of domain. Default: none.

    Attributes
    ----------
    regressor_ : fitted clone of ``regressor`` (``None`` in analytical/calibrated modes).
    offset_ : float, log-space scale fitted in calibrated mode (0 otherwise).
    oof_abs_log_errors_ : sorted out-of-fold |log(pred/measured)|, the conformal scores.
    feature_min_, feature_max_ : training range of each column (finite values).
    domain_mask_, categorical_mask_ : which columns the out-of-domain check uses.
    """

    def __init__(self, regressor: Any = None, baseline_column: int | str | None = None, mode: str = "hybrid",
                 coverage: float | None = 0.9, n_splits: int = 5, random_state: int | None = 0,
                 domain_columns: Any = None, categorical_columns: Any = None) -> None:
        self.regressor = regressor
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

    def _column_mask(self, columns: Any, default: bool) -> np.ndarray:
        if columns is None:
            return np.full(self.n_features_in_, default)
        names = list(getattr(self, "feature_names_in_", []))
        mask = np.zeros(self.n_features_in_, dtype=bool)
        for c in columns:
            if isinstance(c, str):
                if c not in names:
                    raise ValueError(f"column {c!r} is not a column of X")
                mask[names.index(c)] = True
            else:
                mask[int(c)] = True
        return mask

    def _fit_one(self, X: np.ndarray, target: np.ndarray, w: np.ndarray | None) -> Any:
        reg = clone(self.regressor) if self.regressor is not None else default_booster(self.random_state)
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
        self.offset_ = 0.0
        self.regressor_ = None
        if self.mode == "calibrated":
            self.offset_ = float(np.average(target, weights=w))
        elif self.mode in ("hybrid", "boosting"):
            self.regressor_ = self._fit_one(X, target, w)
        finite = np.where(np.isfinite(X), X, np.nan)
        with np.errstate(all="ignore"):
            self.feature_min_ = np.nanmin(np.where(np.isnan(finite), np.inf, finite), axis=0)
            self.feature_max_ = np.nanmax(np.where(np.isnan(finite), -np.inf, finite), axis=0)
        self.domain_mask_ = self._column_mask(self.domain_columns, default=True)
        self.categorical_mask_ = self._column_mask(self.categorical_columns, default=False)
        self.discrete_values_ = [np.unique(c[np.isfinite(c)]) if cat and len(np.unique(c[np.isfinite(c)])) <= _DISCRETE_MAX
                                 else None for c, cat in zip(X.T, self.categorical_mask_)]
        self.oof_abs_log_errors_ = self._oof_errors(X, target, w, groups) if self.coverage is not None else None
        return self

    def _oof_errors(self, X: np.ndarray, target: np.ndarray, w: np.ndarray | None,
                    groups: npt.ArrayLike | None) -> np.ndarray | None:
        n = len(target)
        if self.mode in ("analytical", "calibrated"):
            return np.sort(np.abs(target - self.offset_))
        k = min(self.n_splits, n)
        if groups is None and n > _HOLDOUT_ROWS:
            # Large data: one split-conformal holdout costs one extra fit instead of k.
            rng = np.random.default_rng(self.random_state)
            te = rng.random(n) < 0.2
            reg = self._fit_one(X[~te], target[~te], None if w is None else w[~te])
            return np.sort(np.abs(reg.predict(X[te]) - target[te]))
        if groups is not None:
            g = np.asarray(groups)
            k = min(k, len(np.unique(g)))
            if k < 2:
                return None
            splits = GroupKFold(n_splits=k).split(X, target, g)
        else:
            if k < 2:
                return None
            splits = KFold(n_splits=k, shuffle=True, random_state=self.random_state).split(X)
        oof = np.full(n, np.nan)
        for tr, te in splits:
            reg = self._fit_one(X[tr], target[tr], None if w is None else w[tr])
            oof[te] = reg.predict(X[te])
        return np.sort(np.abs(oof - target))

    # -- prediction ------------------------------------------------------------------------------

    def _log_predict(self, X: np.ndarray) -> np.ndarray:
        b = self._baseline_index()
        base = X[:, b] if b is not None else np.zeros(X.shape[0])
        if self.regressor_ is not None:
            return base + self.regressor_.predict(X)
        return base + self.offset_

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
        q = self.interval_half_width(coverage)
        mid = self._log_predict(X)
        return np.exp(mid), np.exp(mid - q), np.exp(mid + q)

    def interval_half_width(self, coverage: float | None = None) -> float:
        """Log-space half width of the conformal interval at ``coverage`` (default: ``self.coverage``)."""
        check_is_fitted(self)
        cov = self.coverage if coverage is None else coverage
        scores = self.oof_abs_log_errors_
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
