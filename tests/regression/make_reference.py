"""Regenerate reference.json.gz from the current code (only when numbers are meant to change)."""
from __future__ import annotations

import gzip
import json
import sys
import time
from pathlib import Path

from tests.regression.scenarios import SCENARIOS

OUT = Path(__file__).with_name("reference.json.gz")


def main(names: list[str]) -> None:
    old = json.loads(gzip.decompress(OUT.read_bytes())) if OUT.is_file() else {}
    for name in names or list(SCENARIOS):
        t0 = time.perf_counter()
        old[name] = json.loads(json.dumps(SCENARIOS[name](), default=str))
        print(f"{name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    OUT.write_bytes(gzip.compress(json.dumps(old, sort_keys=True).encode(), mtime=0))


if __name__ == "__main__":
    main(sys.argv[1:])
