"""Split-conformal prediction intervals in log space: plain, and normalised Mondrian by kind of shift."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from hybridperf.arrays import BoolArray, FloatArray

__all__ = ["SHIFT_BANDS", "ConformalIntervals", "conformal_half_width", "conformity_scores", "outside_training_range"]

# Size-extrapolation bands in log2 of the size factor: (0, 1] = up to 2x beyond the trained sizes, ...
SHIFT_BANDS = (1.0, 2.0, 3.0)


def conformity_scores(log_errors: FloatArray) -> FloatArray:
    """Sorted finite absolute log errors (the conformity scores)."""
    scores = np.abs(np.asarray(log_errors, dtype=np.float64))
    return np.sort(scores[np.isfinite(scores)])


def conformal_half_width(scores: FloatArray | None, coverage: float | None) -> float:
    """Log-space half width of the split-conformal interval at ``coverage``: the ceil((n + 1) x
    coverage)-th smallest score (Vovk et al. 2005; Lei et al., JASA 2018); inf when undefined."""
    if coverage is None or scores is None or len(scores) == 0:
        return float("inf")
    scores = scores[np.isfinite(scores)]
    n = len(scores)
    rank = int(np.ceil((n + 1) * coverage))
    return float(scores[rank - 1]) if rank <= n else float("inf")


def outside_training_range(X: FloatArray, mask: BoolArray, low: FloatArray, high: FloatArray) -> BoolArray:
    """Rows whose value in any ``mask`` column lies outside that column's training [low, high]."""
    if not mask.any():
        return np.zeros(X.shape[0], dtype=bool)
    cols = mask
    return ((X[:, cols] > high[cols]) | (X[:, cols] < low[cols])).any(axis=1)


@dataclass(frozen=True, slots=True)
class ConformalIntervals:
    """Normalised Mondrian split-conformal intervals for log times (Papadopoulos et al. 2008; Vovk
    et al. 2005, Mondrian conformal prediction; Boström's crepes computes the per-bin quantiles).

    A score is |log(measured / predicted)| / sigma(x), sigma a learned difficulty (how large the
    error is where x lies). Scores are kept per Mondrian bin, each a kind of distribution shift
    seen during training by held-out fits: ``interp`` (random folds; ``kernel:<name>`` per kernel),
    ``shift:<band>`` (size extrapolation: each size band predicted from the smaller ones, banded by
    the log2 size factor, see :data:`SHIFT_BANDS`), ``gpu`` (leave-GPU-out fits), ``kernel``
    (leave-kernel-out fits), ``config`` (a config value unseen in the fold's training rows),
    ``defaulted`` (config left to defaults) and ``regime`` (an analytical regime unseen in the fold).
    A row's half width is sigma(x) times the largest quantile over the bins of the shifts it shows,
    so it widens with every reason it lies outside the training data.

    ``difficulty`` predicts log sigma from the design-matrix columns ``difficulty_columns`` (None:
    sigma = 1): the parameters, GPU fields and group ids, not the analytical terms, so that beyond
    the trained sizes (where trees are flat in the size columns) sigma is constant and the width
    grows with the size shift alone.
    """

    scores: Mapping[str, FloatArray]
    difficulty: Any = None
    difficulty_columns: tuple[int, ...] = ()
    min_bin: int = 30
    _cache: dict[Any, float] = field(default_factory=dict, compare=False, repr=False)

    def sigma(self, X: Any) -> FloatArray:
        """The difficulty estimate of each row of the design matrix ``X``."""
        n = X.shape[0]
        if self.difficulty is None:
            return np.ones(n)
        Xd = np.asarray(X, dtype=np.float64)[:, list(self.difficulty_columns)]
        return np.exp(np.clip(self.difficulty.predict(Xd), -20.0, 20.0))

    def quantile(self, name: str, coverage: float) -> float:
        """The normalised score quantile of one bin (inf when it has too few scores)."""
        key = (name, coverage)
        if key not in self._cache:
            self._cache[key] = _bin_quantile(self.scores.get(name), coverage)
        return self._cache[key]

    def _base(self, kernel: str, coverage: float) -> float:
        q = self.quantile(f"kernel:{kernel}", coverage)
        return q if len(self.scores.get(f"kernel:{kernel}", ())) >= self.min_bin and np.isfinite(q) else \
            self.quantile("interp", coverage)

    def _widest(self, coverage: float) -> float:
        finite = [q for q in (self.quantile(b, coverage) for b in self.scores) if np.isfinite(q)]
        return max(finite) if finite else float("inf")

    def _calibrated(self, name: str, coverage: float) -> float | None:
        q = self.quantile(name, coverage)
        return q if len(self.scores.get(name, ())) >= self.min_bin and np.isfinite(q) else None

    def _shift(self, shift: FloatArray, coverage: float, base: float) -> FloatArray:
        """Quantiles for size shifts (log2 of the size factor), non-decreasing in the shift: each
        band at least the bands below it; beyond the largest calibrated band, growing linearly in the
        shift at the rate seen up to that band. Without any calibrated band (training had too few
        sizes for forward fits) the quantile is assumed to grow as base x (1 + shift)."""
        n_bands = len(SHIFT_BANDS) + 1
        levels, edges, level, edge = np.empty(n_bands), np.empty(n_bands), base, 0.0
        for band in range(1, n_bands + 1):
            qb = self._calibrated(f"shift:{band}", coverage)
            if qb is not None:
                level = max(level, qb)
                edge = SHIFT_BANDS[band - 1] if band <= len(SHIFT_BANDS) else SHIFT_BANDS[-1] + 1.0
            levels[band - 1], edges[band - 1] = level, edge
        if edge == 0.0:
            return base * (1.0 + shift)
        first = int(np.argmax(edges > 0))  # below the first calibrated band: linear from base up to it
        k = np.searchsorted(SHIFT_BANDS, shift)
        lv, ed = levels[k], edges[k]
        with np.errstate(divide="ignore", invalid="ignore"):
            grow = np.where((ed > 0) & (shift > ed), np.maximum(0.0, (lv - base) / ed) * (shift - ed), 0.0)
            below = base + (levels[first] - base) / edges[first] * shift
        return np.maximum(np.where(ed > 0, lv + grow, below), base)

    def _quantiles(self, reasons: pd.DataFrame, kernels: np.ndarray, coverage: float) -> FloatArray:
        """The normalised score quantile of each row: its kernel's (or the shift's), raised by each reason."""
        shift = np.log2(np.maximum(reasons["ood_size_factor"].to_numpy(dtype=np.float64), 1.0))
        q = np.empty(len(kernels))
        for kernel in np.unique(kernels):
            m = kernels == kernel
            base = self._base(kernel, coverage)
            q[m] = np.where(shift[m] > 1e-9, self._shift(shift[m], coverage, base), base)
        widest = self._widest(coverage)
        flags = {"gpu": reasons["ood_gpu"], "kernel": reasons["ood_kernel"], "config": reasons["ood_config"] != "",
                 "defaulted": reasons["ood_defaulted"] != "", "regime": reasons["ood_regime"]}
        for name, flag in flags.items():
            qb = self._calibrated(name, coverage)
            # A shift no held-out fit could calibrate (e.g. a GPU when training had one): the widest we have.
            q = np.where(flag.to_numpy(dtype=bool), np.maximum(q, widest if qb is None else qb), q)
        return q

    def half_width(self, X: Any, reasons: pd.DataFrame, kernels: pd.Series, coverage: float) -> FloatArray:
        """Log-space half widths of the rows of ``X`` whose out-of-domain ``reasons`` (the columns of
        :func:`hybridperf.learn.domain.out_of_domain`) say which shifts apply."""
        return self.half_widths(X, reasons, kernels, (coverage,))[:, 0]

    def half_widths(self, X: Any, reasons: pd.DataFrame, kernels: pd.Series, levels: Sequence[float]) -> FloatArray:
        """:meth:`half_width` at each coverage of ``levels``: one column per level, the difficulty
        estimated once. Non-decreasing along a row for increasing ``levels``."""
        names = kernels.astype(str).to_numpy()
        order = np.argsort(np.asarray(levels, dtype=np.float64))
        q = np.empty((len(names), len(order)))
        for j in order:
            q[:, j] = self._quantiles(reasons, names, levels[j])
        if len(order):
            q[:, order] = np.maximum.accumulate(q[:, order], axis=1)
        return q * self.sigma(X)[:, None]

    def to_dict(self) -> dict[str, Any]:
        """The scores per bin and the difficulty booster as JSON values (for the model file)."""
        from hybridperf.learn.persist import booster_to_json, encode_array

        return {"scores": {k: encode_array(v) for k, v in sorted(self.scores.items())}, "min_bin": self.min_bin,
                "difficulty": booster_to_json(self.difficulty), "difficulty_columns": list(self.difficulty_columns)}

    @classmethod
    def from_dict(cls, doc: Any, n_features: int) -> ConformalIntervals:
        """The intervals :meth:`to_dict` described (a ModelFileError if malformed)."""
        from hybridperf.learn.persist import ModelFileError, booster_from_json, decode_array

        if not isinstance(doc, dict) or not isinstance(doc.get("scores"), dict):
            raise ModelFileError("model file intervals are malformed; retrain the model")
        scores = {str(k): decode_array(v, f"intervals.scores.{k}") for k, v in doc["scores"].items()}
        cols = doc.get("difficulty_columns", [])
        if not isinstance(cols, list) or not all(isinstance(c, int) and 0 <= c < n_features for c in cols):
            raise ModelFileError("model file intervals name difficulty columns outside the features; retrain it")
        difficulty = None if doc.get("difficulty") is None else booster_from_json(doc["difficulty"], len(cols))
        return cls(scores=scores, difficulty=difficulty, difficulty_columns=tuple(cols),
                   min_bin=int(doc.get("min_bin", 30)))


def _bin_quantile(scores: FloatArray | None, coverage: float) -> float:
    # crepes' ConformalRegressor gives the finite-sample conformal quantile of normalised scores
    # (an interval y_hat +- q for y_hat = 0, sigma = 1); an empty or too small bin gives inf.
    if scores is None or len(scores) == 0:
        return float("inf")
    import warnings

    from crepes import ConformalRegressor

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "too few calibration examples": reported as inf here
        interval = ConformalRegressor().fit(np.asarray(scores)).predict_int(np.zeros(1), confidence=coverage)
    return float(interval[0, 1])
