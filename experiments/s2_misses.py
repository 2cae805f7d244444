"""Why NeuSight S2 misses its MAPE target on some GPUs: where the errors lie, and what the residual does there.

S2 (issue 11): NeuSight cuBLAS GEMM per GPU, trained on max(M, N, K) <= 512, tested on the larger runs
(target MAPE <= 10 % on each GPU). For each GPU this fits the product's model (the hybrid of ``evaluate``, as
``accuracy.py`` neusight-s2 does) and splits its log prediction into the calibrated analytical baseline
(overhead + scale per (kernel, GPU)) and the learned residual, then reports:

- per op (bmm, linear): the test rows, the training rows, MAPE of the product and of its baseline alone
  (the residual weighted 0), and how many test rows ran a cuBLAS kernel that no training row ran;
- per op and size shift (log2 of how far beyond the trained sizes a row lies, as the out-of-domain reason
  measures it): the same MAPEs and the product's median predicted / measured;
- beside them, two rules measured and not shipped: the residual weighted min(1, reach / shift), reach the largest
  shift the model's own forward fits (each size band predicted from the smaller ones) measured, on every row
  and only on the rows whose cuBLAS kernel no training row ran (the residual learned on other tiles);
- the fixed cost of each op: the median time of the tiny problems (B*M*N*K < 2^18), which NeuSight's
  timing (the whole PyTorch op) carries and the GEMM kernel alone does not.

    .venv/bin/python experiments/s2_misses.py    # results/s2_misses.md and .csv (about 2-3 minutes on 2 cores)
"""
from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, header, md_table  # noqa: E402
from accuracy import _load, _pipeline  # noqa: E402

from hybridperf.evaluation.splits import split_indices  # noqa: E402
from hybridperf.files import atomic_write_text  # noqa: E402
from hybridperf.learn.domain import out_of_domain, training_domain  # noqa: E402
from hybridperf.learn.folds import forward_shift, forward_splits  # noqa: E402
from hybridperf.learn.model import size_bands  # noqa: E402

TRAIN_MAX = 512
SHIFT_EDGES = [-0.1, 0.0, 1.0, 2.0, 3.0, 5.0, 8.0]  # log2 size factor bands of the tables
TINY = 2.0 ** 18  # B*M*N*K below this: a problem whose time is the op's fixed cost


def _mape(pred: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.abs(pred / y - 1.0)) * 100.0) if len(y) else float("nan")


def one_gpu(rows: pd.DataFrame, feats: pd.DataFrame) -> pd.DataFrame:
    """Test rows of one GPU with the product's prediction (``pred``), its baseline alone (``base``) and shift."""
    y = rows["time_ms"].to_numpy(dtype=np.float64)
    tr, te = split_indices(rows, "S2", seed=0, train_max_size=TRAIN_MAX)
    ok = feats["feasible"].to_numpy() > 0
    tr, te = tr[ok[tr]], te[ok[te]]
    pipe, groups = _pipeline("hybrid", 0), size_bands(rows.iloc[tr])
    pipe.fit(rows.iloc[tr], y[tr], features__features=feats.iloc[tr], hybrid__groups=groups)
    est = pipe.named_steps["hybrid"]
    X_tr = np.asarray(pipe.named_steps["features"].transform(rows.iloc[tr], features=feats.iloc[tr]), dtype=np.float64)
    ref = float(np.nanmax(forward_shift(X_tr, est.extrapolation_mask_, forward_splits(groups))))
    X = np.asarray(pipe.named_steps["features"].transform(rows.iloc[te], features=feats.iloc[te]), dtype=np.float64)
    base = est._base(X) + est._offsets(X, est.group_offsets_, est.offset_)
    with warnings.catch_warnings():  # X is the plain design matrix here, without the pipeline's column names
        warnings.simplefilter("ignore", UserWarning)
        full = np.log(est.predict(X))
    regimes = np.zeros(len(rows))
    reasons = out_of_domain(rows.iloc[te], training_domain(rows.iloc[tr], regimes[tr]), regimes[te])
    trained = set(rows.iloc[tr]["info.library_kernel"].astype(str))
    out = rows.iloc[te][["gpu", "config.op", "info.library_kernel"]].reset_index(drop=True)
    shift = np.log2(np.maximum(reasons["ood_size_factor"].to_numpy(dtype=np.float64), 1.0))
    decay = np.minimum(1.0, ref / np.maximum(shift, 1e-9))  # the residual's weight beyond the forward fits' reach
    return out.assign(measured=y[te], pred=np.exp(full), base=np.exp(base), shift=shift,
                      decayed=np.exp(base + decay * (full - base)), forward_reach=ref,
                      kernel_trained=out["info.library_kernel"].astype(str).isin(trained).to_numpy(),
                      n_train_op=rows.iloc[tr]["config.op"].value_counts().reindex(out["config.op"]).to_numpy())


def _errors(g: pd.DataFrame) -> dict[str, float]:
    """Test rows, MAPEs and the share (and MAPE) of rows on a cuBLAS kernel no training row ran, of rows ``g``."""
    y, new = g["measured"].to_numpy(), ~g["kernel_trained"].to_numpy()
    return {"n_test": len(g), "mape": _mape(g["pred"].to_numpy(), y),
            "mape_baseline_alone": _mape(g["base"].to_numpy(), y),
            "mape_residual_decayed": _mape(g["decayed"].to_numpy(), y),
            "mape_decayed_new_kernel_only": _mape(np.where(new, g["decayed"].to_numpy(), g["pred"].to_numpy()), y),
            "test_rows_new_kernel_%": 100.0 * new.mean(), "mape_new_kernel": _mape(g["pred"].to_numpy()[new], y[new])}


def per_op(t: pd.DataFrame) -> pd.DataFrame:
    recs = [{"gpu": gpu, "op": op, "n_train": int(g["n_train_op"].iloc[0]), **_errors(g)}
            for (gpu, op), g in t.groupby(["gpu", "config.op"])]
    recs += [{"gpu": gpu, "op": "all", "n_train": int(g.drop_duplicates("config.op")["n_train_op"].sum()), **_errors(g)}
             for gpu, g in t.groupby("gpu")]
    return pd.DataFrame(recs).sort_values(["gpu", "op"])


def per_shift(t: pd.DataFrame) -> pd.DataFrame:
    band = pd.cut(t["shift"], SHIFT_EDGES).astype(str)
    recs = []
    for (gpu, op, b), g in t.assign(band=band).groupby(["gpu", "config.op", "band"]):
        y = g["measured"].to_numpy()
        recs.append({"gpu": gpu, "op": op, "log2 shift": b, "n": len(g), "mape": _mape(g["pred"].to_numpy(), y),
                     "mape_baseline_alone": _mape(g["base"].to_numpy(), y),
                     "mape_residual_decayed": _mape(g["decayed"].to_numpy(), y),
                     "median pred/meas": float(np.median(g["pred"].to_numpy() / y))})
    return pd.DataFrame(recs)


def fixed_cost(rows: pd.DataFrame) -> pd.DataFrame:
    work = rows[["size.B", "size.M", "size.N", "size.K"]].fillna(1.0).prod(axis=1)
    tiny = rows[work < TINY]
    g = tiny.groupby(["gpu", "config.op"])["time_ms"]
    return (pd.DataFrame({"runs": g.size(), "min_us": g.min() * 1e3, "median_us": g.median() * 1e3})
            .reset_index().rename(columns={"config.op": "op"}))


N_EDGES = [0, 2048, 8192, 32768, 70000]  # NeuSight's N: the reduction length (cuBLAS's k)


def linear_throughput(rows: pd.DataFrame) -> pd.DataFrame:
    """Each GPU's most-run Linear cuBLAS kernel, runs over 3 ms with K <= 2048: median TFLOPS per band of the
    reduction length N, and at the measured times the hierarchical roofline's instruction power (its energy
    over the run: the power cap's input) and DRAM traffic over the spec's bandwidth."""
    from hybridperf.analytical.run import analyze
    from hybridperf.hardware import load_gpu
    from hybridperf.kernel import load_kernel
    from hybridperf.learn.features import descriptor_params

    desc, recs = load_kernel("neusight-gemm"), []
    lin = rows[(rows["config.op"] == "linear") & (rows["time_ms"] > 3.0) & (rows["size.K"] <= 2048)]
    for gpu_name, g in lin.groupby("gpu"):
        g = g[g["info.library_kernel"] == g["info.library_kernel"].value_counts().index[0]].reset_index(drop=True)
        gpu = load_gpu(gpu_name)
        hi = analyze(desc, gpu, descriptor_params(desc, g).reset_index(drop=True), models=("hierarchical",)).terms[
            "hierarchical"]
        sec = g["time_ms"].to_numpy() * 1e-3
        tflops = 2.0 * g[["size.M", "size.N", "size.K"]].prod(axis=1).to_numpy() / sec / 1e12
        band = pd.cut(g["size.N"], N_EDGES).astype(str)
        rec = {"gpu": gpu_name, "kernel": g["info.library_kernel"].iloc[0], "runs": len(g)}
        rec.update({f"TFLOPS N in {b}": float(np.median(tflops[band.to_numpy() == b]))
                    for b in pd.cut(pd.Series(N_EDGES[1:]), N_EDGES).astype(str) if (band == b).any()})
        rec["instruction W (median)"] = float(np.median(hi["energy_j"].to_numpy() / sec))
        rec["tdp_w"] = gpu.tdp_w
        rec["DRAM share of peak (median)"] = float(np.median(hi["dram_traffic_bytes"].to_numpy() / sec
                                                             / (gpu.dram_bandwidth_gbs * 1e9)))
        recs.append(rec)
    return pd.DataFrame(recs)


def main() -> None:
    t0 = time.perf_counter()
    rows, feats = _load("neusight-gemm")
    parts = []
    for gpu in sorted(rows["gpu"].unique()):
        m = (rows["gpu"] == gpu).to_numpy()
        parts.append(one_gpu(rows[m].reset_index(drop=True), feats[m].reset_index(drop=True)))
        print(f"  {gpu}: {time.perf_counter() - t0:.0f} s", flush=True)
    t = pd.concat(parts, ignore_index=True)
    ops, shifts, fixed, lt = per_op(t), per_shift(t), fixed_cost(rows), linear_throughput(rows)
    RESULTS.mkdir(parents=True, exist_ok=True)
    atomic_write_text(RESULTS / "s2_misses.csv", shifts.to_csv(index=False))
    text = header("Why NeuSight S2 misses on some GPUs", "python experiments/s2_misses.py") + "\n" + (
        "S2: train max(M, N, K) <= 512, test the larger runs, per GPU (the product's model, seed 0). "
        "`mape_baseline_alone`: the same fit with its learned residual weighted 0 (the calibrated analytical "
        "baseline). `mape_residual_decayed`: the residual weighted min(1, reach / shift) beyond the largest "
        "size shift its own forward fits measured (`reach`, log2 units: "
        + ", ".join(f"{g} {r:.2f}" for g, r in t.groupby("gpu")["forward_reach"].first().items())
        + "), a rule measured here and not shipped; `mape_decayed_new_kernel_only`: the same weight on the rows "
        "whose cuBLAS kernel no training row ran, the full residual on the others. `test_rows_new_kernel_%`: test rows whose cuBLAS kernel "
        "(tile, layout) no training row ran.\n\n"
        "## Per op\n\n" + md_table(ops) + "\n\n## Per op and size shift beyond the trained sizes\n\n"
        "`log2 shift`: log2 of the size factor of the out-of-domain reason (how far beyond the largest trained "
        "size a row lies; bmm sizes stop at 1025, linear ones reach 65536).\n\n" + md_table(shifts)
        + "\n\n## The fixed cost of each op (tiny problems, B*M*N*K < 2^18)\n\n" + md_table(fixed)
        + "\n\n## Linear throughput by reduction length\n\n"
        "Each GPU's most-run Linear kernel, runs over 3 ms with K <= 2048 (all rows, training and test): median "
        "TFLOPS per band of NeuSight's N (the reduction length), and at the measured times the hierarchical "
        "roofline's instruction energy per second (what its power cap compares with `tdp_w`) and its DRAM "
        "traffic as a share of the spec's bandwidth. A GPU whose throughput falls with N while both stay well "
        "below their limits slows down for a reason the roofline does not model.\n\n" + md_table(lt)
        + f"\n\nRun time {time.perf_counter() - t0:.0f} s.\n")
    atomic_write_text(RESULTS / "s2_misses.md", text)
    print(text)


if __name__ == "__main__":
    main()
