"""The training domain of a model (kernels, GPUs, sizes, config values, regimes) and why rows lie outside it."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from hybridperf.sweep import param_columns, param_name, size_column

__all__ = ["DEFAULTED_COLUMN", "FEW_RUNS_SHARE", "GAP_FLAG", "REASON_COLUMNS", "combination_codes", "factor_text",
           "out_of_domain", "percent_text", "reason_text", "size_columns", "training_domain"]

_CLOSED_SET_MAX = 256  # a config parameter with more distinct training values is stored as a range
# A kernel trained with more distinct configurations (combinations of its config values) keeps none of them: a tuned
# sweep's space, where each configuration to predict is new and the random folds calibrate just that.
_COMBINATIONS_MAX = 4096
# Importers name the config parameters they could not read from the source (and so left to the
# descriptor's defaults) in this column, comma-separated.
DEFAULTED_COLUMN = "info.defaulted"
# The out-of-domain reasons, one column each (see out_of_domain).
REASON_COLUMNS = ("ood_kernel", "ood_gpu", "ood_few_runs", "ood_size_factor", "ood_size_gap", "ood_config",
                  "ood_combination", "ood_defaulted", "ood_regime")
# A size between the trained ones at least this factor from the nearest trained value is named a reason (its
# interval keeps the in-domain width: measured in hybridperf.learn.intervals.ConformalIntervals).
GAP_FLAG = 1.25
# A GPU trained with fewer runs of a kernel than this share of the kernel's best-covered GPU is "few runs"
# (e.g. a new GPU with a few dozen calibration runs beside GPUs with thousands, EVALUATION.md's S4).
FEW_RUNS_SHARE = 0.1


def size_columns(rows: pd.DataFrame, descriptors: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """Per kernel of ``rows``, the columns holding its descriptor's size parameters: ``size.<name>``, else
    ``counter.<name>`` (as the features read them). A kernel described by its counters (AIWC's) has its real
    problem size there, while its ``size.*`` column is a class label its descriptor does not read
    (OpenDwarfs' tiny=1, small=2, medium=3: medium holds 32x the small class's work and footprint, not 1.5x)."""
    out = {}
    for kernel in rows["kernel"].astype(str).unique():
        cols = (size_column(rows.columns, n) for n in getattr(descriptors.get(kernel), "size_names", ()))
        out[kernel] = tuple(c for c in cols if c is not None)
    return out


def training_domain(rows: pd.DataFrame, regimes: np.ndarray | None = None,
                    sizes: Mapping[str, tuple[str, ...]] | None = None) -> dict[str, dict[str, Any]]:
    """Per kernel: the GPUs trained on (``gpus``) and the runs of each (``gpu_rows``), each size's
    [min, max] and, up to 256 distinct values, the values themselves (``size_values``: a size between them
    is an interpolation), the config values seen and the analytical regimes seen (MWP-CWP regime codes, when
    ``regimes`` gives one per row).

    The sizes are the columns ``sizes`` names for the kernel (:func:`size_columns`: its descriptor's), or
    every ``size.*`` column where ``sizes`` is None. Config values are ``{"values": [...]}`` up to 256
    distinct values, else ``{"range": [min, max]}``.
    """
    out: dict[str, dict[str, Any]] = {}
    codes = None if regimes is None else pd.Series(np.asarray(regimes, dtype=np.float64), index=rows.index)
    for kernel, g in rows.groupby("kernel"):
        runs = g["gpu"].astype(str).value_counts()
        d: dict[str, Any] = {"gpus": sorted(runs.index), "gpu_rows": {k: int(runs[k]) for k in sorted(runs.index)},
                             "sizes": {}, "size_values": {}, "configs": {}}
        for col in param_columns(g, "size.") if sizes is None else sizes.get(str(kernel), ()):
            v = pd.to_numeric(g[col], errors="coerce").dropna()
            if len(v):
                d["sizes"][col] = [float(v.min()), float(v.max())]
                values = v.unique()
                if len(values) <= _CLOSED_SET_MAX:  # more: a dense grid, where the gaps are small anyway
                    d["size_values"][col] = sorted(float(x) for x in values)
        for col in param_columns(g, "config."):
            v = pd.to_numeric(g[col], errors="coerce").dropna().unique()
            if len(v):
                d["configs"][col] = ({"values": sorted(float(x) for x in v)} if len(v) <= _CLOSED_SET_MAX
                                     else {"range": [float(v.min()), float(v.max())]})
        if d["configs"]:
            combos = np.unique(combination_codes(g, sorted(d["configs"])))
            if len(combos) <= _COMBINATIONS_MAX:
                d["combinations"] = [int(c) for c in combos]
        if codes is not None:
            d["regimes"] = sorted(float(r) for r in codes.loc[g.index].dropna().unique())
        out[str(kernel)] = d
    return out


def combination_codes(rows: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """One integer (under 2**53, exact in JSON) per row for its combination of the values in the config ``columns``
    (a column the rows lack, or an empty cell, counts as NaN): the same values give the same code in every process
    (pandas' keyed hash of each value, chained over the columns in order)."""
    return _codes(_config_values(rows, columns))


def _config_values(rows: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """The rows' numeric values of ``columns`` (rows x columns; NaN where a column is missing or a cell empty)."""
    out = np.full((len(rows), len(columns)), np.nan)
    for j, col in enumerate(columns):
        if col in rows.columns:
            out[:, j] = pd.to_numeric(rows[col], errors="coerce").to_numpy(dtype=np.float64)
    return out


def _codes(values: np.ndarray) -> np.ndarray:
    h = np.zeros(values.shape[0], dtype=np.uint64)
    for j in range(values.shape[1]):
        h = pd.util.hash_array(h ^ pd.util.hash_array(np.ascontiguousarray(values[:, j])))
    return (h >> np.uint64(11)).astype(np.int64)


def _size_values(rows: pd.DataFrame, idx: np.ndarray, key: str) -> np.ndarray | None:
    """The rows' values of the trained size ``key`` (None where the rows give none). A size trained from
    ``counter.<name>`` is read from ``size.<name>`` where the rows give it there instead (and the other way
    round), as the features read either: ``predict --set`` writes a counter-described kernel's sizes as size.*
    columns."""
    col = key if key in rows.columns else size_column(rows.columns, param_name(key))
    return None if col is None else pd.to_numeric(rows[col].iloc[idx], errors="coerce").to_numpy(dtype=np.float64)


def _size_factor(rows: pd.DataFrame, idx: np.ndarray, sizes: Mapping[str, list[float]]) -> np.ndarray:
    """How far beyond the trained sizes each row lies: max over sizes of value / max or min / value (>= 1)."""
    factor = np.ones(len(idx))
    for key, (lo, hi) in sizes.items():
        v = _size_values(rows, idx, key)
        if v is not None:
            with np.errstate(divide="ignore", invalid="ignore"):
                f = np.fmax(v / hi, lo / v)
            factor = np.fmax(factor, np.where(np.isfinite(f) & (v > 0), f, 1.0))
    return factor


def _size_gap(rows: pd.DataFrame, idx: np.ndarray, values: Mapping[str, list[float]]) -> np.ndarray:
    """How far each row's sizes lie from the nearest trained value, where they lie between trained values: max
    over sizes of min(value / the trained value below, the trained value above / value) (>= 1; 1 for a trained
    value, and outside the trained range, which :func:`_size_factor` measures)."""
    gap = np.ones(len(idx))
    for key, trained in values.items():
        v = _size_values(rows, idx, key)
        t = np.unique(np.asarray(trained, dtype=np.float64))  # sorted, whatever the file held
        if v is None or len(t) < 2 or not t[0] > 0:
            continue
        inside = np.isfinite(v) & (v > t[0]) & (v < t[-1])
        j = np.clip(np.searchsorted(t, v[inside]), 1, len(t) - 1)
        g = np.ones(len(idx))
        g[inside] = np.minimum(v[inside] / t[j - 1], t[j] / v[inside])
        gap = np.fmax(gap, g)
    return gap


def _config_reasons(rows: pd.DataFrame, idx: np.ndarray, configs: Mapping[str, Mapping[str, list[float]]],
                    unseen: np.ndarray, defaulted: np.ndarray) -> None:
    """Append to ``unseen`` (one string per row of ``rows``) the NAME=VALUE config values never trained, and
    to ``defaulted`` the config parameters a row does not give (missing column or empty cell)."""
    for col, seen in configs.items():
        name = param_name(col)
        if col not in rows.columns:
            _add(defaulted, idx, name)
            continue
        v = pd.to_numeric(rows[col].iloc[idx], errors="coerce").to_numpy(dtype=np.float64)
        if "values" in seen:
            bad = ~np.isin(v, seen["values"])
        else:
            bad = (v < seen["range"][0]) | (v > seen["range"][1])
        bad &= np.isfinite(v)
        if bad.any():
            values, inverse = np.unique(v[bad], return_inverse=True)
            _add(unseen, idx[bad], np.array([f"{name}={x:g}" for x in values], dtype=object)[inverse])
        _add(defaulted, idx[~np.isfinite(v)], name)


def _few_runs(gpus: np.ndarray, runs: Mapping[str, int]) -> np.ndarray:
    """Training runs of each row's GPU where they are few beside the best-covered GPU's, else 0."""
    if not runs:
        return np.zeros(len(gpus), dtype=int)
    most = max(runs.values())
    few = {g: n for g, n in runs.items() if n < FEW_RUNS_SHARE * most}
    codes, uniq = pd.factorize(np.asarray(gpus, dtype=object))  # one lookup per distinct GPU
    return np.array([few.get(g, 0) for g in uniq] + [0], dtype=int)[codes]


def _add(acc: np.ndarray, pos: np.ndarray, texts: Any, sep: str = ",") -> None:
    """Append ``texts`` (one, or one per position) to the strings of ``acc`` at ``pos``, ``sep``-separated."""
    if len(pos) == 0:
        return
    cur = acc[pos]
    texts = np.broadcast_to(np.asarray(texts, dtype=object), cur.shape)
    acc[pos] = np.where(cur == "", texts, cur + sep + texts)


def _marked_defaults(rows: pd.DataFrame, idx: np.ndarray, defaulted: np.ndarray) -> None:
    if DEFAULTED_COLUMN not in rows.columns:
        return
    cells = rows[DEFAULTED_COLUMN].iloc[idx].to_numpy(dtype=object)
    for k in np.flatnonzero([isinstance(c, str) and bool(c.strip()) for c in cells]):
        have = [n for n in str(defaulted[idx[k]]).split(",") if n]
        names = [n.strip() for n in cells[k].split(",") if n.strip() and n.strip() not in have]
        defaulted[idx[k]] = ",".join(have + list(dict.fromkeys(names)))


def out_of_domain(rows: pd.DataFrame, domain: Mapping[str, Mapping[str, Any]],
                  regimes: np.ndarray | None = None) -> pd.DataFrame:
    """Why each row lies outside the training ``domain``: one column per reason (:data:`REASON_COLUMNS`).

    ``ood_kernel`` / ``ood_gpu``: never trained (the GPU for this kernel); ``ood_few_runs``: the
    training runs of this GPU for this kernel when they are few (under :data:`FEW_RUNS_SHARE` of the
    best-covered GPU's; 0 otherwise, and for models whose domain does not count runs); ``ood_size_factor``: how
    far beyond the trained sizes (1 inside, 2 = twice the largest or half the smallest); ``ood_size_gap``:
    inside them, how far from the nearest trained value (1 for a trained value or an untracked size, 2 = a
    size trained at N and 4N asked at 2N: an interpolation; :data:`GAP_FLAG` and more is named a reason);
    ``ood_config``: config values never trained (``NAME=VALUE`` list); ``ood_combination``: beyond the trained
    sizes, a configuration (the combination of its config values, all given) trained at no size, where the
    kernel's domain keeps its configurations (up to 4,096 of them: a library's kernel choice, as cuBLAS picks a
    tile by shape, rather than a tuned sweep's space); ``ood_defaulted``: config
    parameters the row does not give, left to the descriptor's defaults (missing, empty, or named in
    :data:`DEFAULTED_COLUMN` by an importer); ``ood_regime``: an analytical (MWP-CWP) regime never
    seen in training (needs ``regimes``, one code per row).
    """
    n = len(rows)
    out = pd.DataFrame({"ood_kernel": np.zeros(n, bool), "ood_gpu": np.zeros(n, bool), "ood_few_runs": np.zeros(n, int),
                        "ood_size_factor": np.ones(n), "ood_size_gap": np.ones(n), "ood_combination": np.zeros(n, bool),
                        "ood_regime": np.zeros(n, bool)}, index=rows.index)
    unseen = np.full(n, "", dtype=object)
    defaulted = np.full(n, "", dtype=object)
    kernels, gpus = rows["kernel"].astype(str).to_numpy(), rows["gpu"].astype(str).to_numpy()
    codes = None if regimes is None else np.asarray(regimes, dtype=np.float64)
    kernel_codes, kernel_names = pd.factorize(kernels)  # hashing, not sorting 200k strings
    for code, kernel in enumerate(kernel_names):
        idx = np.flatnonzero(kernel_codes == code)
        d = domain.get(kernel)
        if d is None:
            out.iloc[idx, out.columns.get_loc("ood_kernel")] = True
            continue
        out.iloc[idx, out.columns.get_loc("ood_gpu")] = ~np.isin(gpus[idx], d["gpus"])
        out.iloc[idx, out.columns.get_loc("ood_few_runs")] = _few_runs(gpus[idx], d.get("gpu_rows", {}))
        factor = _size_factor(rows, idx, d.get("sizes", {}))
        out.iloc[idx, out.columns.get_loc("ood_size_factor")] = factor
        if "combinations" in d and (beyond := factor > 1 + 1e-9).any():
            v = _config_values(rows.iloc[idx[beyond]], sorted(d.get("configs", {})))
            given = np.isfinite(v).all(axis=1)  # a defaulted value: named as such, its combination unknown
            new = ~np.isin(_codes(v[given]), d["combinations"])
            out.iloc[idx[beyond][given], out.columns.get_loc("ood_combination")] = new
        out.iloc[idx, out.columns.get_loc("ood_size_gap")] = _size_gap(rows, idx, d.get("size_values", {}))
        _config_reasons(rows, idx, d.get("configs", {}), unseen, defaulted)
        _marked_defaults(rows, idx, defaulted)
        if codes is not None and "regimes" in d:
            c = codes[idx]
            out.iloc[idx, out.columns.get_loc("ood_regime")] = np.isfinite(c) & ~np.isin(c, d["regimes"])
    out["ood_config"] = unseen
    out["ood_defaulted"] = defaulted
    return out[list(REASON_COLUMNS)]


def _per_value(values: np.ndarray, fmt: Any) -> np.ndarray:
    """``fmt`` of each value, formatted once per distinct value (a ranking scan repeats a few)."""
    uniq, inverse = np.unique(values, return_inverse=True)
    return np.array([fmt(u) for u in uniq], dtype=object)[inverse]


def factor_text(x: float) -> str:
    """A size factor (> 1) with the digits that tell it from 1: '2x', '1.15x', '1.00000006x', '1,024x'."""
    if x >= 1000:
        return f"{x:,.0f}x"
    text = next((t for t in (f"{x:.{d}g}" for d in (3, 6, 9, 12)) if t != "1"), repr(x))
    return text + "x"


def percent_text(share: float, unlike: float | None = None) -> str:
    """A share as a percentage with the digits that tell it from 0 %, 100 % and, given ``unlike`` (a share it is
    compared with), from that share's own text (0.05: '5%', 0.0496: '4.96%', 0.04995 unlike 0.05: '4.995%',
    0.999999: '99.9999%', 0.9999999: '99.99999%')."""
    other = None if unlike is None or unlike == share else percent_text(unlike)
    texts = [f"{share * 100:.{d}g}" for d in (3, 6, 9, 12)]
    text = next((t for t in texts if not (t == "100" and share < 1) and not (t == "0" and share > 0)
                 and t + "%" != other), texts[-1])
    return text + "%"


def reason_text(reasons: pd.DataFrame, kernels: pd.Series, gpus: pd.Series) -> list[str]:
    """A short sentence per row naming its reasons ('' inside the domain)."""
    n = len(reasons)
    out = np.full(n, "", dtype=object)
    k, g = kernels.astype(str).to_numpy(), gpus.astype(str).to_numpy()
    few = reasons["ood_few_runs"].to_numpy()
    size = reasons["ood_size_factor"].to_numpy(dtype=np.float64)
    gap = reasons["ood_size_gap"].to_numpy(dtype=np.float64) if "ood_size_gap" in reasons else np.ones(n)
    config, default = reasons["ood_config"].to_numpy(dtype=object), reasons["ood_defaulted"].to_numpy(dtype=object)
    parts = [
        (reasons["ood_kernel"].to_numpy(dtype=bool), lambda m: _per_value(k[m], lambda x: f"kernel {x} never trained")),
        (reasons["ood_gpu"].to_numpy(dtype=bool),
         lambda m: _per_value(g[m], lambda x: f"GPU {x} never trained for this kernel")),
        (few > 0, lambda m: np.array([f"GPU {x} trained with only {r} runs of this kernel"
                                      for x, r in zip(g[m], few[m])], dtype=object)),
        (size > 1 + 1e-9, lambda m: _per_value(size[m], lambda x: f"size {factor_text(x)} outside the trained range")),
        (gap >= GAP_FLAG,
         lambda m: _per_value(gap[m], lambda x: f"size between trained sizes, {x:.3g}x from the nearest")),
        (config != "", lambda m: _per_value(config[m].astype(str), lambda x: f"config {x} never trained")),
        (reasons["ood_combination"].to_numpy(dtype=bool) if "ood_combination" in reasons else np.zeros(n, bool),
         lambda m: "config combination never trained"),
        (default != "", lambda m: _per_value(default[m].astype(str), lambda x: f"config {x} defaulted")),
        (reasons["ood_regime"].to_numpy(dtype=bool), lambda m: "analytical regime never seen in training"),
    ]
    for mask, text in parts:
        if mask.any():
            _add(out, np.flatnonzero(mask), text(mask), sep="; ")
    return out.tolist()
