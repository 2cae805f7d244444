"""Why S6 misses its MAPE target: how much of a never-trained GPU's error is one level for the whole GPU.

S6 (issue 11): NeuSight GEMM, each GPU left out with no runs on it, predicted from its spec alone (target MAPE
<= 15% per GPU). For each held-out GPU this fits the product's model (the hybrid of ``evaluate``, as
``intervals.py`` S6 does) and splits its error in two:

- the level: the median ratio predicted / measured over the GPU's rows (one number for the whole GPU);
- the shape: the MAPE left once that one number is divided out (``mape_level_removed``), an oracle that
  knows the GPU's level and nothing else.

Beside them, from all of the GPU's rows, the measured / hierarchical-roofline ratio (``spec_efficiency``: how
far the GPU runs from what its datasheet promises, the quantity an unseen GPU's level depends on) and the
datasheet fields the model sees. If the level explains most of the error and the GPUs' spec efficiencies
differ in ways their datasheet fields do not order, no model trained on the other GPUs can find it.

    .venv/bin/python experiments/s6_level.py    # results/s6_level.md and .csv (about 6 minutes on 2 cores)
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, header, md_table  # noqa: E402
from intervals import _neusight, fit_and_predict  # noqa: E402

from hybridperf.files import atomic_write_text  # noqa: E402
from hybridperf.hardware import load_gpu  # noqa: E402
from hybridperf.learn.features import analytical_features  # noqa: E402
from hybridperf.sweep import training_rows  # noqa: E402


def spec_efficiency(rows: pd.DataFrame) -> pd.Series:
    """Per GPU: median measured / hierarchical-roofline time over all its rows (1 = runs as its spec says)."""
    feats = analytical_features(rows)
    ratio = rows["time_ms"].to_numpy() / np.exp(feats["log_hierarchical_ms"].to_numpy())
    ok = np.isfinite(ratio)
    return pd.Series(ratio[ok]).groupby(rows["gpu"].to_numpy()[ok]).median()


def level_split(pred: pd.DataFrame) -> dict[str, float]:
    """MAPE, the median predicted/measured ratio, and the MAPE once that ratio is divided out."""
    r = pred["time_ms"].to_numpy() / pred["measured_ms"].to_numpy()
    level = float(np.median(r))
    return {"n": len(r), "mape": float(np.mean(np.abs(r - 1)) * 100), "level": level,
            "mape_level_removed": float(np.mean(np.abs(r / level - 1)) * 100)}


def main() -> None:
    sweep = _neusight()
    eff = spec_efficiency(training_rows(sweep).reset_index(drop=True))
    out = []
    for gpu in sorted(sweep.gpu.unique()):
        t0 = time.perf_counter()
        pred, n_train = fit_and_predict(sweep, "S6", holdout=gpu)
        spec = load_gpu(gpu)
        out.append({"held_out": gpu, "n_train": n_train, **level_split(pred), "spec_efficiency": float(eff[gpu]),
                    "peak_fp32_gflops": spec.peak_fp32_gflops, "dram_gbs": spec.dram_bandwidth_gbs,
                    "tdp_w": spec.tdp_w, "seconds": time.perf_counter() - t0})
        print(f"  {gpu}: MAPE {out[-1]['mape']:.1f}, level {out[-1]['level']:.3f}, "
              f"level removed {out[-1]['mape_level_removed']:.1f}", flush=True)
    table = pd.DataFrame(out)
    table.to_csv(RESULTS / "s6_level.csv", index=False)
    atomic_write_text(RESULTS / "s6_level.md", "\n".join([
        header("S6: the level of a never-trained GPU", "python experiments/s6_level.py"),
        __doc__.split("\n\n", 1)[1].rsplit("\n\n", 1)[0], "", md_table(table), ""]))


if __name__ == "__main__":
    main()
