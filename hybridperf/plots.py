"""Plots of predictions, rankings and evaluations (matplotlib, PNG/SVG/PDF by the file name)."""
from __future__ import annotations

# Each function draws what a command computed (it computes nothing new) and writes the file atomically:
# prediction_plot (predict --plot): the predicted time over a size with its interval band and the
# measured times; pareto_plot (rank --plot): Ryoo's efficiency/utilization plane with the Pareto front
# and the picks; evaluation_plot (evaluate --plot): predicted against measured and the error against
# the problem size, per method.
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hybridperf.errors import HybridperfError
from hybridperf.files import atomic_write

__all__ = ["check_plottable", "evaluation_plot", "pareto_plot", "prediction_plot", "save_figure"]

_FORMATS = ("png", "svg", "pdf")
_MAX_CURVES = 8


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: str | Path) -> Path:
    """Write ``fig`` to ``path`` (format from the extension: png, svg or pdf) atomically and close it."""
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in _FORMATS:
        raise HybridperfError(f"{path}: unknown plot format {fmt!r}; name the file .png, .svg or .pdf")
    try:
        fig.tight_layout()
        atomic_write(path, lambda tmp: fig.savefig(tmp, format=fmt, dpi=120))
    finally:
        _pyplot().close(fig)
    return path


def _params(table: pd.DataFrame) -> list[str]:
    return [c for c in table.columns if c.startswith(("size.", "config."))]


def _x_column(table: pd.DataFrame) -> str:
    """The parameter to put on the x axis: the size (else config) column with the most distinct values."""
    params = _params(table)
    varying = sorted(params, key=lambda c: (-table[c].nunique(), not c.startswith("size.")))
    if not varying or table[varying[0]].nunique() < 2:
        raise HybridperfError("--plot needs a range of one parameter to draw a curve, e.g. --set N=1024:65536:x2")
    return varying[0]


def check_plottable(table: pd.DataFrame) -> tuple[str, list[str], list[Any]]:
    """(the x parameter, the other varying ones, the curves' groups) of what :func:`prediction_plot` draws, or a
    HybridperfError, before anything is written: rows of several (kernel, GPU) pairs, no range of a parameter, or
    more than eight curves."""
    pairs = table[["kernel", "gpu"]].drop_duplicates()
    if len(pairs) > 1:
        raise HybridperfError(f"--plot draws one kernel on one GPU; the rows hold {len(pairs)} (kernel, GPU) pairs "
                              f"(e.g. {pairs.iloc[0, 0]} on {pairs.iloc[0, 1]}, {pairs.iloc[1, 0]} on "
                              f"{pairs.iloc[1, 1]}): plot a file of one pair, or drop --plot")
    x = _x_column(table)
    others = [c for c in _params(table) if c != x and table[c].nunique() > 1]
    groups = list(table.groupby(others, sort=True)) if others else [((), table)]
    if len(groups) > _MAX_CURVES:
        raise HybridperfError(f"--plot draws at most {_MAX_CURVES} curves; {len(groups)} combinations of "
                              f"{', '.join(o.split('.', 1)[1] for o in others)} vary: fix all but one parameter")
    return x, others, groups


def prediction_plot(table: pd.DataFrame, path: str | Path, *, coverage: float | None = None) -> Path:
    """The predicted time (``pred_ms``) over the most varied parameter, with the ``pred_lo_ms``..``pred_hi_ms``
    band and the measured ``time_ms`` where the table has it; one curve per value of the other varying
    parameters (at most eight)."""
    x, others, groups = check_plottable(table)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.0, 4.6))
    for i, (key, g) in enumerate(groups):
        g = g.sort_values(x)
        key = key if isinstance(key, tuple) else (key,)
        label = ", ".join(f"{o.split('.', 1)[1]}={v:g}" for o, v in zip(others, key)) or "predicted"
        color = f"C{i}"
        ax.plot(g[x], g["pred_ms"], "-o", ms=3, color=color, label=label)
        ax.fill_between(g[x], g["pred_lo_ms"], g["pred_hi_ms"], color=color, alpha=0.18, lw=0)
        if "time_ms" in g.columns and g["time_ms"].notna().any():
            ax.plot(g[x], g["time_ms"], "x", color=color, ms=7, mew=2, label=f"measured ({label})" if others
                    else "measured")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(x.split(".", 1)[1])
    ax.set_ylabel("time (ms)")
    band = f"{coverage:.0%} interval" if coverage else "interval"
    ax.set_title(f"{table['kernel'].iloc[0]} on {table['gpu'].iloc[0]}: prediction with its {band} (shaded)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def pareto_plot(result: Any, path: str | Path) -> Path:
    """Ryoo's efficiency against utilization of the kept candidates, those on the Pareto front (over these two
    metrics and, with a model, the predicted time) and the picks (the ranked table) labelled with their ranks;
    with a model, a second panel shows the picks' predicted times and intervals."""
    plt = _pyplot()
    cands, picks = result.candidates, result.table
    timed = "time_ms" in picks.columns and picks["time_ms"].notna().any()
    fig, axes = plt.subplots(1, 2 if timed else 1, figsize=(11.0 if timed else 6.4, 4.8), squeeze=False)
    ax = axes[0, 0]
    ax.scatter(cands["efficiency"], cands["utilization"], s=10, color="0.75", label="kept candidates")
    front = cands[cands["on_front"]]
    ax.scatter(front["efficiency"], front["utilization"], s=16, color="C0", label="on the Pareto front", zorder=2)
    ax.scatter(picks["efficiency"], picks["utilization"], s=70, facecolors="none", edgecolors="C3", lw=1.5,
               label="picks (rank)", zorder=3)
    # Picks with the same two metrics share a point: one label lists their ranks.
    for (eff, util), group in picks.groupby(["efficiency", "utilization"], sort=False):
        ranks = sorted(int(r) for r in group["rank"])
        label = ",".join(map(str, ranks)) if len(ranks) <= 3 else f"{ranks[0]}..{ranks[-1]} ({len(ranks)})"
        ax.annotate(label, (eff, util), textcoords="offset points", xytext=(6, 5), fontsize=8, color="C3")
    ax.set_xlabel("efficiency (Ryoo et al., CGO 2008, Eq. 1)")
    ax.set_ylabel("utilization (Eq. 2)")
    ax.set_title(f"{result.kernel} on {result.gpu}: {len(cands)} kept of {result.space_size}")
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    if timed:
        ax2 = axes[0, 1]
        ranks = picks["rank"].to_numpy()
        err = [picks["time_ms"] - picks["lo_ms"], picks["hi_ms"] - picks["time_ms"]]
        ax2.errorbar(ranks, picks["time_ms"], yerr=err, fmt="o", color="C3", ecolor="0.6", capsize=3)
        ax2.set_yscale("log")
        t = picks["time_ms"].to_numpy(dtype=float)
        ax2.set_ylim(np.nanmin(t) / 10, np.nanmax(t) * 10)  # an out-of-domain interval can span decades
        ax2.set_xlabel("rank")
        ax2.set_ylabel("predicted time (ms) with interval")
        ax2.set_title("the picks")
        ax2.grid(True, which="both", alpha=0.3)
    return save_figure(fig, path)


def evaluation_plot(evaluation: Any, sweep: pd.DataFrame, path: str | Path) -> Path:
    """Left: predicted against measured time (log-log, y = x dashed) of each method with predictions;
    right: the absolute percentage error against the problem size (product of the size parameters)."""
    from hybridperf.sweep import param_columns, size_metric, training_rows

    plt = _pyplot()
    preds = evaluation.predictions
    meas = preds["measured_ms"].to_numpy()
    methods = [m for m in preds.columns if m != "measured_ms" and np.isfinite(preds[m].to_numpy()).any()]
    rows = training_rows(sweep).reset_index(drop=True)  # the predictions' index: positions in these rows
    sizes = size_metric(rows.loc[preds.index]) if param_columns(rows, "size.") else np.full(len(preds), np.nan)
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12.0, 5.0))
    for i, m in enumerate(methods):
        p = preds[m].to_numpy()
        style = dict(s=9, alpha=0.6, color=f"C{i % 10}", marker="o" if m == "hybrid" else ".")
        ax.scatter(meas, p, label=m, **style)
        with np.errstate(all="ignore"):
            ax2.scatter(sizes, 100 * np.abs(p - meas) / meas, **style)
    lo, hi = np.nanmin(meas), np.nanmax(meas)
    ax.plot([lo, hi], [lo, hi], "k--", lw=1)
    for a in (ax, ax2):
        a.set_xscale("log")
        a.set_yscale("log")
        a.grid(True, which="both", alpha=0.3)
    ax.set_xlabel("measured time (ms)")
    ax.set_ylabel("predicted time (ms)")
    ax.set_title(f"split {evaluation.split}: {evaluation.n_test} test runs")
    ax.legend(fontsize=7, markerscale=2)
    ax2.set_xlabel("problem size (largest size parameter)")
    ax2.set_ylabel("absolute percentage error (%)")
    ax2.set_title("error against size")
    return save_figure(fig, path)
