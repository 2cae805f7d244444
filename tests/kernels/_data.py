"""The real-data kernels the descriptor tests cover (paths come from tests.paths)."""
from __future__ import annotations

from tests.paths import KTT_FIXTURES as FIXTURES
from tests.paths import RAW, SWEEP_FIXTURES, raw

__all__ = ["FIXTURES", "RAW", "REAL_KERNELS", "SWEEP_FIXTURES", "raw"]

REAL_KERNELS = ("clblast-xgemm", "neusight-gemm", "kt-convolution", "kt-dedispersion", "ktt-coulomb-sum-3d",
                "kt-pnpoly", "kt-hotspot", "kt-expdist")
