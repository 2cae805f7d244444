"""Where the hierarchical roofline's power-cap constants come from: the sustained rate of the 75 W Tesla P4.

The power cap (analytical/hierarchy.py) charges a launch E / P - tau where P is the board power (``tdp_w``),
E = e x the thread instructions the launch issues, e = ``energy_per_inst_pj`` (default: a constant per
nanometre of the process node, times ``process_nm``) and tau = ``power_burst_ms``, the time a part may run
above its cap before the power controller pulls the clock down. Rearranged, the fastest instruction rate a
power-limited part sustains over a run of length t is

    rate(t) = (P / e) (1 + tau / t)

so on the fastest runs of each length (the 95th percentile of the thread-instruction rate per band of run
time, 1-100 ms) a least-squares line of rate on 1/t gives P / e (its intercept) and tau (slope / intercept).

The fit uses the Tesla P4 alone (75 W, 16 nm; NeuSight's cuBLAS GEMM runs): the one part of the five whose
rate falls with run length for a reason other than the kernel and whose node no other part shares at low
power. The other GPUs are shown beside it, unfitted: each one's instruction rate at its best, what e that
would be at its board power (an upper bound on e where the part is not power-limited), and the T4's rate
against what the P4's constant predicts at 12 nm, the out-of-sample check.

    .venv/bin/python experiments/power_constants.py     # results/power_constants.md (under a minute)
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, header, md_table  # noqa: E402

from hybridperf.datasets import load_dataset  # noqa: E402
from hybridperf.files import atomic_write_text  # noqa: E402
from hybridperf.hardware import load_gpu  # noqa: E402
from hybridperf.learn.features import analytical_features  # noqa: E402
from hybridperf.sweep import training_rows  # noqa: E402

FIT_GPU = "tesla-p4"
BANDS_MS = (1.0, 3.0, 10.0, 30.0, 100.0)
QUANTILE = 0.95


def thread_instructions(feats: pd.DataFrame) -> np.ndarray:
    """Thread instructions a launch issues: per-thread compute, SFU and global-memory instructions (the
    hierarchical roofline's issue count, spills aside) times the threads."""
    per_thread = sum(np.expm1(feats[c].to_numpy()) for c in ("log1p_comp_insts", "log1p_sfu_insts",
                                                               "log1p_coal_mem_insts", "log1p_uncoal_mem_insts"))
    return per_thread * np.exp(feats["log_total_threads"].to_numpy())


def envelope(rows: pd.DataFrame, insts: np.ndarray) -> pd.DataFrame:
    """Per GPU and band of run time: the median run time and the QUANTILE of the instruction rate (1e12/s)."""
    d = pd.DataFrame({"gpu": rows["gpu"].to_numpy(), "t": rows["time_ms"].to_numpy(),
                      "rate": insts / rows["time_ms"].to_numpy() / 1e9})
    d["band"] = pd.cut(d["t"], BANDS_MS)
    g = d.dropna(subset=["band"]).groupby(["gpu", "band"], observed=True)
    return g.agg(t_ms=("t", "median"), rate=("rate", lambda r: r.quantile(QUANTILE)), n=("t", "size")).reset_index()


def fit(env: pd.DataFrame) -> tuple[float, float]:
    """(P / e in 1e12 instructions/s, tau in ms) from rate = a + a tau / t."""
    slope, intercept = np.polyfit(1.0 / env["t_ms"].to_numpy(), env["rate"].to_numpy(), 1)
    return float(intercept), float(slope / intercept)


def main() -> None:
    rows = training_rows(load_dataset("neusight-gemm"))
    feats = analytical_features(rows)
    env = envelope(rows, thread_instructions(feats))
    sustained, tau = fit(env[env["gpu"] == FIT_GPU])
    spec = load_gpu(FIT_GPU)
    e_pj = spec.tdp_w / (sustained * 1e12) * 1e12
    per_nm = e_pj / spec.process_nm
    lines = [header("Power-cap constants of the hierarchical roofline", "python experiments/power_constants.py"),
             __doc__.split("\n\n")[1].replace("\n", " "), "",
             f"Fit on {FIT_GPU} ({spec.tdp_w:g} W, {spec.process_nm:g} nm), {len(env[env.gpu == FIT_GPU])} bands of "
             f"1-100 ms: sustained {sustained:.3f}e12 thread instructions/s, so e = {e_pj:.1f} pJ per thread "
             f"instruction = **{per_nm:.2f} pJ per nm** of the node; burst **tau = {tau:.2f} ms**.", ""]
    table = env.copy()
    table["band"] = table["band"].astype(str)
    out = []
    for gpu, g in table.groupby("gpu"):
        s = load_gpu(gpu)
        best = float(g["rate"].max())
        cap = s.tdp_w / (per_nm * s.process_nm)  # 1e12 instructions/s the P4's constant allows this part
        out.append({"gpu": gpu, "tdp_w": s.tdp_w, "process_nm": s.process_nm, "best_rate": best,
                    "e_at_best_pj_per_nm": s.tdp_w / (best * s.process_nm),
                    "longest_band_rate": float(g.sort_values("t_ms")["rate"].iloc[-1]),
                    "cap_from_fit": cap, "longest_over_cap": float(g.sort_values("t_ms")["rate"].iloc[-1]) / cap})
    lines += ["Per GPU (rates in 1e12 thread instructions per second; `e_at_best` is the energy per instruction and "
              "nanometre at which the part's best rate would use its whole board power, an upper bound on e where "
              "it is not power-limited; `cap_from_fit` the rate the fitted constant allows it):", "",
              md_table(pd.DataFrame(out)), "", "Envelope (the fastest runs per band of run time):", "",
              md_table(table), ""]
    path = atomic_write_text(RESULTS / "power_constants.md", "\n".join(lines))
    print("\n".join(lines[2:5]))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
