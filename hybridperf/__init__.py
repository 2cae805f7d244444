"""hybridperf: predict GPU kernel execution time with analytical models and boosted residuals."""
from __future__ import annotations

from hybridperf._lazy import lazy_attributes
from hybridperf.errors import (
    DescriptorError,
    FormulaError,
    HybridperfError,
    SpecError,
    SweepError,
    UnknownGPUError,
    UnknownKernelError,
)

__version__ = "0.1.0"

# Public names and where they live; loaded on first use so that `import hybridperf` (and the
# command line's cold start) stays light.
_LAZY = {
    "Analysis": "hybridperf.analytical.run",
    "analyze": "hybridperf.analytical.run",
    "GPUSpec": "hybridperf.hardware",
    "list_gpus": "hybridperf.hardware",
    "load_gpu": "hybridperf.hardware",
    "KernelDescriptor": "hybridperf.kernel",
    "KernelProfile": "hybridperf.profile",
    "list_kernels": "hybridperf.kernel",
    "load_kernel": "hybridperf.kernel",
    "read_sweep": "hybridperf.sweepfile",
    "write_sweep": "hybridperf.sweepfile",
    "load_dataset": "hybridperf.datasets",
    "import_sweep": "hybridperf.importers",
    "HybridRegressor": "hybridperf.learn.estimator",
    "SweepFeatures": "hybridperf.learn.features",
    "TrainedModel": "hybridperf.learn.model",
    "make_model": "hybridperf.learn.model",
    "train_model": "hybridperf.learn.model",
    "predict_rows": "hybridperf.learn.model",
    "load_model": "hybridperf.learn.model",
    "save_model": "hybridperf.learn.model",
    "calibrate_gpu": "hybridperf.learn.calibrate",
    "rank_configs": "hybridperf.search.rank",
    "suggest_next": "hybridperf.search.measure_next",
    "replay": "hybridperf.search.measure_next",
    "evaluate": "hybridperf.evaluation.evaluate",
    "advise": "hybridperf.advise.benefits",
}

__all__ = [
    "Analysis",
    "DescriptorError",
    "FormulaError",
    "GPUSpec",
    "HybridRegressor",
    "HybridperfError",
    "KernelDescriptor",
    "KernelProfile",
    "SpecError",
    "SweepError",
    "SweepFeatures",
    "TrainedModel",
    "UnknownGPUError",
    "UnknownKernelError",
    "advise",
    "analyze",
    "calibrate_gpu",
    "evaluate",
    "import_sweep",
    "list_gpus",
    "list_kernels",
    "load_dataset",
    "load_gpu",
    "load_kernel",
    "load_model",
    "make_model",
    "predict_rows",
    "rank_configs",
    "read_sweep",
    "replay",
    "save_model",
    "suggest_next",
    "train_model",
    "write_sweep",
]


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, globals())
