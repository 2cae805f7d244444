"""Error types raised where bad input enters hybridperf."""
from __future__ import annotations

__all__ = [
    "DescriptorError",
    "FormulaError",
    "HybridperfError",
    "InfeasibleConfigError",
    "InputError",
    "LimitError",
    "OutputError",
    "RecordError",
    "SpecError",
    "SweepError",
    "UnknownGPUError",
    "UnknownKernelError",
    "UsageError",
]


class HybridperfError(ValueError):
    """Base class: every user-facing error is a ValueError with a one-line message."""


class SpecError(HybridperfError):
    """A GPU spec or compute-capability file is malformed."""


class UnknownGPUError(HybridperfError):
    """A GPU name matches no shipped spec and is not a readable path."""


class DescriptorError(HybridperfError):
    """A kernel descriptor file is malformed."""


class UnknownKernelError(HybridperfError):
    """A kernel name matches no shipped descriptor and is not a readable path."""


class FormulaError(HybridperfError):
    """A formula string is malformed or names an unknown parameter."""


class InfeasibleConfigError(HybridperfError):
    """A launch configuration exceeds a hard hardware limit."""


class SweepError(HybridperfError):
    """A recorded sweep (CSV, Parquet, or a source format being imported) is malformed."""


class RecordError(HybridperfError):
    """Recording kernel timings failed (no GPU, no CuPy, bad benchmark setup, lost CUDA context)."""


class UsageError(HybridperfError):
    """A command-line option has a value outside its range (coverage, seed, counts...)."""


class InputError(HybridperfError):
    """An input file cannot be used: missing, a directory or device, unreadable or not text."""


class LimitError(HybridperfError):
    """An input is larger or deeper than hybridperf accepts (checked before the work is done)."""


class OutputError(HybridperfError):
    """An output path cannot or must not be written (a device, a symlink, an input of the command...)."""
