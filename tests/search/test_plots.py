"""Ranking charts render to PNG files; the public API of the ranking modules is explicit."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

from hybridperf.errors import HybridperfError
from hybridperf.search.plots import pareto_plot, rank_plot, trajectory_plot

PNG = b"\x89PNG\r\n\x1a\n"


def test_pareto_plot_with_and_without_times(tmp_path) -> None:
    rng = np.random.default_rng(0)
    eff, util = 10 ** rng.uniform(-12, -10, 500), rng.uniform(0, 300, 500)
    t = 1 / (eff * 1e10) + 100 / (util + 1)
    t[:5] = np.nan  # failed runs are drawn apart
    for name, kw in (("plain.png", {}), ("timed.png", {"measured_ms": t, "title": "synthetic"})):
        path = pareto_plot(eff, util, tmp_path / name, max_points=200, **kw)
        assert path.read_bytes()[:8] == PNG
    with pytest.raises(HybridperfError, match="same length"):
        pareto_plot(eff, util[:-1], tmp_path / "x.png")


def test_rank_plot(tmp_path) -> None:
    rng = np.random.default_rng(0)
    m = rng.lognormal(size=300)
    path = rank_plot(m * rng.lognormal(sigma=0.1, size=300), m, tmp_path / "r.png", title="demo")
    assert path.read_bytes()[:8] == PNG
    with pytest.raises(HybridperfError, match="at least two"):
        rank_plot([1.0], [1.0], tmp_path / "bad.png")


def test_trajectory_plot(tmp_path) -> None:
    curves = {"loop": [np.linspace(0.5, 1, 40), np.linspace(0.6, 1, 50)], "random": [np.linspace(0.3, 0.9, 40)]}
    assert trajectory_plot(curves, tmp_path / "t.png").read_bytes()[:8] == PNG


@pytest.mark.parametrize("name", ["hybridperf.search.pareto", "hybridperf.search.rank", "hybridperf.search.measure_next",
                                  "hybridperf.search.plots"])
def test_all_is_sorted_and_resolves(name: str) -> None:
    mod = importlib.import_module(name)
    key = lambda n: (0 if n.isupper() else 1 if n[0].isupper() else 2, n)
    assert list(mod.__all__) == sorted(mod.__all__, key=key)
    for attr in mod.__all__:
        assert hasattr(mod, attr), attr
