"""Check real-kernel descriptors' derived counts against recorded counters (KTT Nsight Compute, NeuSight, KT caches).

Writes experiments/results/ktt_counts.md. Needs ../shared/data/raw (see /work/shared/data/README.md).
"""
from __future__ import annotations

import gzip
import itertools
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, SHARED, header, md_table

from hybridperf.analytical.run import analyze
from hybridperf.kernel import load_kernel

COMMAND = ".venv/bin/python experiments/check_counts_ktt.py"
KTT_FILE = SHARED / "ktt-coulomb" / "Examples" / "CoulombSum3d" / "coulomb_2080_full_search_space.json.gz"
# KTT records no problem size: grid 256 is the example's gridSize; 64 atoms is read off the counters
# (65 global load requests per thread at Z_ITERATIONS = 1 with AoS: 64 atoms + 1 energyGrid load).
KTT_SIZES = {"grid": 256.0, "atoms": 64.0}
NEUSIGHT = SHARED / "neusight" / "scripts" / "asplos" / "data" / "dataset" / "train" / "collect"
KT = SHARED / "kt-benchmark-hub"
KT_OLD = KT / "currently_unused" / "cachefiles" / "KernelTuner data"


def read_ktt(path: Path) -> pd.DataFrame:
    """One row per KTT result: configuration values, launch geometry, registers, duration, counters."""
    doc = json.loads(gzip.decompress(path.read_bytes()))
    rows = []
    for r in doc["Results"]:
        row = {c["Name"]: float(c["Value"]) for c in r["Configuration"]}
        cr = r["ComputationResults"][0]
        row["status"] = r["Status"]
        row["duration_us"] = cr["Duration"]
        row["blocks"] = float(np.prod([cr["GlobalSize"][a] for a in "XYZ"]))  # GlobalSizeType CUDA: blocks
        row["threads_per_block"] = float(np.prod([cr["LocalSize"][a] for a in "XYZ"]))
        row["registers"] = cr["CompilationData"]["RegistersCount"]
        row.update({c["Name"]: c["Value"] for c in cr["ProfilingData"]["Counters"]})
        rows.append(row)
    return pd.DataFrame(rows)


def agreement(derived: np.ndarray, measured: np.ndarray) -> dict[str, float]:
    """Median ratio derived/measured, Spearman rho, and the spread of the ratio."""
    ratio = derived / measured
    ok = np.isfinite(ratio) & (measured > 0)
    r = ratio[ok]
    if not len(r):  # e.g. local memory where nvcc used none: nothing measured to compare
        return {"n": 0}
    varies = ok.sum() > 2 and np.ptp(measured[ok]) > 0 and np.ptp(derived[ok]) > 0
    rho = spearmanr(derived[ok], measured[ok]).statistic if varies else np.nan  # undefined for a constant
    return {"n": int(ok.sum()), "median_ratio": float(np.median(r)), "p10_ratio": float(np.quantile(r, 0.1)),
            "p90_ratio": float(np.quantile(r, 0.9)), "max_abs_log2": float(np.max(np.abs(np.log2(r)))),
            "within_10pct": float(np.mean(np.abs(r - 1) <= 0.10)), "spearman": float(rho)}


def ktt_check() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, dict[str, float]]:
    df = read_ktt(KTT_FILE)
    desc = load_kernel("ktt-coulomb-sum-3d")
    params = {n: df[n].to_numpy() for n in desc.config_names if n in df}
    params.update({k: np.full(len(df), v) for k, v in KTT_SIZES.items()})
    prof = desc.profile(params)
    threads = prof.total_threads
    meas_threads = df["blocks"] * df["threads_per_block"]
    geometry = {"threads exact": float(np.mean(threads == meas_threads)),
                "blocks exact": float(np.mean(prof.blocks == df["blocks"])),
                "threads_per_block exact": float(np.mean(prof.threads_per_block == df["threads_per_block"]))}
    c = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum"
    thread_insts = df["smsp__inst_executed.sum"] * df["smsp__thread_inst_executed_per_inst_executed.ratio"]
    other = sum(df[c.format(k)] for k in ("integer", "control", "misc", "conversion"))
    metrics = {
        "thread instructions executed": ((prof.comp_insts + prof.sfu_insts + prof.mem_insts) * threads, thread_insts),
        "FP32 thread instructions (incl. MUFU)": ((prof.fp_insts + prof.sfu_insts) * threads, df[c.format("fp32")]),
        "memory thread instructions": ((prof.mem_insts + prof.smem_insts) * threads, df[c.format("memory")]),
        "int+control+misc+conversion thread instructions": ((prof.comp_insts - prof.fp_insts) * threads, other),
        "global load requests (warp level)": (prof.global_loads * threads / 32,
                                              df["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"]),
        "DRAM bytes (read + write)": (prof.dram_bytes,
                                      32 * (df["dram__sectors_read.sum"] + df["dram__sectors_write.sum"])),
        "registers per thread": (prof.registers_per_thread, df["registers"]),
        "local-memory bytes (loads + stores)": (prof.local_traffic_bytes,
                                                32 * (df["l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum"]
                                                      + df["l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum"])),
    }
    u = df["INNER_UNROLL_FACTOR"].to_numpy()
    # How nvcc lowered the run-time-indexed energyValue[] (U >= 1), read off the counters: local memory
    # shows up as memory instructions beyond the global loads and stores.
    local = (df[c.format("memory")] / meas_threads > prof.global_loads + prof.global_stores + 0.5).to_numpy()
    subsets = {"all": np.ones(len(df), bool), "INNER_UNROLL_FACTOR = 0": u == 0,
               "U >= 1, nvcc used local memory": (u >= 1) & local,
               "U >= 1, nvcc kept registers (select chains)": (u >= 1) & ~local}
    rows = []
    for name, (d, m) in metrics.items():
        d, m = np.asarray(d, float), np.asarray(m, float)
        for sub, mask in subsets.items():
            rows.append({"metric": name, "configs": sub, **agreement(d[mask], m[mask])})
    table = pd.DataFrame(rows)

    # Uncalibrated analytical times (descriptor counts -> models) against the measured durations.
    analysis = analyze(desc, "rtx-2080-ti", pd.DataFrame(params))
    res = analysis.summary()
    # The hierarchical roofline's DRAM traffic: the compulsory bytes plus the local memory L2 cannot hold.
    dram = 32 * (df["dram__sectors_read.sum"] + df["dram__sectors_write.sum"]).to_numpy(float)
    model_dram = analysis.terms["hierarchical"]["dram_traffic_bytes"].to_numpy()
    table = pd.concat([table, pd.DataFrame([{"metric": "DRAM bytes, hierarchical roofline (+ local memory beyond L2)",
                                             "configs": sub, **agreement(model_dram[mask], dram[mask])}
                                            for sub, mask in subsets.items()])], ignore_index=True)
    meas_ms = df["duration_us"].to_numpy() / 1e3
    trows = []
    for col in ("mwp_cwp_ms", "gpuperf_ms", "roofline_ms", "hierarchical_ms"):
        for sub, mask in subsets.items():
            trows.append({"model": col[:-3], "configs": sub, **agreement(res[col].to_numpy()[mask], meas_ms[mask])})
    times = pd.DataFrame(trows)
    per_config = df[["WORK_GROUP_SIZE_X", "WORK_GROUP_SIZE_Y", "Z_ITERATIONS", "INNER_UNROLL_FACTOR", "USE_SOA"]].copy()
    per_config["derived_insts_per_thread"] = (prof.comp_insts + prof.sfu_insts + prof.mem_insts)
    per_config["measured_insts_per_thread"] = thread_insts / meas_threads
    per_config["derived_regs"] = prof.registers_per_thread
    per_config["measured_regs"] = df["registers"]
    per_config["duration_us"] = df["duration_us"]
    per_config = (per_config.groupby(["Z_ITERATIONS", "INNER_UNROLL_FACTOR", "USE_SOA"], as_index=False)
                  .agg(derived_insts_per_thread=("derived_insts_per_thread", "first"),
                       measured_insts_per_thread=("measured_insts_per_thread", "median"),
                       derived_regs=("derived_regs", "first"), measured_regs=("measured_regs", "median"),
                       median_duration_us=("duration_us", "median")))
    lowered = df.loc[(u >= 1) & local, ["Z_ITERATIONS", "INNER_UNROLL_FACTOR"]].drop_duplicates()
    geometry["local-memory (Z, U)"] = ", ".join(f"({int(a)}, {int(b)})" for a, b in sorted(lowered.to_numpy().tolist()))
    return table, times, per_config, geometry


def neusight_check() -> pd.DataFrame:
    """Derived grid (from the tile in the kernel name) against NeuSight's recorded Grid x/y/z."""
    desc = load_kernel("neusight-gemm")
    rows = []
    for op in ("bmm", "linear"):
        for f in sorted((NEUSIGHT / op / "p2.1.0").glob("*.csv.gz")):
            t = pd.read_csv(f)
            tile = t["Kernel Name"].str.extract(r"sgemm_(\d+)x(\d+)_")
            named = tile[0].notna()
            t, tile = t[named], tile[named].astype(float)
            linear = float(op == "linear")
            splitk = t["Grid z"] / (1.0 if linear else t["B"])
            prof = desc.profile({"B": t["B"], "M": t["M"], "N": t["N"], "K": t["K"], "TILE_M": tile[0],
                                 "TILE_N": tile[1], "THREADS": t["Block x"],
                                 "SLICED": np.where(t["Kernel Name"].str.contains("sliced1x4"), 4.0, 1.0),
                                 "SPLITK": splitk, "LINEAR": linear})
            gx = np.ceil(t["K"] / tile[0])
            gy = np.ceil(np.where(linear, t["B"] * t["M"], t["M"]) / tile[1])
            rows.append({"op": op, "gpu": t["Device"].iloc[0], "rows": len(t), "rows without tile name": int((~named).sum()),
                         "grid x exact": float(np.mean(gx == t["Grid x"])),
                         "grid y exact": float(np.mean(gy == t["Grid y"])),
                         "blocks exact": float(np.mean(prof.blocks == t["Grid x"] * t["Grid y"] * t["Grid z"])),
                         "split-K rows": int((splitk > 1).sum())})
    return pd.DataFrame(rows)


def kt_constraint_check() -> pd.DataFrame:
    """Descriptor constraints against the configurations the Kernel Tuner caches hold / mark as failed."""
    rows = []
    specs = [("clblast-xgemm", KT_OLD / "gemm" / f"{g}.json.gz") for g in ("RTX_2080_Ti", "RTX_Titan", "RTX_3060_laptop")]
    specs += [("kt-convolution", KT_OLD / "convolution" / f"{g}.json.gz") for g in ("RTX_2080_Ti", "RTX_Titan", "RTX_3060_laptop")]
    specs += [("kt-convolution", KT / "cachefiles" / "convolution_milo" / f"{g}.json.gz") for g in ("A100", "A4000")]
    specs += [("kt-dedispersion", KT / "cachefiles" / "dedispersion_milo" / f"{g}.json.gz") for g in ("A100", "A4000")]
    for kernel, path in specs:
        desc = load_kernel(kernel)
        doc = json.loads(gzip.decompress(path.read_bytes()))
        keys = doc["tune_params_keys"]
        cache = pd.DataFrame([{**{k: e[k] for k in keys}, "time": e["time"]} for e in doc["cache"].values()])
        params = {k: cache[k].to_numpy(float) for k in keys}
        ok_mask, _ = desc.constraint_mask(params)
        t = cache["time"]
        comp_fail = (t.astype(str) == "CompilationFailedConfig").to_numpy()
        run_fail = (t.astype(str) == "RuntimeFailedConfig").to_numpy()
        timed = ~comp_fail & ~run_fail
        product = pd.DataFrame(list(itertools.product(*doc["tune_params"].values())), columns=list(doc["tune_params"]))
        pmask, _ = desc.constraint_mask({k: product[k].to_numpy(float) for k in product})
        rows.append({"kernel": kernel, "cache": str(path.relative_to(SHARED)), "entries": len(cache),
                     "timed entries allowed": f"{int(ok_mask[timed].sum())}/{int(timed.sum())}",
                     "CompilationFailed rejected": f"{int((~ok_mask[comp_fail]).sum())}/{int(comp_fail.sum())}",
                     "RuntimeFailed rejected": f"{int((~ok_mask[run_fail]).sum())}/{int(run_fail.sum())}",
                     "tune_params product allowed": f"{int(pmask.sum())}/{len(product)}"})
    import zipfile

    with zipfile.ZipFile(SHARED / "sgemm-uci" / "sgemm_product_dataset.zip") as zf:
        uci = pd.read_csv(zf.open("sgemm_product.csv"))
    desc = load_kernel("clblast-xgemm")
    names = list(uci.columns[:14])
    sizes = {"M": 2048.0, "N": 2048.0, "K": 2048.0}
    ok_mask, _ = desc.constraint_mask({**sizes, **{k: uci[k].to_numpy(float) for k in names}})
    product = pd.DataFrame(list(itertools.product(*(sorted(uci[k].unique()) for k in names))), columns=names)
    pmask, _ = desc.constraint_mask({**sizes, **{k: product[k].to_numpy(float) for k in names}})
    rows.append({"kernel": "clblast-xgemm", "cache": "sgemm-uci/sgemm_product_dataset.zip (M=N=K=2048)",
                 "entries": len(uci), "timed entries allowed": f"{int(ok_mask.sum())}/{len(uci)}",
                 "CompilationFailed rejected": "0/0", "RuntimeFailed rejected": "0/0",
                 "tune_params product allowed": f"{int(pmask.sum())}/{len(product)}"})
    return pd.DataFrame(rows)


def _kt_cache(path: Path) -> pd.DataFrame:
    doc = json.loads(gzip.decompress(path.read_bytes()))
    keys = doc["tune_params_keys"]
    df = pd.DataFrame([{**{k: e[k] for k in keys}, "time": e["time"]} for e in doc["cache"].values()])
    df["time_ms"] = pd.to_numeric(df["time"], errors="coerce")
    return df[df["time_ms"].notna() & (df["time_ms"] < 1e19)].drop(columns="time").reset_index(drop=True)


def model_time_check() -> pd.DataFrame:
    """Uncalibrated analytical times from each descriptor against the recorded times (ranking quality)."""
    import zipfile

    cases = []
    with zipfile.ZipFile(SHARED / "sgemm-uci" / "sgemm_product_dataset.zip") as zf:
        uci = pd.read_csv(zf.open("sgemm_product.csv"))
    runs = [c for c in uci.columns if c.startswith("Run")]
    cases.append(("clblast-xgemm", "gtx680", "sgemm-uci (M=N=K=2048)",
                  uci.iloc[:, :14].astype(float).assign(M=2048.0, N=2048.0, K=2048.0), uci[runs].median(axis=1)))
    for gpu, f in (("rtx-2080-ti", "RTX_2080_Ti"), ("titan-rtx", "RTX_Titan")):
        d = _kt_cache(KT_OLD / "gemm" / f"{f}.json.gz")
        cases.append(("clblast-xgemm", gpu, f"KT hub gemm {f} (4096^3)", d.drop(columns="time_ms").astype(float),
                      d["time_ms"]))
    for gpu, f in (("a100-pcie-40gb", "A100"), ("rtx-a4000", "A4000")):
        d = _kt_cache(KT / "cachefiles" / "convolution_milo" / f"{f}.json.gz")
        cases.append(("kt-convolution", gpu, f"KT hub convolution_milo {f}", d.drop(columns="time_ms").astype(float),
                      d["time_ms"]))
        d = _kt_cache(KT / "cachefiles" / "dedispersion_milo" / f"{f}.json.gz")
        cases.append(("kt-dedispersion", gpu, f"KT hub dedispersion_milo {f}",
                      d.drop(columns="time_ms").astype(float), d["time_ms"]))
    d = _kt_cache(KT_OLD / "convolution" / "RTX_2080_Ti.json.gz")
    cases.append(("kt-convolution", "rtx-2080-ti", "KT convolution RTX_2080_Ti (2023)",
                  d.drop(columns="time_ms").astype(float), d["time_ms"]))
    for gpu, f in (("tesla-v100-pcie-16gb", "Tesla V100-PCIE-32GB"), ("a100-pcie-40gb", "NVIDIA A100-PCIE-40GB")):
        t = pd.read_csv(NEUSIGHT / "bmm" / "p2.1.0" / f"{f}.csv.gz")
        tile = t["Kernel Name"].str.extract(r"sgemm_(\d+)x(\d+)_")
        t, tile = t[tile[0].notna()].reset_index(drop=True), tile[tile[0].notna()].astype(float).reset_index(drop=True)
        params = pd.DataFrame({"B": t["B"], "M": t["M"], "N": t["N"], "K": t["K"], "TILE_M": tile[0],
                               "TILE_N": tile[1], "THREADS": t["Block x"],
                               "SLICED": np.where(t["Kernel Name"].str.contains("sliced1x4"), 4.0, 1.0),
                               "SPLITK": t["Grid z"] / t["B"], "LINEAR": 0.0}).astype(float)
        note = " (spec: the 16 GB part)" if "V100" in f else ""
        cases.append(("neusight-gemm", gpu, f"NeuSight bmm {f}{note}", params, t["Latency"]))
    rows = []
    for kernel, gpu, data, params, meas in cases:
        s = analyze(kernel, gpu, params).summary()
        ok = (s["status"] == "ok").to_numpy()
        m = np.asarray(meas, float)
        row = {"kernel": kernel, "gpu spec": gpu, "data": data, "rows": len(params), "feasible": int(ok.sum())}
        for col in ("mwp_cwp_ms", "gpuperf_ms", "roofline_ms"):
            r = s[col].to_numpy()[ok] / m[ok]
            row[f"{col[:-3]} spearman"] = float(spearmanr(s[col].to_numpy()[ok], m[ok]).statistic)
            row[f"{col[:-3]} median ratio"] = float(np.median(r))
        rows.append(row)
    return pd.DataFrame(rows)


def main() -> None:
    table, times, per_config, geometry = ktt_check()
    ns = neusight_check()
    kt = kt_constraint_check()
    mt = model_time_check()
    out = [header("Descriptor counts against recorded counters", COMMAND)]
    out.append(f"""
## KTT CoulombSum3d, RTX 2080 Ti: `ktt-coulomb-sum-3d` against Nsight Compute

Data: `../shared/data/raw/ktt-coulomb/Examples/CoulombSum3d/coulomb_2080_full_search_space.json.gz`
(HiPerCoRe/KTT @ 931c4157, KTT 2.1.0, 210 configurations, each profiled with ~33 counters). Sizes
grid = {KTT_SIZES['grid']:g} (the example's gridSize) and atoms = {KTT_SIZES['atoms']:g} (inferred from the counters;
KTT does not record it). Per configuration the descriptor's per-thread counts times the derived thread count
are compared with the whole-kernel counter; ratio = derived / measured. "spearman" ranks configurations.
Launch geometry derived vs recorded (fraction exact): {', '.join(f'{k} {v:.0%}' for k, v in geometry.items() if k != 'local-memory (Z, U)')}.
Configurations where nvcc put energyValue[] in local memory (Z_ITERATIONS, INNER_UNROLL_FACTOR), read off the
memory-instruction counter: {geometry['local-memory (Z, U)']}; all other U >= 1 configurations kept it in registers.

Counter mapping: thread instructions = `smsp__inst_executed.sum` x `smsp__thread_inst_executed_per_inst_executed.ratio`;
FP32 = `smsp__sass_thread_inst_executed_op_fp32_pred_on.sum` (it includes MUFU.RSQ: 513 per thread at Z = 1 =
64 x (4 + 4) + 1) against fp_insts + sfu_insts; memory = `..._op_memory_pred_on.sum` (global, local and shared)
against coal + uncoal + smem instructions; other = integer + control + misc + conversion against
comp_insts - fp_insts; global load requests = `l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum` against
global_loads x threads / 32; DRAM = 32 B x (`dram__sectors_read.sum` + `dram__sectors_write.sum`).

""")
    out.append(md_table(table))
    out.append("""

Per (Z_ITERATIONS, INNER_UNROLL_FACTOR, USE_SOA): instructions per thread (the five work-group shapes give the
same per-thread counts; measured = median over them) and registers.

""")
    out.append(md_table(per_config))
    out.append("""

Uncalibrated analytical times from these counts (`analyze(..., "rtx-2080-ti")`, GPU spec machine parameters as
shipped) against the measured kernel durations (ratio = predicted / measured):

""")
    out.append(md_table(times))
    out.append("""

## NeuSight bmm/linear: `neusight-gemm` grid against the recorded launch

Data: `../shared/data/raw/neusight/.../train/collect/{bmm,linear}/p2.1.0/*.csv.gz` (trsharm25/NeuSight @ db1fdc96).
TILE_M x TILE_N from the cuBLAS kernel name, THREADS = Block x, SLICED from `sliced1x4`, SPLITK = Grid z / B (bmm)
or Grid z (linear). Grid x and y are derived independently of the record (z is not: it defines SPLITK).

""")
    out.append(md_table(ns))
    out.append("""

## Kernel Tuner caches: descriptor constraints against recorded validity

Data: `../shared/data/raw/kt-benchmark-hub/...` (AutoTuningAssociation/benchmark_hub @ 8eeb99e7). These caches record
times only (no profiler counters; GFLOP/s is derived from the time), so the check is on the configuration space:
timed entries must satisfy the constraints, CompilationFailedConfig entries (static shared memory above 48 KiB)
must be rejected. "tune_params product allowed" counts the cache's Cartesian product that the constraints allow
(equal to the entry count where the cache is exactly the constrained space).

""")
    out.append(md_table(kt))
    out.append("""

## Uncalibrated model times from the descriptors against recorded times

No fitting: descriptor counts for every recorded configuration, GPU spec machine parameters as shipped. "spearman"
is the rank correlation over configurations (how well the raw model orders them); "median ratio" = predicted /
measured. Rows flagged infeasible by the occupancy calculator are left out ("feasible"); on the GTX 680 they are the
configurations whose estimated registers exceed Kepler's 63 per thread (nvcc spills there instead of failing).

""")
    out.append(md_table(mt))
    out.append("\n")
    path = RESULTS / "ktt_counts.md"
    path.write_text("".join(out), encoding="utf-8")
    print(f"wrote {path}")
    print(table.to_string())
    print(times.to_string())
    print(ns.to_string())
    print(kt.to_string())
    print(mt.to_string())


if __name__ == "__main__":
    main()
