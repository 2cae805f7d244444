"""What a shared-memory bank conflict costs on each GPU of the Kernel Tuner hub caches, measured and modelled.

Writes experiments/results/smem_conflicts.md and .csv:
1. Kernel Tuner convolution: each unpadded configuration against its padded twin (everything else equal, the twin
   conflict-free by the descriptor), per GPU and modelled conflict degree: the measured time ratio (median over the
   pairs) beside the hierarchical roofline's shared-memory time ratio with the GPU's spec as shipped and with every
   bank serving one address a cycle (``smem_bank_ways_per_cycle`` 1, the model before it).
2. CLBlast Xgemm (kt-gemm-rtx, A and B staged in shared memory): the time of each configuration on the RTX 3060
   laptop over the RTX 2080 Ti's, by the descriptor's conflict degree (smem_bytes / smem_conflict_free_bytes), measured
   and modelled both ways; the TITAN RTX beside it (the 2080 Ti's architecture).
3. Spearman of the hierarchical roofline alone against the measured times, per (sweep, GPU), both ways.
Uses the datasets in datasets/ (no raw data needed).
"""
from __future__ import annotations

import functools
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, header, md_table

from hybridperf.analytical.run import analyze
from hybridperf.datasets import load_dataset
from hybridperf.hardware import load_gpu
from hybridperf.kernel import load_kernel

COMMAND = ".venv/bin/python experiments/smem_conflicts.py"
CONV = ("block_size_x", "block_size_y", "tile_size_x", "tile_size_y", "read_only", "use_padding", "filter_width",
        "filter_height", "use_shmem", "use_cmem")
XGEMM = ("MWG", "NWG", "KWG", "MDIMC", "NDIMC", "MDIMA", "NDIMB", "KWI", "VWM", "VWN", "STRM", "STRN", "SA", "SB")
# sweep -> (descriptor, its parameters, the value of those a sweep left empty: the 2021 convolution caches use both)
SWEEPS = {"kt-convolution": ("kt-convolution", CONV, {"use_shmem": 1.0, "use_cmem": 1.0}),
          "kt-gemm-rtx": ("clblast-xgemm", XGEMM, {})}


def _params(name: str, df: pd.DataFrame, params: tuple[str, ...], fill: dict[str, float]) -> pd.DataFrame:
    """The descriptor parameters of the rows; a size a sweep left empty takes its default (the hub's K)."""
    desc = load_kernel(name)
    values = {p: df[f"config.{p}"].fillna(fill.get(p, np.nan)).to_numpy(float) for p in params}
    values |= {c.split(".", 1)[1]: df[c].fillna(desc.parameters[c.split(".", 1)[1]].default).to_numpy(float)
               for c in df.columns if c.startswith("size.")}
    return pd.DataFrame(values)


@functools.cache
def _sweep(name: str) -> tuple[pd.DataFrame, object, dict[str, pd.DataFrame]]:
    """The ok rows of a sweep, the descriptor's profile of them and the hierarchical roofline's terms per row on its
    own GPU (``analyze``: registers clamped, infeasible launches NaN), as shipped and with one address per bank per
    cycle (``ways 1``), computed once for every table."""
    kernel, params, fill = SWEEPS[name]
    df = load_dataset(name)
    df = df[df["status"] == "ok"].reset_index(drop=True)
    values = _params(kernel, df, params, fill)
    prof = load_kernel(kernel).profile({c: values[c].to_numpy() for c in values})
    terms = {"shipped": [], "ways 1": []}
    for gpu in df["gpu"].unique():
        on = (df["gpu"] == gpu).to_numpy()
        spec = load_gpu(gpu)
        for label, s in (("shipped", spec), ("ways 1", spec.replace(smem_bank_ways_per_cycle=1.0))):
            a = analyze(kernel, s, values[on].reset_index(drop=True), models=["hierarchical"])
            terms[label].append(a.terms["hierarchical"].set_axis(np.flatnonzero(on)))
    return df, prof, {k: pd.concat(v).sort_index() for k, v in terms.items()}


def convolution_twins() -> pd.DataFrame:
    df, prof, terms = _sweep("kt-convolution")
    shmem = df["config.use_shmem"].fillna(1).to_numpy() == 1
    with np.errstate(invalid="ignore", divide="ignore"):
        degree = np.round(prof.smem_bytes / prof.smem_conflict_free_bytes, 2)
    rows = df.assign(degree=degree, m_shipped=terms["shipped"]["smem_ms"].to_numpy(),
                     m_ways1=terms["ways 1"]["smem_ms"].to_numpy())[shmem]
    twin = [f"config.{p}" for p in CONV if p != "use_padding" and f"config.{p}" in rows] + ["gpu"]
    pairs = rows[rows["config.use_padding"] == 0].merge(rows[rows["config.use_padding"] == 1], on=twin,
                                                        suffixes=("", "_p"))
    pairs = pairs[pairs["degree_p"] == 1]
    pairs = pairs.assign(measured=pairs["time_ms"] / pairs["time_ms_p"],
                         modelled=pairs["m_shipped"] / pairs["m_shipped_p"],
                         modelled_ways1=pairs["m_ways1"] / pairs["m_ways1_p"])
    by = pairs.groupby(["gpu", "degree"])
    out = by[["measured", "modelled", "modelled_ways1"]].median().assign(pairs=by.size()).reset_index()
    return out[(out["pairs"] >= 16) & (out["degree"] > 1)]


def xgemm_ratio() -> pd.DataFrame:
    df, prof, terms = _sweep("kt-gemm-rtx")
    with np.errstate(invalid="ignore", divide="ignore"):
        degree = prof.smem_bytes / prof.smem_conflict_free_bytes
    df = df.assign(degree=degree, p_shipped=terms["shipped"]["time_ms"].to_numpy(),
                   p_ways1=terms["ways 1"]["time_ms"].to_numpy())
    key = [f"config.{p}" for p in XGEMM]
    wide = {v: df.pivot_table(index=key, columns="gpu", values=v) for v in ("time_ms", "p_shipped", "p_ways1")}
    deg = df[df["gpu"] == "geforce-rtx-2080-ti"].set_index(key)["degree"]
    staged = (deg.index.get_level_values("config.SA") == 1) & (deg.index.get_level_values("config.SB") == 1)
    out = []
    for other in ("geforce-rtx-3060-laptop", "titan-rtx"):
        r = pd.DataFrame({v: np.log(wide[v][other] / wide[v]["geforce-rtx-2080-ti"]) for v in wide})
        r = r.join(deg.rename("degree")).dropna()
        r = r[r.index.isin(deg.index[staged])]
        r["band"] = np.floor(r["degree"]).clip(upper=4)
        g = r.groupby("band")
        out.append(g[["time_ms", "p_shipped", "p_ways1"]].median().assign(gpu=other, configs=g.size()).reset_index())
    res = pd.concat(out, ignore_index=True).rename(columns={
        "time_ms": "measured log ratio", "p_shipped": "modelled", "p_ways1": "modelled ways 1"})
    return res[["gpu", "band", "configs", "measured log ratio", "modelled", "modelled ways 1"]]


def spearman() -> pd.DataFrame:
    out = []
    for name in SWEEPS:
        df, _, terms = _sweep(name)
        t = {k: v["time_ms"].to_numpy() for k, v in terms.items()}
        for gpu, g in df.groupby("gpu"):
            i = g.index.to_numpy()
            out.append({"sweep": name, "gpu": gpu, "ways": load_gpu(gpu).smem_bank_ways_per_cycle,
                        "rho": spearmanr(t["shipped"][i], g["time_ms"], nan_policy="omit").statistic,
                        "rho ways 1": spearmanr(t["ways 1"][i], g["time_ms"], nan_policy="omit").statistic,
                        "no time": int(np.isnan(t["shipped"][i]).sum())})
    return pd.DataFrame(out)


def main() -> None:
    twins, gemm, rho = convolution_twins(), xgemm_ratio(), spearman()
    pd.concat([twins.assign(table="convolution twins"), gemm.assign(table="xgemm ratio"),
               rho.assign(table="spearman")]).to_csv(RESULTS / "smem_conflicts.csv", index=False)
    text = [header("Shared-memory bank conflicts: measured and modelled cost per GPU", COMMAND),
            "## Kernel Tuner convolution, unpadded against padded twins\n",
            "Median over the pairs (16 or more) of each GPU and modelled conflict degree (smem_bytes / "
            "smem_conflict_free_bytes): measured time ratio; the hierarchical roofline's shared-memory time ratio "
            "with the spec as shipped (GA10x parts: `smem_bank_ways_per_cycle` 2) and with one address per bank "
            "per cycle (`ways 1`, the model before).\n", md_table(twins),
            "\n## CLBlast Xgemm, one GPU over the RTX 2080 Ti\n",
            "log(time on the GPU / time on the RTX 2080 Ti) of the same configuration, A and B staged in shared "
            "memory (SA = SB = 1), median by the descriptor's conflict degree (band = floor, 4 = 4 and over): "
            "measured and modelled by the hierarchical roofline, as shipped and with ways 1.\n", md_table(gemm),
            "\n## The hierarchical roofline alone, Spearman against the measured times\n", md_table(rho)]
    (RESULTS / "smem_conflicts.md").write_text("\n".join(text) + "\n", encoding="utf-8")
    print((RESULTS / "smem_conflicts.md").read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
