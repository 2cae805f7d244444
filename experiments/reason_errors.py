"""How much worse the rows each out-of-domain reason names are predicted, and how their intervals cover them.

Issue 12: the out-of-domain flag is a set of reasons, and a reason should say how far to trust a prediction. For each
reason of ``predict`` (a GPU never trained, few runs, a size beyond the trained range or between trained sizes, a
config value never trained, a configuration trained at no size, a config defaulted, a regime never seen), per case of
experiments/intervals.py that names it (the same fits: the product's model on the split's training rows), the test
rows it flags beside the rest: their MAPE, median |log error| and the share of them inside the 90 % and 80 %
intervals, and the median hi/lo of the 90 % interval. A reason the intervals do not widen for shows here how much
wider they would need to be.

    .venv/bin/python experiments/reason_errors.py "neusight S2" seed004 aiwc   # cases as intervals.py selects them
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, header, md_table  # noqa: E402
from intervals import cases, fit_and_predict  # noqa: E402

from hybridperf.files import atomic_write_text  # noqa: E402
from hybridperf.learn.domain import GAP_FLAG  # noqa: E402

REASONS = {
    "GPU never trained": lambda p: p["ood_gpu"].to_numpy(dtype=bool),
    "few runs": lambda p: p["ood_few_runs"].to_numpy() > 0,
    "size beyond": lambda p: p["ood_size_factor"].to_numpy(dtype=np.float64) > 1 + 1e-9,
    "size between": lambda p: p["ood_size_gap"].to_numpy(dtype=np.float64) >= GAP_FLAG,
    "config value never trained": lambda p: (p["ood_config"] != "").to_numpy(),
    "config combination never trained": lambda p: p["ood_combination"].to_numpy(dtype=bool),
    "config defaulted": lambda p: (p["ood_defaulted"] != "").to_numpy(),
    "regime never seen": lambda p: p["ood_regime"].to_numpy(dtype=bool),
}


def _stats(p: pd.DataFrame, prefix: str) -> dict[str, float]:
    y, pred = p["measured_ms"].to_numpy(), p["time_ms"].to_numpy()
    out = {f"{prefix}n": len(p)}
    if not len(p):
        return out
    out[f"{prefix}mape"] = float(np.mean(np.abs(pred / y - 1)) * 100)
    out[f"{prefix}med_abs_log"] = float(np.median(np.abs(np.log(pred / y))))
    for pct in (90, 80):
        out[f"{prefix}cover{pct}"] = float(np.mean((y >= p[f"lo{pct}"]) & (y <= p[f"hi{pct}"])) * 100)
    out[f"{prefix}hilo90"] = float(np.median(p["hi90"] / p["lo90"]))
    return out


def reason_rows(name: str, split: str, subset: str, pred: pd.DataFrame) -> list[dict]:
    """One row per (GPU, reason that flags at least one of its test rows)."""
    out = []
    for gpu, p in pred.groupby("gpu"):
        for reason, flag in REASONS.items():
            m = flag(p)
            if m.any():
                out.append({"case": name, "split": split, "gpu": str(gpu), "reason": reason,
                            **_stats(p[m], "flagged_"), **_stats(p[~m], "other_")})
    return out


def main(argv: list[str]) -> None:
    words = argv or ["neusight S2", "seed004", "aiwc"]
    rows: list[dict] = []
    t0 = time.perf_counter()
    for name, split, subset, load, opts in cases():
        if split == "default" or not any(w in f"{name} {split} {subset}" for w in words):
            continue
        pred, _ = fit_and_predict(load(), split, **opts)
        rows += reason_rows(name, split, subset, pred)
        print(f"{name} {split} {subset}: {time.perf_counter() - t0:.0f} s", flush=True)
    table = pd.DataFrame(rows)
    table.to_csv(RESULTS / "reason_errors.csv", index=False)
    show = table[["case", "split", "gpu", "reason", "flagged_n", "flagged_mape", "other_mape", "flagged_med_abs_log",
                  "other_med_abs_log", "flagged_cover90", "other_cover90", "flagged_cover80", "other_cover80",
                  "flagged_hilo90", "other_hilo90"]]
    text = [header("Out-of-domain reasons: the rows each flags beside the rest",
                   f"python experiments/reason_errors.py {' '.join(repr(w) for w in words)}"),
            "Per case of experiments/intervals.py (the same fits) and GPU, each reason that flags a test row: the "
            "flagged rows' MAPE, median |log error|, coverage of the 90 % and 80 % intervals and median hi/lo of "
            "the 90 % interval, beside the other test rows'.\n", md_table(show)]
    atomic_write_text(RESULTS / "reason_errors.md", "\n".join(text) + "\n")
    print("\n".join(text))


if __name__ == "__main__":
    main(sys.argv[1:])
