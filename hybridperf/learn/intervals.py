"""Split-conformal prediction intervals in log space: plain, and normalised Mondrian by kind of shift."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from hybridperf.arrays import BoolArray, FloatArray

__all__ = ["FLAGS", "INTERVALS_VERSION", "SHIFT_BANDS", "ConformalIntervals", "bin_keys", "conformal_half_width",
           "conformity_scores", "outside_training_range", "primary_shift", "shift_band",
           "with_fixed_sigma"]

# Size-extrapolation bands in log2 of the size factor: band 1 = (0, 1] (up to 2x beyond the trained
# sizes), band 2 = (1, 2], band 3 = (2, 3], band 4 = beyond 3 (8x); band 0 = inside the trained sizes.
SHIFT_BANDS = (1.0, 2.0, 3.0)
# Reasons that refine a bin (rows showing them are also scored in a bin of their own).
FLAGS = ("config", "defaulted", "regime")
# The layout of the bins (to_dict): version 2 keys bins by primary shift, size band and flag.
INTERVALS_VERSION = 2
_PRIMARIES = ("kernel", "gpu", "few", "seen")


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


def with_fixed_sigma(sigma: FloatArray, reasons: pd.DataFrame, unseen_gpu: float | None,
                     few_runs: float | None = None, beyond_sizes: float | None = None,
                     unseen_kernel: float | None = None) -> FloatArray:
    """``sigma`` with ``unseen_gpu`` for the rows whose main shift is a GPU never trained on, ``unseen_kernel``
    for those of a kernel never trained, ``few_runs`` for those of a GPU with few training runs and at least
    ``beyond_sizes`` for the other rows beyond the trained sizes (each unchanged where None). On a GPU or a
    kernel whose fields and ids it never saw the difficulty model extrapolates; on
    one with few runs it rests on a handful of residuals, which differ between the cross-fitted estimate a
    calibration score is divided by and the final one a prediction is; beyond the trained sizes it repeats the
    difficulty of the largest trained sizes, which says nothing of how far a prediction extrapolates (see
    ConformalIntervals)."""
    if unseen_gpu is None and few_runs is None and beyond_sizes is None and unseen_kernel is None:
        return sigma
    prim = primary_shift(reasons)
    if unseen_gpu is not None:
        sigma = np.where(prim == "gpu", unseen_gpu, sigma)
    if unseen_kernel is not None:
        sigma = np.where(prim == "kernel", unseen_kernel, sigma)
    if few_runs is not None:
        sigma = np.where(prim == "few", few_runs, sigma)
    if beyond_sizes is not None:
        beyond = (prim == "seen") & (shift_band(reasons["ood_size_factor"]) > 0)
        sigma = np.where(beyond, np.fmax(sigma, beyond_sizes), sigma)
    return sigma


def shift_band(size_factor: Any) -> np.ndarray:
    """The size band of each row from its ``ood_size_factor``: 0 inside the trained sizes, else 1-4
    by the log2 factor (:data:`SHIFT_BANDS`)."""
    shift = np.log2(np.maximum(np.asarray(size_factor, dtype=np.float64), 1.0))
    return np.where(shift > 1e-9, np.searchsorted(SHIFT_BANDS, shift) + 1, 0)


def primary_shift(reasons: pd.DataFrame) -> np.ndarray:
    """The main kind of shift of each row: ``kernel`` never trained, ``gpu`` never trained, ``few``
    training runs on its GPU, else ``seen``."""
    few = reasons["ood_few_runs"].to_numpy() > 0 if "ood_few_runs" in reasons else np.zeros(len(reasons), bool)
    return np.select([reasons["ood_kernel"].to_numpy(dtype=bool), reasons["ood_gpu"].to_numpy(dtype=bool), few],
                     ["kernel", "gpu", "few"], "seen")


def _flags(reasons: pd.DataFrame) -> dict[str, np.ndarray]:
    return {"config": (reasons["ood_config"] != "").to_numpy(),
            "defaulted": (reasons["ood_defaulted"] != "").to_numpy(),
            "regime": reasons["ood_regime"].to_numpy(dtype=bool)}


def bin_keys(reasons: pd.DataFrame, kernels: pd.Series) -> list[list[str]]:
    """The Mondrian bins each row belongs to: ``<primary>|<band>`` (:func:`primary_shift`,
    :func:`shift_band`), ``<primary>|<band>|<flag>`` and ``flag:<flag>`` for each flag of
    :data:`FLAGS` it shows, ``kernel:<name>`` inside the domain (seen, band 0) and ``kernel:<name>|<band>``
    beyond the sizes of a trained GPU (seen, band > 0)."""
    prim, band, flags = primary_shift(reasons), shift_band(reasons["ood_size_factor"]), _flags(reasons)
    names = kernels.astype(str).to_numpy()
    out = []
    for i in range(len(reasons)):
        main = f"{prim[i]}|{band[i]}"
        keys = [main] + [k for f in FLAGS if flags[f][i] for k in (f"{main}|{f}", f"flag:{f}")]
        if main == "seen|0":
            keys.append(f"kernel:{names[i]}")
        elif prim[i] == "seen":  # beyond a trained GPU's sizes: the kernel's own size curve
            keys.append(f"kernel:{names[i]}|{band[i]}")
        out.append(keys)
    return out


@dataclass(frozen=True, slots=True)
class ConformalIntervals:
    """Normalised Mondrian split-conformal intervals for log times (Papadopoulos et al. 2008; Vovk
    et al. 2005, Mondrian conformal prediction; Bostrom's crepes computes the per-bin quantiles).

    A score is |log(measured / predicted)| / sigma(x), sigma a learned difficulty (how large the
    error is where x lies). Scores come from held-out fits, each of a kind of distribution shift
    (:mod:`hybridperf.learn.uncertainty`), and each score is kept in the bins of :func:`bin_keys`
    of the reasons its row showed with respect to its fit's training rows; a row to predict is
    given the quantile of the bins of its own reasons with respect to the model's training rows:

    - its main bin ``<primary>|<band>``; across size bands the quantile is made non-decreasing, and
      beyond the largest band with scores it grows in proportion to the log2 size factor (from
      that band's median shift ``shift_ref``): the assumption that the error grows linearly with
      the distance from the trained sizes. So does the open last band (every factor over 8x) beyond its
      own median shift: on AIWC S2 its scores came from fits 8-9x out (tiny to small) and the rows to
      predict lay 32x out (small to medium). A primary without a scored band takes the seen rows'
      size curve (at least its own band-0 quantile);
    - raised to the quantile of ``<primary>|<band>|<flag>`` for each flag it shows (a config value never
      trained: inside the trained sizes only, see below) (the same curve over bands, but beyond its last
      scored band it grows as the main curve does, which is calibrated further out: fewer rows show a
      flag), else of the pooled ``flag:<flag>``, else (no
      held-out fit ever showed the flag) of the widest bin not about kernels; a primary without a
      band-0 bin takes that widest bin too (``few``: the ``gpu|0`` bin first; ``kernel``: the
      widest of all);
    - inside the domain, its kernel's bin ``kernel:<name>`` replaces ``seen|0`` where it has scores; beyond the
      sizes of a trained GPU, its kernel's bins ``kernel:<name>|<band>`` (the kernel's own forward scores) raise
      the pooled ``seen|<band>`` curve where one of them has scores and lies above it (the same curve over bands,
      beyond the kernel's last scored band growing as the pooled curve does), and never lower it. A kernel's
      forward fits can show that it extrapolates worse than the kernels pooled with it; that it extrapolates
      better they show only up to its own trained sizes. On fresh H200 and H100 runs beyond the recorded sizes
      (experiments/holdout_check.py, the default model) the kernels' own curves raised 90 % coverage from 76.8 /
      91.5 % to 79.7 / 93.8 % (bench-mb aside); letting them lower the pooled curve too dropped bench-mb's runs,
      whose forward fits were easy and whose fresh runs beyond were not, from 78 to 50 %. On NeuSight's 14
      elementwise, softmax and layernorm ops (S2), where the pooled curve already overcovers, the raise costs
      width: 90 % coverage 93.8-100 -> 94.4-100 %, interval score worse on all five GPUs (lowering too gave
      92.5-99.7 % at median hi/lo 1.2-2.0 instead of 1.5-4.4; experiments/intervals.py, neusight-ops S2).

    A bin counts when it holds at least ``min_bin`` scores; where ``seen|0`` does not, the root bin
    ``random`` (every random-fold score) stands in for it, however few its scores, and ``few|0`` (a
    GPU's own held-out runs) counts however few its scores too. ``difficulty`` predicts log sigma from
    the design-matrix columns ``difficulty_columns`` (None: sigma = 1): parameters, GPU fields and
    group ids, not the analytical terms, so that beyond the trained sizes (where trees are flat in
    the size columns) sigma is constant and the width grows with the size shift alone. A row on a GPU
    the model never trained on (primary ``gpu``) takes ``sigma_unseen_gpu`` instead, in calibration and
    in prediction, where it is set: the training rows' median difficulty. The difficulty model has never
    seen that GPU's fields, so its estimate there is an extrapolation (on NeuSight S6 it made the
    held-out GPU's intervals 4-131x wide where its errors were like the training GPUs'). Nor does the row's difficulty
    on the GPUs its kernel was trained on serve (their fields swapped in for the new GPU's, in calibration and in
    prediction alike), though it would keep a hard configuration's row on a new GPU from being narrower than on a
    trained one: how hard a configuration is inside the domain does not say how far a new GPU departs from it. The
    largest over the trained GPUs left 1 of NeuSight S6's 5 GPUs in the 85-95 % band at 90 % (5 of 5 with the
    median) and widened every interval score (Winkler 0.99-1.24 -> 1.12-1.51); their mean, 3 of 5 (the P100 95.1 %,
    the T4 84.7 %), Winkler better on two GPUs and worse on three; the Kernel Tuner convolution's S6 1 and 2 of 5
    in band against 2. A row of a kernel never
    trained (primary ``kernel``) takes ``sigma_unseen_kernel`` (the same median) for the same reason: the
    difficulty model has never seen its id or its parameters (the shipped default model gave the docs/own-kernel.md
    convolution on the A100 and the RTX A4000, 90th-percentile APE 183-329 %, intervals of hi/lo 40-166: the
    leave-kernel-out scores, most of them NeuSight GEMM's divided by its small in-domain difficulty, times the
    convolution's own, extrapolated; with the median, hi/lo 6.1 covering 61-68 %: that kernel is harder to predict
    than any of the nine the fits left out, whose 90 % quantiles of |log error| are 0.37-0.89). A row on a GPU
    with few training runs (primary ``few``) likewise takes ``sigma_few_runs`` (the same median): the
    difficulty model learns that GPU from a handful of residuals, so the cross-fitted difficulty that
    divides its calibration scores and the final one that scales its intervals disagree (CLBlast S4, RTX
    3060 laptop with 50 runs: normalised q90 14.8 in calibration against 3.2 on the test rows, though the
    raw errors' q90 were 0.27 and 0.29; 100 % coverage at hi/lo 18.7). A row of a trained GPU beyond the
    trained sizes (primary ``seen``, band > 0) takes at least ``sigma_beyond_sizes`` (the same median): there
    the difficulty model repeats the difficulty of the largest trained sizes, the easiest to predict inside
    the domain, which says nothing of how hard it is to extrapolate from them (NeuSight S2, A100 trained up to
    max(M, N, K) 512: a median sigma of 0.005 beyond 4x the sizes, where the 90 % quantile of the test rows'
    normalised scores was 40-51 against 6-29 calibrated; 44-62 % coverage in bands 2-3). At least, not
    instead: replacing every such row's difficulty by the median also narrowed the rows the difficulty model
    rated hard, and undercovered (P100 trained on 1,500 runs up to 384: 82 % at nominal 90 %, 35 % beyond
    4x, against 87 % and 58 % with the floor; tests/learn/test_interval_coverage.py).

    The ``config`` flag (a config value never trained) raises only rows inside the trained sizes. Beyond them
    its bins come from forward fits trained on the smallest sizes, where a tile first seen at a larger size
    is new in every sense, and they over-state the error of the final model's unseen configs: on NeuSight S2
    the flagged calibration scores' 90 % quantile was 4-10x the unflagged ones' in every band beyond the
    trained sizes, and the flagged test rows' 0.5-2x, on each of the five GPUs (P100: intervals up to 300x
    wide, 98.5 % coverage, Winkler 7.1 against 1.7 for a constant width).

    Nor does a configuration trained at no size (``ood_combination``, beyond the sizes only) refine a bin, for the
    same reason: as a flag raising its rows like the others it took NeuSight S2's A100 from 79.3 to 88.5 % at 90 %,
    but its bins held the forward fits' new combinations, every one of them of new values too on the A100 (71
    scores, normalised q90 45.5 against 4.5 unflagged), and grown with the size shift they gave the flagged rows
    a median hi/lo of 48 (A100) to 5.6e8 (P100) and interval scores 1.15 -> 7.46 (P100), 0.47 -> 1.18 (A100)
    (an ad hoc run of experiments/intervals.py). experiments/results/reason_errors.md shows how much worse the
    rows it names are predicted.

    A size between the trained ones (``ood_size_gap`` > 1: no training row had it) is named as a reason but keeps
    the in-domain width. Giving it the width of a row that far beyond the trained range (ramped in for small gaps)
    was measured on fresh H200 and H100 runs between the recorded sizes (datasets/*-cuda-holdout, 495 runs each;
    experiments/results/holdout_check.md): nominal 90 % coverage went 89.5 / 90.9 -> 91.7 / 92.5 % (the default
    model before matvec's wavefront count; 87.9 / 89.1 % now, unwidened), 74.1 / 92.5 -> 84.0 / 98.2 % (a model of
    each GPU's recording alone), and 80 % went from 3 of these 4 cases inside 75-85 % to none (TITAN V S1: 87.5 ->
    93.8 %); half that shift still left 2 of 4 at each level. Calibrating such rows instead by scores of their own
    (two more held-out fits, each holding out every other interior size of each kernel; a bin of the held-out rows
    that showed the gap, raised in proportion to log2 of the gap up to its median) mended the H200 model of its own
    recording (74.1 -> 89.3 % at 90 %, 63.2 -> 76.6 % at 80 %) but overcovered the rest: H100 92.5 -> 96.4 % and
    77.6 -> 88.3 %; the default model 89.5 / 90.9 -> 94.3 / 96.4 % and 81.2 / 84.2 -> 89.7 / 91.1 % (in band: 6 of
    these 8 before, 3 after). The rows that miss lie at regime knees between sampled sizes (the H200 reduction at
    2^23 between the L2-resident 2^22 and the DRAM-bound 2^24), which neither the distance nor a pooled bin tells
    from easy interpolations.
    """

    scores: Mapping[str, FloatArray]
    shift_ref: Mapping[str, float] = field(default_factory=dict)
    difficulty: Any = None
    difficulty_columns: tuple[int, ...] = ()
    min_bin: int = 30
    sigma_unseen_gpu: float | None = None
    sigma_few_runs: float | None = None
    sigma_beyond_sizes: float | None = None
    sigma_unseen_kernel: float | None = None
    # Per kernel, how often the model's predicted-fastest share of a group held its fastest held-out run
    # (:func:`hybridperf.learn.shortlist.held_out_hit_curves`): the odds `rank` states for its shortlist.
    # None: not measured (a model file written before them).
    shortlist_hits: Mapping[str, Mapping[str, Any]] | None = None
    # Per (kernel, GPU with few runs), how the model's predictions there combine with its predictions on the
    # kernel's well-trained GPUs (:mod:`hybridperf.learn.donors`), fitted on the same held-out fits as the bins.
    donor_stacks: Mapping[tuple[str, str], Any] = field(default_factory=dict)
    _cache: dict[Any, float] = field(default_factory=dict, compare=False, repr=False)

    def sigma(self, X: Any, reasons: pd.DataFrame | None = None) -> FloatArray:
        """The difficulty estimate of each row of the design matrix ``X`` (with the rows' out-of-domain
        ``reasons``: ``sigma_unseen_gpu`` for the rows of a GPU never trained on, ``sigma_unseen_kernel`` for those
        of a kernel never trained, ``sigma_few_runs`` for those of a GPU with few training runs and at least
        ``sigma_beyond_sizes`` for the other rows beyond the trained sizes, where set)."""
        n = X.shape[0]
        if self.difficulty is None:
            return np.ones(n)
        cols = list(self.difficulty_columns)  # only these columns: the design matrix has ~100
        Xd = (X.iloc[:, cols].to_numpy(dtype=np.float64) if isinstance(X, pd.DataFrame)
              else np.asarray(X, dtype=np.float64)[:, cols])
        sigma = np.exp(np.clip(self.difficulty.predict(Xd), -20.0, 20.0))
        if reasons is None:
            return sigma
        return with_fixed_sigma(sigma, reasons, self.sigma_unseen_gpu, self.sigma_few_runs, self.sigma_beyond_sizes,
                                self.sigma_unseen_kernel)

    def quantile(self, name: str, coverage: float, min_bin: int | None = None) -> float:
        """The normalised score quantile of one bin: inf when it has fewer than ``min_bin`` (default:
        the instance's) scores or too few for the coverage."""
        key = (name, coverage, min_bin)
        if key not in self._cache:
            s = self.scores.get(name)
            enough = s is not None and len(s) >= (self.min_bin if min_bin is None else min_bin)
            self._cache[key] = _bin_quantile(s, coverage) if enough else np.inf
        return self._cache[key]

    def measured(self, primary: str) -> bool:
        """Whether the held-out fits measured a primary shift (``kernel``, ``gpu``, ``few``, ``seen``): its
        bins (``<primary>|<band>[|<flag>]``) hold at least ``min_bin`` scores together."""
        return sum(len(v) for k, v in self.scores.items() if k.split("|")[0] == primary) >= self.min_bin

    def _widest(self, coverage: float, kernels: bool = False) -> float:
        """The widest bin's quantile, of every bin or (``kernels`` False) of those not about kernels."""
        names = [b for b in self.scores if kernels or not b.startswith("kernel")]
        finite = [q for q in (self.quantile(b, coverage) for b in names) if np.isfinite(q)]
        return max(finite) if finite else np.inf

    def _curve(self, prim: str, flag: str, shift: FloatArray, coverage: float, base: float,
               grow: Callable[[FloatArray], FloatArray] | None = None) -> FloatArray:
        """Quantiles of ``<prim>|<band>[|flag]`` at the log2 size shifts ``shift`` (> 0), non-decreasing
        in the shift, at least ``base``: constant within a band with scores (the largest up to it), linear
        from ``base`` below the first one, beyond the last one growing as ``grow`` (default: in
        proportion to the shift) from that band's median shift. NaN where no band has scores."""
        tail = f"|{flag}" if flag else ""
        n_bands = len(SHIFT_BANDS) + 1
        level = np.full(n_bands + 1, np.nan)  # index = band; NaN where no band up to it has scores
        refs = np.full(n_bands + 1, np.nan)
        running = base
        for b in range(1, n_bands + 1):
            q = self.quantile(f"{prim}|{b}{tail}", coverage)
            if np.isfinite(q):
                running = max(running, q)
                level[b] = running
                refs[b] = self.shift_ref.get(f"{prim}|{b}{tail}") or (b - 0.5)
            elif np.isfinite(level[b - 1]):
                level[b], refs[b] = level[b - 1], refs[b - 1]
        scored = np.flatnonzero(np.isfinite(refs))
        if not len(scored):
            return np.full(len(shift), np.nan)
        band = np.searchsorted(SHIFT_BANDS, shift) + 1
        first, last = scored[0], max(b for b in scored if self.quantile(f"{prim}|{b}{tail}", coverage) < np.inf)
        out = level[np.minimum(band, n_bands)].copy()
        below = band < first
        out[below] = base + (level[first] - base) * np.minimum(shift[below] / refs[first], 1.0)
        # Beyond the last band with scores, and inside the open last band beyond its scores' median shift
        # (band 4 holds every factor over 8x: scores from 9x fits say nothing of a row 32x out).
        beyond = (band > last) | ((band == n_bands) & (last == n_bands) & (shift > refs[last]))
        if beyond.any():
            g = (lambda x: x) if grow is None else grow
            ratio = g(shift[beyond]) / g(np.array([refs[last]]))[0]
            out[beyond] = level[last] * np.maximum(1.0, np.where(np.isfinite(ratio), ratio, shift[beyond] / refs[last]))
        return np.maximum(out, base)

    def _main(self, prim: str, kernel: str, band: np.ndarray, shift: FloatArray, coverage: float) -> FloatArray:
        if prim == "seen":
            q_kernel = self.quantile(f"kernel:{kernel}", coverage)
            base = q_kernel if np.isfinite(q_kernel) else self.quantile("seen|0", coverage)
            if not np.isfinite(base):  # the root: every random-fold score, however few (inf if too few for coverage)
                base = self.quantile("random", coverage, min_bin=1)
        else:
            # A GPU's few runs calibrate it however few they are (exchangeable with its other runs).
            base = self.quantile(f"{prim}|0", coverage, min_bin=1 if prim == "few" else None)
            if not np.isfinite(base):  # no held-out fit showed this shift: the widest bins we have
                base = self.quantile("gpu|0", coverage) if prim == "few" else np.inf
                base = base if np.isfinite(base) else self._widest(coverage, kernels=prim == "kernel")
        q = np.full(len(band), base)
        far = band > 0
        if far.any():
            curve = self._curve(prim, "", shift[far], coverage, base)
            if prim == "seen":
                curve = self._kernel_curve(kernel, shift[far], coverage, base, curve)
            if np.isnan(curve).any() and prim != "seen":
                curve = np.fmax(curve, self._curve("seen", "", shift[far], coverage, base))
            if np.isnan(curve).any():  # no forward fit at all: assume the error grows as base x (1 + shift)
                curve = np.where(np.isnan(curve), base * (1.0 + shift[far]), curve)
            q[far] = curve
        return q

    def _kernel_curve(self, kernel: str, shift: FloatArray, coverage: float, base: float,
                      pooled: FloatArray) -> FloatArray:
        """Beyond a trained GPU's sizes, ``pooled`` raised to the curve of the kernel's own bins
        ``kernel:<name>|<band>`` where one of them holds enough scores (beyond its last such band growing as the
        pooled ``seen`` curve does, which is calibrated further out); never lowered (see the class docstring)."""
        seen = lambda x: self._curve("seen", "", x, coverage, 0.0)  # noqa: E731
        own = self._curve(f"kernel:{kernel}", "", shift, coverage, base, grow=seen)
        return np.fmax(pooled, own)

    def _flagged(self, prim: str, flag: str, band: np.ndarray, shift: FloatArray, coverage: float) -> FloatArray:
        base = self.quantile(f"{prim}|0|{flag}", coverage)
        q = np.full(len(band), base)
        far = band > 0
        if far.any():  # beyond its own bands a flag keeps its excess over the main curve, which reaches further
            main = lambda x: self._curve(prim, "", x, coverage, 0.0)  # noqa: E731
            q[far] = self._curve(prim, flag, shift[far], coverage, base if np.isfinite(base) else 0.0, grow=main)
        pooled = self.quantile(f"flag:{flag}", coverage)
        fallback = pooled if np.isfinite(pooled) else self._widest(coverage)
        return np.where(np.isfinite(q) & (q > 0), q, fallback)

    @staticmethod
    def _groups(reasons: pd.DataFrame, kernels: np.ndarray) -> tuple[list[tuple[str, str, np.ndarray]],
                                                                     list[tuple[str, str, np.ndarray]],
                                                                     FloatArray, np.ndarray]:
        """The rows of each (primary shift, kernel) and of each (primary shift, flag), the log2 size shift
        and the size band of every row: what :meth:`_quantiles` needs at every level, found once."""
        prim = np.asarray(primary_shift(reasons), dtype=object)
        shift = np.log2(np.maximum(reasons["ood_size_factor"].to_numpy(dtype=np.float64), 1.0))
        band = shift_band(reasons["ood_size_factor"])
        flags = _flags(reasons)
        pcodes, prims = pd.factorize(prim)
        kcodes, knames = pd.factorize(np.asarray(kernels, dtype=object))
        nk = max(len(knames), 1)
        pair = pcodes.astype(np.int64) * nk + kcodes  # one code per (primary, kernel)
        main = [(str(prims[c // nk]), str(knames[c % nk]), np.flatnonzero(pair == c)) for c in pd.unique(pair)]
        flagged = []
        for i, p in enumerate(prims):
            mp = np.flatnonzero(pcodes == i)
            flagged += [(str(p), f, mp[flags[f][mp]]) for f in FLAGS if flags[f][mp].any()]
        return main, flagged, shift, band

    def _quantiles(self, groups: tuple[Any, Any, FloatArray, np.ndarray], coverage: float) -> FloatArray:
        """The normalised score quantile of each row (see the class docstring), from :meth:`_groups`."""
        main, flagged, shift, band = groups
        q = np.empty(len(shift))
        for p, kernel, m in main:
            q[m] = self._main(p, kernel, band[m], shift[m], coverage)
        for p, f, m in flagged:  # after every main quantile of the shift: the flags raise it
            if f == "config":  # inside the trained sizes only (see the class docstring)
                m = m[band[m] == 0]
            if len(m):
                q[m] = np.fmax(q[m], self._flagged(p, f, band[m], shift[m], coverage))
        return q

    def half_width(self, X: Any, reasons: pd.DataFrame, kernels: pd.Series, coverage: float) -> FloatArray:
        """Log-space half widths of the rows of ``X`` whose out-of-domain ``reasons`` (the columns of
        :func:`hybridperf.learn.domain.out_of_domain`) say which shifts apply."""
        return self.widths(X, reasons, kernels, coverage, ())[0]

    def half_widths(self, X: Any, reasons: pd.DataFrame, kernels: pd.Series, levels: Sequence[float]) -> FloatArray:
        """:meth:`half_width` at each coverage of ``levels``: one column per level, the difficulty
        estimated once. Non-decreasing along a row for increasing ``levels``."""
        return self.widths(X, reasons, kernels, None, levels)[1]

    def widths(self, X: Any, reasons: pd.DataFrame, kernels: pd.Series, coverage: float | None,
               levels: Sequence[float]) -> tuple[FloatArray | None, FloatArray]:
        """(:meth:`half_width` at ``coverage``, or None; :meth:`half_widths` at ``levels``), from one pass
        over the rows' bins and one difficulty estimate."""
        names = kernels.astype(str).to_numpy()
        order = np.argsort(np.asarray(levels, dtype=np.float64))
        q = np.empty((len(names), len(order)))
        groups = self._groups(reasons, names)
        for j in order:
            q[:, j] = self._quantiles(groups, levels[j])
        if len(order):
            q[:, order] = np.maximum.accumulate(q[:, order], axis=1)
        sigma = self.sigma(X, reasons)
        half = None if coverage is None else self._quantiles(groups, coverage) * sigma
        return half, q * sigma[:, None]

    def to_dict(self) -> dict[str, Any]:
        """The scores per bin and the difficulty booster as JSON values (for the model file)."""
        from hybridperf.learn.donors import stacks_to_dict
        from hybridperf.learn.persist import booster_to_json, encode_array

        return {"version": INTERVALS_VERSION, "scores": {k: encode_array(v) for k, v in sorted(self.scores.items())},
                "shift_ref": {k: float(v) for k, v in sorted(self.shift_ref.items())}, "min_bin": self.min_bin,
                "difficulty": booster_to_json(self.difficulty), "difficulty_columns": list(self.difficulty_columns),
                "sigma_unseen_gpu": self.sigma_unseen_gpu, "sigma_few_runs": self.sigma_few_runs,
                "sigma_beyond_sizes": self.sigma_beyond_sizes, "sigma_unseen_kernel": self.sigma_unseen_kernel,
                **({} if self.shortlist_hits is None else {"shortlist_hits": {
                    k: {**{f: [float(x) for x in v[f]] for f in ("q", "p", "groups")},
                        **({} if v.get("rho") is None else {"rho": float(v["rho"])})}
                    for k, v in sorted(self.shortlist_hits.items())}}),
                **({} if not self.donor_stacks else {"donor_stacks": stacks_to_dict(self.donor_stacks)})}

    @classmethod
    def from_dict(cls, doc: Any, n_features: int) -> ConformalIntervals:
        """The intervals :meth:`to_dict` described (a ModelFileError if malformed or of an older layout)."""
        from hybridperf.learn.donors import stacks_from_dict
        from hybridperf.learn.persist import ModelFileError, booster_from_json, decode_array

        if not isinstance(doc, dict) or not isinstance(doc.get("scores"), dict):
            raise ModelFileError("model file intervals are malformed; retrain the model")
        if doc.get("version") != INTERVALS_VERSION:
            raise ModelFileError("model file intervals use an older layout of calibration bins; retrain the model")
        scores = {str(k): decode_array(v, f"intervals.scores.{k}") for k, v in doc["scores"].items()}
        refs = doc.get("shift_ref", {})
        if not isinstance(refs, dict) or not all(isinstance(v, (int, float)) and np.isfinite(v) for v in refs.values()):
            raise ModelFileError("model file intervals hold malformed shift_ref values; retrain the model")
        cols = doc.get("difficulty_columns", [])
        if not isinstance(cols, list) or not all(isinstance(c, int) and 0 <= c < n_features for c in cols):
            raise ModelFileError("model file intervals name difficulty columns outside the features; retrain it")
        difficulty = None if doc.get("difficulty") is None else booster_from_json(doc["difficulty"], len(cols))
        fixed = {}
        for key in ("sigma_unseen_gpu", "sigma_few_runs", "sigma_beyond_sizes", "sigma_unseen_kernel"):
            v = doc.get(key)  # absent in files written before it: the row's own difficulty
            if v is not None and not (isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < np.inf):
                raise ModelFileError(f"model file intervals hold a malformed {key}; retrain the model")
            fixed[key] = None if v is None else float(v)
        return cls(scores=scores, shift_ref={str(k): float(v) for k, v in refs.items()}, difficulty=difficulty,
                   difficulty_columns=tuple(cols), min_bin=int(doc.get("min_bin", 30)),
                   shortlist_hits=None if "shortlist_hits" not in doc else _shortlist_hits(doc["shortlist_hits"]),
                   donor_stacks=stacks_from_dict(doc.get("donor_stacks", [])), **fixed)


def _shortlist_hits(doc: Any) -> dict[str, dict[str, Any]]:
    """The ``shortlist_hits`` of a model file, checked."""
    from hybridperf.learn.persist import ModelFileError

    if not isinstance(doc, dict):
        raise ModelFileError("model file intervals hold malformed shortlist_hits; retrain the model")
    out = {}
    for kernel, curve in doc.items():
        try:
            q, p, n = (np.asarray(curve[f], dtype=np.float64) for f in ("q", "p", "groups"))
        except (KeyError, TypeError, ValueError):
            raise ModelFileError(f"model file shortlist_hits of {kernel!r} are malformed; retrain the model") from None
        ok = (q.ndim == 1 and 0 < len(q) == len(p) == len(n) and np.all(np.isfinite(q) & np.isfinite(p))
              and np.all((q > 0) & (q <= 1) & (p >= 0) & (p <= 1)) and np.all(np.diff(q) > 0)
              and np.all(np.diff(p) >= 0))
        if not ok:
            raise ModelFileError(f"model file shortlist_hits of {kernel!r} are not increasing shares with "
                                 "non-decreasing chances in [0, 1]; retrain the model")
        out[str(kernel)] = {"q": q.tolist(), "p": p.tolist(), "groups": n.tolist()}
        if "rho" in curve:  # absent in files written before it: rank then reads the curve as measured
            rho = curve["rho"]
            if isinstance(rho, bool) or not isinstance(rho, (int, float)) or not -1 < rho < 1:
                raise ModelFileError(f"model file shortlist_hits of {kernel!r} hold an order correlation rho "
                                     f"outside (-1, 1): {rho!r}; retrain the model")
            out[str(kernel)]["rho"] = float(rho)
    return out


def _bin_quantile(scores: FloatArray | None, coverage: float) -> float:
    # crepes' ConformalRegressor gives the finite-sample conformal quantile of normalised scores
    # (an interval y_hat +- q for y_hat = 0, sigma = 1); too few scores for the coverage give inf.
    if scores is None or len(scores) == 0:
        return float("inf")
    import warnings

    from crepes import ConformalRegressor

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "too few calibration examples": reported as inf here
        interval = ConformalRegressor().fit(np.asarray(scores)).predict_int(np.zeros(1), confidence=coverage)
    return float(interval[0, 1])
