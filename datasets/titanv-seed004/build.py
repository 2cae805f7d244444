"""Rebuild sweep.csv from seed 004's Tables 4-7 (hybridperf/data/seed004_titanv_tables.csv)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
TABLES = HERE.parents[1] / "hybridperf" / "data" / "seed004_titanv_tables.csv"


def main() -> None:
    t = pd.read_csv(TABLES, comment="#")
    out = pd.DataFrame({
        "kernel": t.kernel, "gpu": "titan-v", "size.N": t.N.astype(float), "time_ms": t.actual_ms,
        "repeats": pd.array([pd.NA] * len(t), dtype="Int64"), "status": "ok", "reason": "",
    })
    tmp = HERE / "sweep.csv.tmp"
    out.to_csv(tmp, index=False)
    tmp.replace(HERE / "sweep.csv")
    print(f"wrote {len(out)} rows to {HERE / 'sweep.csv'}")


if __name__ == "__main__":
    main()
