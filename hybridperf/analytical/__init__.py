"""Analytical performance models: pure, vectorised functions returning named terms."""
from __future__ import annotations

from hybridperf.analytical.gpuperf import GPUPerfResult, gpuperf
from hybridperf.analytical.hierarchy import HierarchyResult, hierarchy
from hybridperf.analytical.mwp_cwp import MWPCWPResult, mwp_cwp
from hybridperf.analytical.occupancy import OccupancyResult, occupancy
from hybridperf.analytical.roofline import RooflineResult, roofline
from hybridperf.analytical.ryoo import RyooResult, ryoo_metrics
from hybridperf.analytical.scaled_counts import (
    ScaledCountsResult,
    calibrate_adjusting_weight,
    scaled_counts,
)

__all__ = [
    "GPUPerfResult",
    "HierarchyResult",
    "MWPCWPResult",
    "OccupancyResult",
    "RooflineResult",
    "RyooResult",
    "ScaledCountsResult",
    "calibrate_adjusting_weight",
    "gpuperf",
    "hierarchy",
    "mwp_cwp",
    "occupancy",
    "roofline",
    "ryoo_metrics",
    "scaled_counts",
]
