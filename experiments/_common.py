"""Shared helpers for the experiment scripts: paths, markdown tables, plots."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results"
SHARED = ROOT.parent / "shared" / "data" / "raw"


def neusight_ops() -> pd.DataFrame:
    """NeuSight's ops with a descriptor and GPUs with a spec: every op but its conv, whose cuDNN algorithms vary
    with the shape (the shipped ``neusight-ops`` dataset, all rows)."""
    from hybridperf.datasets import load_dataset
    from hybridperf.hardware import gpu_names

    d = load_dataset("neusight-ops")
    return d[(d.kernel != "neusight-conv") & d.gpu.isin(set(gpu_names()))]


def git_commit(where: Path = ROOT) -> str:
    """The short commit of the checkout holding ``where`` (default: this one)."""
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=where, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def md_table(df: pd.DataFrame, floatfmt: str = ".3g") -> str:
    """A GitHub markdown table (no tabulate dependency)."""
    def fmt(v: object) -> str:
        if isinstance(v, (float, np.floating)):
            return "-" if not np.isfinite(v) else format(float(v), floatfmt)
        return str(v)
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


def header(title: str, command: str) -> str:
    return (f"# {title}\n\nRegenerate with `{command}` (commit {git_commit()}, Python {sys.version.split()[0]}).\n")


def scatter_plot(measured: np.ndarray, predicted: dict[str, np.ndarray], path: Path, title: str) -> None:
    """Predicted vs measured on log-log axes with the y = x line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 5))
    lo, hi = np.nanmin(measured), np.nanmax(measured)
    for name, pred in predicted.items():
        ax.scatter(measured, pred, s=12, label=name, alpha=0.7)
        lo, hi = min(lo, np.nanmin(pred)), max(hi, np.nanmax(pred))
    ax.plot([lo, hi], [lo, hi], "k--", lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured (ms)")
    ax.set_ylabel("predicted (ms)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def error_vs_size_plot(size: np.ndarray, measured: np.ndarray, predicted: dict[str, np.ndarray], train_max: float,
                       path: Path, title: str) -> None:
    """Absolute percentage error against problem size; the training range is shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    order = np.argsort(size)
    for name, pred in predicted.items():
        ape = np.abs(pred - measured) / measured * 100
        ax.plot(size[order], ape[order], ".-", label=name)
    ax.axvspan(np.nanmin(size), train_max, color="0.9", label="training sizes")
    ax.set_xscale("log")
    ax.set_yscale("symlog", linthresh=1)
    ax.set_xlabel("problem size")
    ax.set_ylabel("APE (%)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
