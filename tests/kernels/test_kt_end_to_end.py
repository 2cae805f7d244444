"""Every shipped Kernel Tuner / KTT sweep: its recorded space lies in the descriptor's, and it trains and replays."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hybridperf.datasets import load_dataset
from hybridperf.kernel import load_kernel
from hybridperf.learn.model import predict_rows, train_model
from hybridperf.search.loop import LoopOptions
from hybridperf.search.measure_next import replay
from hybridperf.sweep import training_rows

DATASETS = ("kt-convolution", "kt-dedispersion", "kt-gemm-rtx", "ktt-coulomb", "kt-hotspot", "kt-expdist", "kt-pnpoly")


@pytest.fixture(scope="module", params=DATASETS)
def sweep(request) -> pd.DataFrame:
    return load_dataset(request.param).reset_index(drop=True)


def test_recorded_configurations_lie_in_the_descriptor_space(sweep) -> None:
    for kernel, rows in sweep.groupby("kernel"):
        desc = load_kernel(str(kernel))
        params = {}
        for col in rows.columns:
            name = col.split(".", 1)[-1]
            if col.startswith(("size.", "config.")):
                assert name in desc.parameters, f"{kernel}: {col} is not a descriptor parameter"
                v = rows[col].to_numpy(np.float64)
                # merged sweeps leave a parameter one source did not tune empty: the kernel ran with its default
                params[name] = np.where(np.isnan(v), desc.parameters[name].default, v)
        ok, reasons = desc.constraint_mask(params)  # raises if a recorded value is not an allowed value
        timed = (rows["status"] == "ok").to_numpy()
        assert ok[timed].all(), sorted({r for r, t in zip(reasons, timed) if t and r})[:3]


@pytest.mark.slow
def test_all_sweeps_train_together_and_predict() -> None:
    parts, held = [], []
    for name in DATASETS:
        rows = training_rows(load_dataset(name)).reset_index(drop=True)
        pick = rows.sample(n=100, random_state=0)
        parts.append(pick)
        held.append(rows.drop(pick.index).sample(n=20, random_state=1))
    # train_model refuses rows their descriptor calls infeasible; a short booster keeps the test quick
    model = train_model(pd.concat(parts, ignore_index=True), booster_params={"n_estimators": 40})
    assert set(model.features.baselines_) == {str(k) for p in parts for k in p["kernel"].unique()}
    pred = predict_rows(model, pd.concat(held, ignore_index=True))
    assert np.isfinite(pred["time_ms"]).all() and pred["feasible"].all()


def test_replays(sweep) -> None:
    kernel, gpu = sweep.iloc[0][["kernel", "gpu"]]
    group = sweep[(sweep["kernel"] == kernel) & (sweep["gpu"] == gpu)]
    sizes = {c[5:]: float(group[c].iloc[0]) for c in group.columns if c.startswith("size.") and group[c].notna().all()}
    for strategy in ("model", "random"):
        traj = replay(sweep, str(kernel), str(gpu), sizes, budget=24, seed=0, strategy=strategy,
                      options=LoopOptions(members=3))
        steps = traj.steps
        assert len(steps) == 24 and steps["index"].is_unique
        frac = steps["fraction_of_optimum"].to_numpy()
        assert (np.diff(frac) >= 0).all() and 0 < frac[-1] <= 1
        assert traj.optimum_ms == pytest.approx(group.loc[group["status"] == "ok", "time_ms"].min())
