"""How fast an SM starts blocks: the hierarchical roofline's ``block_launch_cycles``, from recorded runs.

For every ok run of a dataset, time x core clock / ceil(blocks / SMs) is an upper bound on the cycles an
SM spends per block start (the launch cannot be faster than starting its blocks). Its minimum over the
runs of a GPU is the tightest such bound; where many runs of different kernels and sizes sit on the
same minimum (to within 2 %), that minimum is the block-launch rate itself. Writes
experiments/results/block_launch.md. No GPU needed; about a minute.
"""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, header, md_table

from hybridperf.datasets import list_datasets, load_dataset
from hybridperf.errors import HybridperfError
from hybridperf.hardware import load_gpu
from hybridperf.learn.features import analytical_features

COMMAND = ".venv/bin/python experiments/block_launch.py"
MAX_ROWS = 30_000  # a seeded sample of the larger datasets


def per_gpu(name: str) -> list[dict[str, object]]:
    d = load_dataset(name)
    d = d[d["status"] == "ok"].reset_index(drop=True)
    if len(d) > MAX_ROWS:
        d = d.sample(MAX_ROWS, random_state=0).reset_index(drop=True)
    blocks = np.exp(analytical_features(d)["log_blocks"].to_numpy())
    out = []
    for gpu_name, idx in d.groupby("gpu").groups.items():
        gpu = load_gpu(str(gpu_name))
        idx = np.asarray(idx)
        per_sm = np.ceil(blocks[idx] / gpu.sm_count)
        cycles = d["time_ms"].to_numpy()[idx] * 1e-3 * gpu.core_clock_hz / per_sm
        best = float(np.nanmin(cycles))
        near = cycles <= 1.02 * best
        out.append({"dataset": name, "gpu": gpu_name, "runs": len(idx), "min cycles per block per SM": best,
                    "ns at the spec clock": best / gpu.core_clock_mhz * 1e3,
                    "runs within 2 %": int(near.sum()),
                    "kernels within 2 %": ", ".join(sorted(set(d["kernel"].to_numpy()[idx][near].astype(str)))),
                    "spec block_launch_cycles": gpu.block_launch_cycles})
    return out


def main() -> None:
    warnings.simplefilter("ignore")
    rows = []
    for info in list_datasets():
        try:
            rows += per_gpu(info.name)
        except HybridperfError as exc:  # a dataset whose GPUs or kernels have no shipped spec/descriptor
            print(f"skipped {info.name}: {exc}", file=sys.stderr)
    res = pd.DataFrame(rows)
    res.to_csv(RESULTS / "block_launch.csv", index=False)
    rec = res[res["dataset"].str.endswith("-cuda-bench")]
    text = [
        header("Block-launch rate: the fewest cycles per block start any recorded run allows", COMMAND),
        "min cycles per block per SM: the minimum over a GPU's ok runs of time x core clock / ceil(blocks / "
        "SMs), an upper bound on the cycles an SM needs to start a block. runs within 2 %: how many runs sit on "
        "that minimum, and of which kernels. On the project's recordings the minimum is "
        + ", ".join(f"{r['gpu']} {r['min cycles per block per SM']:.1f} cycles ({r['ns at the spec clock']:.1f} ns, "
                    f"{r['runs within 2 %']} runs of {r['kernels within 2 %']})" for _, r in rec.iterrows())
        + ": runs of four kernels with different bytes per block, at several sizes, share one floor, so it is "
        "the block-launch rate; the H200 and H100 SXM specs give `block_launch_cycles = 157`. Elsewhere one "
        "kernel at most sits on the minimum: a loose bound, except perhaps the Turing pnpoly runs (many runs at "
        "83 cycles on the 2080 Ti and 98 on the TITAN RTX, both about 54-55 ns), which allow fewer cycles than "
        "GH100's, so 157 is no default for other architectures; those specs are left without the parameter "
        "(one kernel is not enough to tell a launch floor from that kernel's own cost).\n",
        md_table(res, ".4g"),
    ]
    (RESULTS / "block_launch.md").write_text("\n".join(text) + "\n", encoding="utf-8")
    print((RESULTS / "block_launch.md").read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
