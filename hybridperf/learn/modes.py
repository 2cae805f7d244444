"""The hybrid estimator's modes, calibrations and training weightings by name (cheap to import)."""
from __future__ import annotations

__all__ = ["CALIBRATIONS", "MODES", "WEIGHTINGS"]

# hybrid: baseline x exp(learned residual); the others are the ablations of EVALUATION.md.
MODES = ("hybrid", "analytical", "calibrated", "boosting")
# How a (kernel, GPU) group is calibrated to its baseline: one factor, or overhead + factor.
CALIBRATIONS = ("scale", "affine")
# How training rows are weighted: equally, or by throughput within their problem (fast configurations first).
WEIGHTINGS = ("uniform", "throughput")
