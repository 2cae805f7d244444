"""Which analytical model the measure-next loop's `analytical` prior should rank by (no data, no model).

The loop's prior when a user has neither other GPUs' sweeps of the kernel nor a trained model: an analytical
model's uncalibrated log time. Here each of the 15 recorded Kernel Tuner caches (the 10 the loop was developed
on and the 5 held out, experiments/_kt_sim.py) is replayed with that prior from MWP-CWP (the default before)
and from the hierarchical roofline, 10 seeds each, and scored by best measured time found / the cache's optimum
after 10, 20 and 50 distinct configurations. Writes results/analytical_prior.md and .csv (about 6 minutes on
2 cores).

    .venv/bin/python experiments/analytical_prior.py [--seeds N]
"""
from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _kt_sim as kts  # noqa: E402
from _common import RESULTS, header, md_table  # noqa: E402

from hybridperf.datasets import load_dataset  # noqa: E402
from hybridperf.files import atomic_write_text  # noqa: E402
from hybridperf.search.measure_next import replay, replay_pool  # noqa: E402
from hybridperf.search.prior import make_prior  # noqa: E402

BASELINES = ("mwp-cwp", "hierarchical")
BUDGETS = (10, 20, 50)


def main(argv: list[str]) -> None:
    seeds = range(int(argv[argv.index("--seeds") + 1]) if "--seeds" in argv else 10)
    t0, out, sweeps = time.perf_counter(), [], {}
    for ds, gpu, _ in kts.CACHES + kts.HELD_OUT:
        sweep = sweeps.setdefault(ds, load_dataset(ds))
        rows = sweep.loc[sweep["gpu"].astype(str) == gpu]
        kernel = str(rows["kernel"].iloc[0])
        optimum = float(rows.loc[rows["status"].astype(str) == "ok", "time_ms"].min())
        pool = replay_pool(sweep, kernel, gpu)
        for base in BASELINES:
            prior = make_prior("analytical", pool, baseline=base)
            for s in seeds:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    steps = replay(sweep, kernel, gpu, budget=max(BUDGETS), seed=s, strategy="model", prior=prior,
                                   pool=pool).steps
                t = steps["time_ms"].to_numpy(dtype=np.float64)
                out.append({"cache": f"{ds}/{gpu}", "prior": base, "seed": s,
                            **{f"at{b}": optimum / np.nanmin(t[:b]) for b in BUDGETS}})
        print(f"  {ds}/{gpu}: {time.perf_counter() - t0:.0f} s", flush=True)
    d = pd.DataFrame(out)
    atomic_write_text(RESULTS / "analytical_prior.csv", d.to_csv(index=False))
    per = d.groupby(["cache", "prior"])[[f"at{b}" for b in BUDGETS]].mean().unstack("prior")
    per.columns = [f"{b} {p}" for b, p in per.columns]
    summary = pd.DataFrame({
        "prior": BASELINES,
        **{f"median at{b}": [d.loc[d["prior"] == p, f"at{b}"].median() for p in BASELINES] for b in BUDGETS},
        **{f"within 1% at{b}": [int((d.loc[d["prior"] == p, f"at{b}"] >= 1 / 1.01).sum()) for p in BASELINES]
           for b in BUDGETS},
        "runs": [int((d["prior"] == p).sum()) for p in BASELINES]})
    text = "\n".join([
        header("The analytical prior of the measure-next loop: MWP-CWP or the hierarchical roofline",
               "python experiments/analytical_prior.py"),
        f"15 Kernel Tuner caches x {len(seeds)} seeds, `replay(..., strategy='model', prior=analytical)`; "
        "at<b>: best measured time / the cache's optimum after b distinct configurations (1.0: found).\n",
        md_table(summary), "\nMean over the seeds, per cache:\n", md_table(per.reset_index()),
        f"\nRun time {time.perf_counter() - t0:.0f} s.\n"])
    atomic_write_text(RESULTS / "analytical_prior.md", text)
    print(text)


if __name__ == "__main__":
    main(sys.argv[1:])
