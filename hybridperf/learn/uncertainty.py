"""Calibrating the product's intervals: held-out residuals for each kind of shift, a difficulty model, bins."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupKFold, KFold

from hybridperf.learn.baseline import BASELINE_COLUMN
from hybridperf.learn.booster import set_prediction_threads
from hybridperf.learn.domain import out_of_domain, training_domain
from hybridperf.learn.donors import DonorStack, few_run_pairs, fit_donor_stack
from hybridperf.learn.folds import Split, forward_splits
from hybridperf.learn.intervals import ConformalIntervals, bin_keys, with_fixed_sigma
from hybridperf.learn.shortlist import held_out_hit_curves
from hybridperf.sweep import param_columns, size_metric

__all__ = ["CALIBRATION_ROWS", "DIFFICULTY_PREFIXES", "FEW_RUNS_PARTITIONS", "FEW_RUNS_REPEAT_BELOW",
           "calibration_residuals", "fit_difficulty", "fit_intervals", "frontier_gap"]

# Training rows used at most by each calibration fit (a seeded sample above it): calibration needs
# representative errors, not the last bit of accuracy, and training must stay fast.
CALIBRATION_ROWS = 40_000
# The design-matrix columns the difficulty model reads (see ConformalIntervals): parameters, GPU fields, group ids.
DIFFICULTY_PREFIXES = ("size.", "log2_size.", "config.", "gpu_", "id_")
_MIN_DIFFICULTY_ROWS = 50
_MAX_SKIP = 3  # forward fits predict the largest size band from the bands up to 1, 2 or 3 below it
# Frontier fits train on the rows at least 2x (4x) below their kernel's largest trained value in every size
# parameter and predict the rest: size shifts measured as the size factor of the reasons measures them.
_FRONTIER_STEPS = (1.0,)
# A GPU with few runs (under FEW_RUNS_REPEAT_BELOW of them) is held out in FEW_RUNS_PARTITIONS different 5-fold
# partitions of its runs, and its bin ``few|0`` keeps one of each run's scores, its partition drawn at random
# (_one_score_per_run). With one partition the bin's quantile swung with the split: CLBlast S4, RTX 2080 Ti with
# 50 runs, 59 scores: q90 6.74 / 9.26 / 8.34 from fold seeds 0 / 1 / 2 (the test rows' own 9.37), each fold's fit
# setting that GPU's level from its 40 other runs, so a fold's scores move together. More runs set the level
# steadily and need no repeats (they would add fits: 5 per partition).
FEW_RUNS_PARTITIONS = 3
FEW_RUNS_REPEAT_BELOW = 200
# A donor stack's calibration scores leave out the run they score (_donor_stacks); a GPU with more runs than this
# leaves out one of this many folds of them instead, so that scoring costs this many stack fits, not one per run.
_STACK_SCORE_FOLDS = 50


def _difficulty_model(random_state: int) -> Any:
    from xgboost import XGBRegressor

    return XGBRegressor(n_estimators=150, max_depth=4, learning_rate=0.1, subsample=0.8, min_child_weight=5.0,
                        tree_method="hist", random_state=random_state, n_jobs=1)


def fit_difficulty(X: np.ndarray, residual: np.ndarray, random_state: int = 0) -> tuple[Any, np.ndarray]:
    """A model of log |residual| (the difficulty, Papadopoulos et al. 2008) and cross-fitted
    difficulties of every row of ``X`` (each half predicted by a model fitted on the other half, so a
    calibration score is never normalised by a model that saw it). (None, ones) with too few residuals."""
    ok = np.flatnonzero(np.isfinite(residual))
    if len(ok) < _MIN_DIFFICULTY_ROWS:
        return None, np.ones(X.shape[0])
    target = np.log(np.abs(residual[ok]) + 1e-3)
    half = np.random.default_rng(random_state).random(len(ok)) < 0.5
    a = _difficulty_model(random_state).fit(X[ok[half]], target[half])
    b = _difficulty_model(random_state).fit(X[ok[~half]], target[~half])
    pa, pb = a.predict(X), b.predict(X)
    cross = (pa + pb) / 2  # rows that were not held out: both halves are independent of them
    cross[ok[half]] = pb[ok[half]]
    cross[ok[~half]] = pa[ok[~half]]
    final = _difficulty_model(random_state).fit(X[ok], target)
    set_prediction_threads(final, None)  # every core, as its loaded copy (fitted on 1: sigma took 2x as long)
    return final, np.exp(np.clip(cross, -20.0, 20.0))


def _cap(tr: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return np.sort(rng.choice(tr, CALIBRATION_ROWS, replace=False)) if len(tr) > CALIBRATION_ROWS else tr


def _group_splits(labels: np.ndarray, rng: np.random.Generator) -> list[Split]:
    """Leave-group-out splits (at most 5 folds), at most CALIBRATION_ROWS training rows each."""
    n_groups = len(np.unique(labels))
    if n_groups < 2:
        return []
    folds = GroupKFold(n_splits=min(5, n_groups)).split(np.zeros((len(labels), 1)), None, labels)
    return [(_cap(tr, rng), te) for tr, te in folds]


def _few_runs_splits(rows: pd.DataFrame, rng: np.random.Generator, partition: int = 0) -> list[Split]:
    """Where a GPU has few runs of a kernel (:func:`hybridperf.learn.donors.few_run_pairs`): 5 folds over those runs,
    each predicted by a fit on every other row (its other runs kept, the rest capped), so that the
    GPU's own held-out runs calibrate it (exchangeable with its other runs, unlike any other GPU's).
    ``partition`` seeds the folds; partitions after the first (see :data:`FEW_RUNS_PARTITIONS`) cover only the
    GPUs with fewer than :data:`FEW_RUNS_REPEAT_BELOW` such runs."""
    out: list[Split] = []
    kernels, gpus = rows["kernel"].astype(str).to_numpy(), rows["gpu"].astype(str).to_numpy()
    for kernel, gpu, mine, _ in few_run_pairs(kernels, gpus):
        if partition > 0 and len(mine) >= FEW_RUNS_REPEAT_BELOW:
            continue
        others = np.flatnonzero(~((kernels == kernel) & (gpus == gpu)))
        for _, te in KFold(n_splits=5, shuffle=True, random_state=partition).split(mine):
            keep = np.setdiff1d(mine, mine[te])
            room = max(CALIBRATION_ROWS - len(keep), 0)
            rest = rng.choice(others, room, replace=False) if len(others) > room else others
            out.append((np.union1d(rest, keep), mine[te]))
    return out


def _size_bands(rows: pd.DataFrame, groups: np.ndarray | None) -> np.ndarray | None:
    """Ordered size bands: the fit's groups, else each distinct size (two to five of them, e.g. size classes)."""
    if groups is not None:
        return np.asarray(groups, dtype=np.float64)
    if not param_columns(rows, "size."):
        return None
    size = size_metric(rows)
    uniq = np.unique(size[np.isfinite(size)])
    return np.searchsorted(uniq, size).astype(np.float64) if 2 <= len(uniq) <= 5 else None


def _forward_top_splits(bands: np.ndarray | None, rng: np.random.Generator) -> list[tuple[int, Split]]:
    """The largest size band predicted from the bands up to 1, 2, ... :data:`_MAX_SKIP` below it, as
    (skip, split): the forward fits whose training rows are most like the model's (they extrapolate
    from the largest sizes), so their errors are the closest measure of the model's beyond its sizes."""
    if bands is None:
        return []
    uniq = np.unique(bands[np.isfinite(bands)])
    out = []
    for skip in range(1, min(_MAX_SKIP, len(uniq) - 1) + 1):
        tr = np.flatnonzero(bands <= uniq[-1 - skip])
        if len(tr) >= 20:
            out.append((skip, (_cap(tr, rng), np.flatnonzero(bands == uniq[-1]))))
    return out


def frontier_gap(rows: pd.DataFrame) -> np.ndarray | None:
    """log2 of how far each row lies below its kernel's largest training value in the size parameter
    where it is closest to it (0 at the frontier, -inf with no varying size); None without sizes.
    Parameters constant within a kernel (e.g. a batch of 1) do not count."""
    cols = param_columns(rows, "size.")
    if not cols:
        return None
    v = rows[cols].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        logv = pd.DataFrame(np.where(v > 0, np.log2(v), np.nan))
    by = logv.groupby(rows["kernel"].astype(str).to_numpy())
    top, low = by.transform("max").to_numpy(), by.transform("min").to_numpy()
    diff = np.where(np.isfinite(logv.to_numpy()) & (top > low), logv.to_numpy() - top, -np.inf)
    return diff.max(axis=1)


def _frontier_splits(rows: pd.DataFrame, rng: np.random.Generator) -> list[Split]:
    """Per step of :data:`_FRONTIER_STEPS`: the rows ``step`` (log2) or more below the frontier in every
    size (:func:`frontier_gap`) predict the others, which lie up to 2**step beyond their fit's sizes in the
    largest of their sizes, as the size factor measures it (unlike the size bands of the forward fits,
    which order rows by one size metric). At least 20 training rows."""
    gap = frontier_gap(rows)
    if gap is None:
        return []
    out = []
    for step in _FRONTIER_STEPS:
        tr, te = np.flatnonzero(gap <= -step), np.flatnonzero(gap > -step)
        if len(tr) >= 20 and len(te):
            out.append((_cap(tr, rng), te))
    return out


def _reasons(rows: pd.DataFrame, regimes: np.ndarray, tr: np.ndarray, te: np.ndarray,
             size_cols: Mapping[str, tuple[str, ...]] | None) -> pd.DataFrame:
    return out_of_domain(rows.iloc[te], training_domain(rows.iloc[tr], regimes[tr], size_cols), regimes[te])


def _reused_forward(est: Any, groups: np.ndarray | None) -> np.ndarray | None:
    """The estimator's own forward log predictions, whose last split is the largest band predicted
    from the bands below it (the skip-1 fit of :func:`_forward_top_splits`); None if it made none."""
    held = getattr(est, "heldout_", {})
    return held["forward"] if groups is not None and "forward" in held and forward_splits(groups) else None


def calibration_residuals(est: Any, X: pd.DataFrame, y: np.ndarray, rows: pd.DataFrame, regimes: np.ndarray, *,
                          groups: np.ndarray | None = None, random_state: int = 0,
                          unseen_baseline: str | None = None,
                          size_cols: Mapping[str, tuple[str, ...]] | None = None,
                          donor_rows: tuple[pd.DataFrame, np.ndarray, np.ndarray] | None = None) -> pd.DataFrame:
    """Held-out log residuals of the estimator's settings for each kind of shift, one row each:
    ``row`` (position in ``rows``), ``family`` (``random`` folds, ``forward`` fits of the largest
    size band, ``frontier`` fits beyond the smaller sizes (:func:`_frontier_splits`), ``gpu`` /
    ``kernel`` left out, ``few`` runs of a GPU kept, ``few-repeat`` the same in further partitions of the runs
    of GPUs with fewest runs), ``residual`` and the out-of-domain reasons
    of the row with respect to its fit's training rows (the ``few`` fits' rows show few runs: their
    GPU keeps four fifths of them).

    A kernel left out (by any fit: a leave-GPU-out fold can hold out every kernel of its GPUs) is predicted as a
    kernel never trained is: from the fallback baseline's column
    ``unseen_baseline`` (the model's ``features.baseline_``), not from its own baseline, which was chosen
    on its own runs. Without that, the fits held out the two matmuls of the recorded GH100 runs with their
    scaled-counts baseline (seed 004's counts, meaningful only once calibrated) and scored 3.6e5x errors
    that a kernel never trained does not make (the fallback, the hierarchical roofline, is within 2x).

    ``donor_rows`` (design rows, the training row each stands for, the donor GPU it is on: :func:`_donor_design`)
    adds, to each row of the ``few`` and ``few-repeat`` fits, the same fit's log prediction of that run on each donor
    GPU (column ``donor:<gpu>``): a prediction of the donor made without the held-out run, as the stacks need."""
    held = getattr(est, "heldout_", {})
    rows = rows.reset_index(drop=True)
    logy = np.log(np.asarray(y, dtype=np.float64))
    rng = np.random.default_rng(random_state)
    parts = []
    fold = held.get("fold")
    if "random" in held and fold is not None:
        for k in np.unique(fold[fold >= 0]):
            te, tr = np.flatnonzero(fold == k), np.flatnonzero(fold != k)
            parts.append(("random", te, logy[te] - held["random"][te], _reasons(rows, regimes, tr, te, size_cols)))
    reuse = _reused_forward(est, groups)
    names, gpus = rows["kernel"].astype(str), rows["gpu"].astype(str)
    fits = {"forward": _forward_top_splits(_size_bands(rows, groups), rng),
            "gpu": list(enumerate(_group_splits(gpus.to_numpy(), rng))),
            "kernel": list(enumerate(_group_splits(names.to_numpy(), rng))),
            "few": list(enumerate(_few_runs_splits(rows, rng))),
            # Own generators: the other families' samples stay as they were without the repeats.
            "few-repeat": [(0, sp) for p in range(1, FEW_RUNS_PARTITIONS)
                           for sp in _few_runs_splits(rows, np.random.default_rng([random_state, p]), p)],
            "frontier": list(enumerate(_frontier_splits(rows, rng)))}
    # Integer codes: np.isin over object arrays of names took 100 s of a 4-minute training of the default model.
    kernels = pd.factorize(names)[0]
    pairs = pd.factorize(names + "\0" + gpus)[0]
    for family, splits in fits.items():
        for skip, (tr, te) in splits:
            # Test rows of a kernel the split never trained, whatever held it out (a leave-GPU-out fold can hold
            # out every kernel of its GPUs), are predicted from the fallback baseline, as such a kernel is.
            lost = te[~np.isin(kernels[te], kernels[tr])]
            # The fit's own forward predictions never took the transfer path: reuse them only without new groups.
            reused = (family == "forward" and skip == 1 and reuse is not None and not len(lost)
                      and np.isin(pairs[te], pairs[tr]).all())
            Xf = X
            if len(lost) and unseen_baseline is not None and BASELINE_COLUMN in X.columns:
                Xf = X.copy()
                Xf.iloc[lost, Xf.columns.get_loc(BASELINE_COLUMN)] = X[unseen_baseline].to_numpy()[lost]
            extra: dict[str, np.ndarray] = {}
            if donor_rows is not None and family in ("few", "few-repeat"):
                # The donors' rows of the held-out runs, appended to the test rows of the same fit (never trained).
                design, source, gpu_of = donor_rows
                ext = np.flatnonzero(np.isin(source, te))
                both = est.held_out_log_predict(pd.concat([Xf, design.iloc[ext]], ignore_index=True),
                                                np.concatenate([y, np.asarray(y)[source[ext]]]),
                                                [(tr, np.concatenate([te, len(Xf) + np.arange(len(ext))]))])
                pred, appended = both[:len(Xf)], both[len(Xf):]
                where = pd.Series(np.arange(len(te)), index=te)
                for d in np.unique(gpu_of[ext]):
                    on = gpu_of[ext] == d
                    col = np.full(len(te), np.nan)
                    col[where[source[ext[on]]].to_numpy()] = appended[on]
                    extra[f"donor:{d}"] = col
            else:
                pred = reuse if reused else est.held_out_log_predict(Xf, y, [(tr, te)])
            parts.append((family, te, logy[te] - pred[te], _reasons(rows, regimes, tr, te, size_cols).assign(**extra)))
    frames = [r.reset_index(drop=True).assign(row=te, family=fam, residual=res) for fam, te, res, r in parts]
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["row", "family", "residual"])
    return table[np.isfinite(table["residual"].to_numpy(dtype=np.float64))].reset_index(drop=True)


def _one_score_per_run(keys: list[list[str]], families: np.ndarray, runs: np.ndarray, random_state: int) -> None:
    """Of each run scored in several partitions (families ``few`` and ``few-repeat``, main bin ``few|0``), one
    score drawn at random stays in ``few|0`` and the others leave it (a ``few`` score keeps its other bins; a
    repeat has none). ``keys`` is changed in place. One score per run keeps the bin's count that of its runs,
    the n of the conformal rank (pooling every partition's score would triple it, making a quantile finite that
    the runs cannot support, and weigh a GPU under FEW_RUNS_REPEAT_BELOW runs 3x against one over it), while
    drawing each run's partition spreads the bin's scores over 15 fits instead of 5, whose shifts of the GPU's
    level (each sets it from four fifths of the runs) no longer move a fifth of the scores together."""
    for i in np.flatnonzero(families == "few-repeat"):  # a further partition's score serves few|0 alone
        keys[i][:] = keys[i][:1] if keys[i][0] == "few|0" else []
    in_bin = np.array([bool(k) and k[0] == "few|0" for k in keys], dtype=bool)
    repeated = np.unique(runs[(families == "few-repeat") & in_bin])
    cand = np.flatnonzero(np.isin(families, ("few", "few-repeat")) & in_bin & np.isin(runs, repeated))
    if not len(cand):
        return
    shuffled = cand[np.random.default_rng([random_state, 7]).permutation(len(cand))]
    _, first = np.unique(runs[shuffled], return_index=True)  # each run's first draw in the shuffled order
    keep = set(shuffled[first].tolist())
    for i in cand:
        if i not in keep:
            keys[i][:] = [k for k in keys[i] if k != "few|0"]


def _donor_design(rows: pd.DataFrame, donors: Callable[[np.ndarray, str], pd.DataFrame]) -> tuple[
        pd.DataFrame, np.ndarray, np.ndarray] | None:
    """The design rows of each GPU with few runs of a kernel on each of its donors (:mod:`hybridperf.learn.donors`),
    the training row each stands for and the donor GPU; None where no GPU has few runs or its kernel no donor.
    ``donors(positions, gpu)``: the design matrix of those training rows on that GPU."""
    kernels, gpus = rows["kernel"].astype(str).to_numpy(), rows["gpu"].astype(str).to_numpy()
    blocks, source, gpu_of = [], [], []
    for _, _, mine, names in few_run_pairs(kernels, gpus):
        for d in names:
            blocks.append(donors(mine, d))
            source.append(mine)
            gpu_of.append(np.full(len(mine), d, dtype=object))
    if not blocks:
        return None
    return pd.concat(blocks, ignore_index=True), np.concatenate(source), np.concatenate(gpu_of)


def _donor_stacks(table: pd.DataFrame, rows: pd.DataFrame,
                  logy: np.ndarray) -> tuple[dict[tuple[str, str], DonorStack], pd.DataFrame]:
    """The donor stack of each GPU with few runs of a kernel (:mod:`hybridperf.learn.donors`), fitted on its runs as
    the ``few`` fits that held them out predicted them, on it and on each donor (the table's ``donor:<gpu>``
    columns), and ``table`` with those runs' ``few`` and ``few-repeat`` residuals those of the stack (the ``few|0``
    bin calibrates the prediction the model makes there) and without their random-fold rows (predicted by the
    model's own fit alone; the ``few`` fits score every run once already).

    Each run's residual is that of the stack fitted on the GPU's other runs (leave one run out, as the jackknife+
    of Barber et al., Ann. Statist. 2021): the weights and the level are fitted to these very runs, so their
    residuals under the stack of all of them are smaller than a new run's (a median level and two or three weights
    on 50 runs), and a quantile of them is too narrow. Over :data:`_STACK_SCORE_FOLDS` runs, each of that many folds
    of them is left out in turn (CV+, the same paper). A run whose other runs fit no stack keeps its own residual,
    as the model would predict it then. The stack kept is the one fitted on every run."""
    kernels, gpus = rows["kernel"].astype(str).to_numpy(), rows["gpu"].astype(str).to_numpy()
    fam, at = table["family"].to_numpy(), table["row"].to_numpy(dtype=int)
    res = table["residual"].to_numpy(dtype=np.float64).copy()
    own = logy[at] - res  # each row's own held-out log prediction
    keep = np.ones(len(table), dtype=bool)
    stacks: dict[tuple[str, str], DonorStack] = {}
    for kernel, gpu, mine, names in few_run_pairs(kernels, gpus):
        cols = [f"donor:{d}" for d in names]
        first = np.flatnonzero((fam == "few") & np.isin(at, mine))
        if not names or not len(first) or not all(c in table for c in cols):
            continue
        donor_pred = table[cols].to_numpy(dtype=np.float64)
        fit = fit_donor_stack(logy[at[first]], own[first], donor_pred[first])
        if fit is None:
            continue
        stacks[(kernel, gpu)] = DonorStack(donors=tuple(names), weights=fit[0], level=fit[1])
        runs = np.unique(at[first])
        fold = np.random.default_rng(0).permutation(len(runs)) % _STACK_SCORE_FOLDS
        for f in np.unique(fold):  # each run scored by a stack fitted without it (see _STACK_SCORE_FOLDS)
            sel = np.flatnonzero(np.isin(fam, ("few", "few-repeat")) & np.isin(at, runs[fold == f]))
            others = first[~np.isin(at[first], runs[fold == f])]
            loo = fit_donor_stack(logy[at[others]], own[others], donor_pred[others])
            stacked = own[sel] if loo is None else loo[1] + np.column_stack([own[sel], donor_pred[sel]]) @ np.asarray(
                loo[0])
            res[sel] = logy[at[sel]] - stacked  # NaN where a donor could not predict the run: dropped
        keep[(fam == "random") & np.isin(at, mine)] = False
    out = table.assign(residual=res)[keep]
    return stacks, out[np.isfinite(out["residual"].to_numpy(dtype=np.float64))].reset_index(drop=True)


def fit_intervals(est: Any, X: pd.DataFrame, y: np.ndarray, rows: pd.DataFrame, regimes: np.ndarray, *,
                  groups: np.ndarray | None = None, random_state: int = 0,
                  unseen_baseline: str | None = None,
                  size_cols: Mapping[str, tuple[str, ...]] | None = None,
                  donors: Callable[[np.ndarray, str], np.ndarray] | None = None) -> ConformalIntervals | None:
    """Normalised Mondrian conformal intervals for a fitted HybridRegressor (see ConformalIntervals).

    Residuals come from held-out fits of the estimator's own settings (:func:`calibration_residuals`):
    its random folds, forward fits of the largest size band (given the ordered size ``groups`` it was
    fitted with, or two to five distinct sizes), frontier fits beyond the sizes below half the largest
    (:func:`frontier_gap`), leave-GPU-out and leave-kernel-out fits and, where a GPU has few runs, fits
    that hold out a fifth of its runs at a time (in :data:`FEW_RUNS_PARTITIONS` partitions where it has fewer
    than :data:`FEW_RUNS_REPEAT_BELOW`, one score per run kept: :func:`_one_score_per_run`). Each residual,
    divided by the cross-fitted difficulty of its row, is a score in the bins of its reasons (:func:`bin_keys`).
    The random folds' predictions also measure how often the predicted-fastest share of each (kernel, GPU, sizes) group
    held its fastest run (:func:`hybridperf.learn.shortlist.held_out_hit_curves`: the odds of `rank`).
    ``X`` is the estimator's design matrix of the training ``rows`` (times ``y``); ``regimes`` their
    MWP-CWP regime codes. None when the estimator kept no held-out predictions (coverage=None). ``donors``
    (positions of training rows, a GPU -> the design matrix of those rows on that GPU) fits the donor stacks of
    GPUs with few runs (:func:`_donor_stacks`), kept in the intervals' ``donor_stacks``.
    """
    if "random" not in getattr(est, "heldout_", {}):
        return None
    rows = rows.reset_index(drop=True)
    regimes = np.asarray(regimes, dtype=np.float64)
    design = None if donors is None else _donor_design(rows, donors)
    table = calibration_residuals(est, X, y, rows, regimes, groups=groups, random_state=random_state,
                                  unseen_baseline=unseen_baseline, size_cols=size_cols, donor_rows=design)
    r = np.full(len(rows), np.nan)
    rand = table[table["family"] == "random"]
    held = rand["row"].to_numpy(dtype=int)
    r[held] = rand["residual"].to_numpy()
    if "random_forward" in est.heldout_:
        # The difficulty learns from the random folds' errors of the prediction with the forward weights: the error
        # level of the prediction the model makes beyond its sizes, where the bins pool every kernel (inside them,
        # each kernel's own bin rescales it). From the errors with the weights inside, a kernel whose residual fits
        # its sizes but does not extrapolate looked easy, and its intervals beyond the sizes narrowed (the H100
        # recording alone, hold-out runs up to 2x beyond: 80 % coverage 86 -> 56 %).
        r[held] = np.log(np.asarray(y, dtype=np.float64))[held] - est.heldout_["random_forward"][held]
    cols = tuple(i for i, c in enumerate(X.columns) if str(c).startswith(DIFFICULTY_PREFIXES))
    difficulty, sigma = fit_difficulty(X.to_numpy(dtype=np.float64)[:, list(cols)], r, random_state)
    stacks: dict[tuple[str, str], DonorStack] = {}
    if design is not None:  # after the difficulty, which learns from the random folds' own errors
        stacks, table = _donor_stacks(table, rows, np.log(np.asarray(y, dtype=np.float64)))
    fixed = float(np.median(sigma)) if difficulty is not None else None  # see ConformalIntervals
    row_sigma = with_fixed_sigma(sigma[table["row"].to_numpy(dtype=int)], table, fixed, fixed, fixed, fixed)
    score = np.abs(table["residual"].to_numpy()) / row_sigma
    shift = np.log2(np.maximum(table["ood_size_factor"].to_numpy(dtype=np.float64), 1.0))
    keys = bin_keys(table, rows["kernel"].iloc[table["row"].to_numpy(dtype=int)].reset_index(drop=True))
    for k, family in zip(keys, table["family"]):
        if family == "random":
            k.append("random")  # every random-fold score: the root bin (see ConformalIntervals)
    _one_score_per_run(keys, table["family"].to_numpy(), table["row"].to_numpy(dtype=int), random_state)
    flat = pd.DataFrame({"key": [k for ks in keys for k in ks], "score": np.repeat(score, [len(k) for k in keys]),
                         "shift": np.repeat(shift, [len(k) for k in keys])})
    scores = {str(k): np.sort(g["score"].to_numpy()) for k, g in flat.groupby("key")}
    refs = {str(k): float(np.median(g["shift"])) for k, g in flat[flat["shift"] > 1e-9].groupby("key")}
    hits = held_out_hit_curves(rows, est.heldout_["random"], np.log(np.asarray(y, dtype=np.float64)), random_state)
    return ConformalIntervals(scores=scores, shift_ref=refs, difficulty=difficulty, difficulty_columns=cols,
                              sigma_unseen_gpu=fixed, sigma_few_runs=fixed, sigma_beyond_sizes=fixed,
                              sigma_unseen_kernel=fixed, shortlist_hits=hits, donor_stacks=stacks)
