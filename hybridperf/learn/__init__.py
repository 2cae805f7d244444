"""Learning from recorded runs: features, the hybrid estimator, intervals, the model file, tuning, calibration."""
from __future__ import annotations

from hybridperf._lazy import lazy_attributes

_NAMES = {
    "MODES": "hybridperf.learn.modes",
    "HybridRegressor": "hybridperf.learn.estimator",
    "SweepFeatures": "hybridperf.learn.features",
    "TrainedModel": "hybridperf.learn.model",
    "analytical_features": "hybridperf.learn.features",
    "calibrate_gpu": "hybridperf.learn.calibrate",
    "default_booster": "hybridperf.learn.booster",
    "load_model": "hybridperf.learn.model",
    "make_model": "hybridperf.learn.model",
    "predict_rows": "hybridperf.learn.model",
    "save_model": "hybridperf.learn.model",
    "train_model": "hybridperf.learn.model",
}
__all__ = [
    "MODES",
    "HybridRegressor",
    "SweepFeatures",
    "TrainedModel",
    "analytical_features",
    "calibrate_gpu",
    "default_booster",
    "load_model",
    "make_model",
    "predict_rows",
    "save_model",
    "train_model",
]
__getattr__, __dir__ = lazy_attributes(__name__, _NAMES, globals())
