"""Shared fixtures: the synthetic 10^7-configuration descriptor, a small sub-space, made-up times, a model."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hybridperf.analytical.run import analyze
from hybridperf.kernel import load_kernel

DESCRIPTOR = Path(__file__).with_name("synthetic-10m.toml")
GPU = "titan-v"
SIZES = {"N": 4096.0}
# 4 x 4 x 4 x 4 x 3 x 3 x 2 = 4,608 of the 10^7 configurations; V = 3 breaks the N % V constraint.
SMALL = {"BX": [4, 16, 64, 256], "BY": [1, 4, 16, 64], "TX": [1, 2, 4, 8], "TY": [1, 2, 4, 8], "U": [1, 2, 4],
         "V": [1, 2, 3], "PAD": [0, 1]}


@pytest.fixture(scope="session")
def kernel():
    return load_kernel(DESCRIPTOR)


@pytest.fixture(scope="session")
def small_sweep(kernel) -> pd.DataFrame:
    """Every configuration of SMALL with a made-up 'measured' time (feasible ones ok, others invalid)."""
    k = kernel.with_space({n: tuple(map(float, v)) for n, v in SMALL.items()})
    cfg = pd.concat(list(k.config_space()), ignore_index=True)
    a = analyze(k, GPU, cfg.assign(**SIZES), models=["mwp-cwp"])
    rng = np.random.default_rng(0)
    t = a.terms["mwp-cwp"]["time_ms"].to_numpy() * np.exp(0.3 * np.sin(cfg["BX"].to_numpy())
                                                         + 0.1 * np.log(cfg["U"].to_numpy())
                                                         + 0.02 * rng.standard_normal(len(cfg)))
    rows = pd.DataFrame({"kernel": str(DESCRIPTOR), "gpu": GPU, "size.N": SIZES["N"]}, index=cfg.index)
    for c in cfg.columns:
        rows[f"config.{c}"] = cfg[c].to_numpy()
    rows["time_ms"] = np.where(a.feasible, t, np.nan)
    rows["status"] = np.where(a.feasible, "ok", "invalid")
    rows["reason"] = np.where(a.feasible, "", a.reason)
    return rows


@pytest.fixture(scope="session")
def model(small_sweep):
    from hybridperf.learn.model import train_model

    ok = small_sweep[small_sweep["status"] == "ok"]
    return train_model(ok.sample(300, random_state=0), booster_params={"n_estimators": 40, "n_jobs": 1})
