"""Paths to the real-kernel fixtures and to the shared raw data (tests skip when it is absent)."""
from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ktt"
SWEEP_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sweeps"
RAW = Path(__file__).resolve().parents[3] / "shared" / "data" / "raw"
REAL_KERNELS = ("clblast-xgemm", "neusight-gemm", "kt-convolution", "kt-dedispersion", "ktt-coulomb-sum-3d",
                "kt-pnpoly", "kt-hotspot", "kt-expdist")


def raw(*parts: str) -> Path:
    """A file under ../shared/data/raw, or skip the test with the reason."""
    path = RAW.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} not present (shared raw data is only available next to the checkout)")
    return path
