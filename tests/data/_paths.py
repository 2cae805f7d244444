"""Where the test fixtures and the shared raw data live, and the skip marker for the latter."""
from __future__ import annotations

from pathlib import Path

import pytest

from hybridperf.hardware import load_gpu

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "sweeps"
RAW = (REPO / ".." / "shared" / "data" / "raw").resolve()
needs_raw = pytest.mark.skipif(
    not RAW.is_dir(), reason=f"shared raw data not found at {RAW} (../shared/data/raw from the repo root); "
                             "full-file checks run where it is present (CI has it)")


def stem(name: str) -> str:
    """The spec stem a device name resolves to (so tests survive spec renames)."""
    return Path(load_gpu(name).path).stem
