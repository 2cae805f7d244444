"""The hybrid estimator's modes and calibrations, by name (cheap to import, e.g. for the command line)."""
from __future__ import annotations

__all__ = ["CALIBRATIONS", "MODES"]

# hybrid: baseline x exp(learned residual); the others are the ablations of EVALUATION.md.
MODES = ("hybrid", "analytical", "calibrated", "boosting")
# How a (kernel, GPU) group is calibrated to its baseline: one factor, or overhead + factor.
CALIBRATIONS = ("scale", "affine")
