"""Ranking charts (PNG, matplotlib Agg): Ryoo's metric plane, rank agreement, tuning trajectories."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
from scipy.stats import rankdata, spearmanr

from hybridperf.errors import HybridperfError
from hybridperf.search.pareto import pareto_mask

__all__ = ["pareto_plot", "rank_plot", "trajectory_plot"]


def _figure(width: float = 6.4, height: float = 4.8):
    # The object API with an Agg canvas: no pyplot global state, no display needed.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(fig)
    return fig


def _save(fig, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, format="png")
    return path


def pareto_plot(efficiency: npt.ArrayLike, utilization: npt.ArrayLike, path: str | Path, *,
                on_front: npt.ArrayLike | None = None, measured_ms: npt.ArrayLike | None = None,
                title: str = "", max_points: int = 50_000, seed: int = 0) -> Path:
    """Ryoo-style metric plane: efficiency (log x, linear when it spans < 10x) vs utilization.

    Seed 003 Fig. 6 plots every configuration's Efficiency and Utilization (Eqs. 1-2) and connects
    the Pareto-optimal subset; configurations up and to the right are expected to be fastest.
    The front is highlighted. With ``measured_ms`` points are coloured by measured time (log
    scale), the true optimum is starred and the best configuration on the front is ringed.
    Large spaces are subsampled to
    ``max_points`` for drawing (front and optimum always drawn).

    Returns the path of the PNG written.
    """
    eff = np.asarray(efficiency, dtype=np.float64)
    util = np.asarray(utilization, dtype=np.float64)
    if eff.shape != util.shape or eff.ndim != 1:
        raise HybridperfError("efficiency and utilization must be 1-D arrays of the same length")
    ok = np.isfinite(eff) & np.isfinite(util) & (eff > 0)
    front = np.zeros(eff.shape, dtype=bool)
    front[ok] = pareto_mask(np.c_[eff[ok], util[ok]], maximize=True) if on_front is None \
        else np.asarray(on_front, dtype=bool)[ok]
    t = None if measured_ms is None else np.asarray(measured_ms, dtype=np.float64)
    draw = np.flatnonzero(ok)
    if draw.size > max_points:
        draw = np.sort(np.random.default_rng(seed).choice(draw, max_points, replace=False))
    fig = _figure()
    ax = fig.add_subplot()
    if t is not None and np.isfinite(t[draw]).any():
        from matplotlib.colors import LogNorm

        tt = t[draw]
        finite = np.isfinite(tt) & (tt > 0)
        sc = ax.scatter(eff[draw][finite], util[draw][finite], c=tt[finite], s=6, cmap="viridis_r",
                        norm=LogNorm(), alpha=0.6, linewidths=0, rasterized=True)
        fig.colorbar(sc, ax=ax, label="measured time (ms)")
        if (~finite).any():
            ax.scatter(eff[draw][~finite], util[draw][~finite], s=6, c="0.8", marker="x", label="failed run")
    else:
        ax.scatter(eff[draw], util[draw], s=6, c="0.6", alpha=0.5, linewidths=0, rasterized=True,
                   label="configuration")
    f = np.flatnonzero(front)
    f = f[np.argsort(eff[f])]
    ax.plot(eff[f], util[f], "-o", color="tab:red", ms=4, lw=1.2, label=f"Pareto front ({len(f)})")
    if t is not None and np.isfinite(t[ok]).any():
        best = np.flatnonzero(ok)[np.nanargmin(t[ok])]
        ax.scatter([eff[best]], [util[best]], marker="*", s=220, c="gold", edgecolors="black", zorder=5,
                   label=f"optimum ({t[best]:.3g} ms)")
        if f.size and np.isfinite(t[f]).any():
            bf = f[np.nanargmin(t[f])]
            ax.scatter([eff[bf]], [util[bf]], s=140, facecolors="none", edgecolors="tab:red", lw=2, zorder=5,
                       label=f"best on front ({t[bf] / t[best]:.3f}x)")
    spread = float(np.max(eff[ok]) / np.min(eff[ok])) if ok.any() else 1.0
    if spread >= 10:
        ax.set_xscale("log")
    else:  # a narrow range: log ticks would collide, a linear axis with an offset reads better
        ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 0), useMathText=True)
    ax.set_xlabel("efficiency = 1 / (Instr x Threads)" + ("  (log)" if spread >= 10 else ""))
    ax.set_ylabel("utilization")
    ax.set_title(title or "Ryoo metric plane (seed 003 Fig. 6)", fontsize=10)
    ax.legend(fontsize=7, loc="best")
    return _save(fig, path)


def rank_plot(predicted_ms: npt.ArrayLike, measured_ms: npt.ArrayLike, path: str | Path, *, title: str = "",
              top: int = 5, max_points: int = 50_000, seed: int = 0) -> Path:
    """Predicted rank vs measured rank (1 = fastest, log axes), Spearman rho in the title.

    The ``top`` best predicted configurations are highlighted: where they land on the measured
    axis is what the top-k score measures.
    """
    p = np.asarray(predicted_ms, dtype=np.float64)
    m = np.asarray(measured_ms, dtype=np.float64)
    ok = np.isfinite(p) & np.isfinite(m)
    if ok.sum() < 2:
        raise HybridperfError("rank_plot needs at least two configurations with both predicted and measured times")
    p, m = p[ok], m[ok]
    rp, rm = rankdata(p, method="min"), rankdata(m, method="min")
    rho = float(spearmanr(p, m).statistic)
    idx = np.arange(len(p))
    if idx.size > max_points:
        idx = np.random.default_rng(seed).choice(idx, max_points, replace=False)
    fig = _figure(5.6, 5.0)
    ax = fig.add_subplot()
    ax.scatter(rm[idx], rp[idx], s=4, alpha=0.35, c="tab:blue", linewidths=0, rasterized=True)
    best = np.argsort(p, kind="stable")[:top]
    ax.scatter(rm[best], rp[best], s=40, c="tab:red", zorder=5, label=f"top-{top} predicted")
    ax.plot([1, len(p)], [1, len(p)], color="0.4", lw=0.8, ls="--")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured rank (1 = fastest)")
    ax.set_ylabel("predicted rank")
    score = m.min() / m[best].min()
    ax.set_title(f"{title + ': ' if title else ''}Spearman {rho:.3f}, top-{top} score {score:.3f}", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    return _save(fig, path)


def trajectory_plot(curves: Mapping[str, Sequence[npt.ArrayLike]], path: str | Path, *, title: str = "",
                    target: float = 0.99) -> Path:
    """Fraction of the optimum found vs measurements, per strategy: median over seeds and the range.

    ``curves`` maps a strategy name to one array per seed (fraction of optimum after each
    measurement, as in ``Trajectory.steps["fraction_of_optimum"]``).
    """
    fig = _figure(6.0, 4.2)
    ax = fig.add_subplot()
    low = target
    for z, (name, runs) in enumerate(curves.items()):
        if not len(runs):
            continue
        n = min(len(r) for r in runs)
        a = np.stack([np.asarray(r, dtype=np.float64)[:n] for r in runs])
        x = np.arange(1, n + 1)
        med = np.median(a, axis=0)
        line = ax.plot(x, med, lw=1.8, zorder=10 - z, label=f"{name} (median of {len(runs)}, range shaded)")[0]
        ax.fill_between(x, a.min(axis=0), a.max(axis=0), color=line.get_color(), alpha=0.12, zorder=1)
        low = min(low, float(np.min(med)))
    ax.axhline(target, color="0.3", lw=0.8, ls="--", label=f"{target:.0%} of optimum")
    ax.set_xscale("log")
    ax.set_xlabel("measurements")
    ax.set_ylabel("optimum / best found")
    ax.set_ylim(max(0.0, low - 0.05), 1.005)
    ax.set_title(title or "measure-next loop vs random sampling", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    return _save(fig, path)
