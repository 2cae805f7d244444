"""hybridperf: predict GPU kernel execution time with analytical models and boosted residuals."""
from __future__ import annotations

from hybridperf.analytical.run import Analysis, analyze
from hybridperf.errors import (
    DescriptorError,
    FormulaError,
    HybridperfError,
    SpecError,
    UnknownGPUError,
    UnknownKernelError,
)
from hybridperf.hardware import GPUSpec, list_gpus, load_gpu
from hybridperf.kernel import KernelDescriptor, KernelProfile, list_kernels, load_kernel

__all__ = [
    "Analysis",
    "DescriptorError",
    "FormulaError",
    "GPUSpec",
    "HybridperfError",
    "KernelDescriptor",
    "KernelProfile",
    "SpecError",
    "UnknownGPUError",
    "UnknownKernelError",
    "analyze",
    "list_gpus",
    "list_kernels",
    "load_gpu",
    "load_kernel",
]

__version__ = "0.1.0"
