"""The Kernel Tuner cache format as hybridperf reads and writes it: kernel and error names, own keys."""
from __future__ import annotations

import functools

from hybridperf.importers._common import slug

__all__ = ["BOOKKEEPING", "ERRORS", "FAILED_SENTINEL", "FIELDS", "KERNELS", "OWN", "TIMES_COLUMN", "TIME_COLUMNS",
           "counter_name"]

# Kernel Tuner's kernel_name -> (hybridperf kernel name, names of the problem_size entries).
KERNELS: dict[str, tuple[str, tuple[str, ...]]] = {
    "Xgemm": ("clblast-xgemm", ("M", "N")),
    "convolution_kernel": ("kt-convolution", ("W", "H")),
    "dedispersion_kernel": ("kt-dedispersion", ("samples", "dms", "beams")),
    "cn_pnpoly": ("kt-pnpoly", ("N",)),
    "calculate_temp": ("kt-hotspot", ("W", "H")),
    "ExpDist": ("kt-expdist", ()),
}
# Kernel Tuner < 0.4 recorded failed compilations/launches as this time.
FAILED_SENTINEL = 1e20
# Kernel Tuner's error names for a configuration -> sweep status.
ERRORS = {"InvalidConfig": "invalid", "CompilationFailedConfig": "failed", "RuntimeFailedConfig": "failed"}
# Per-entry fields about the tuning process itself, not the kernel: not imported.
BOOKKEEPING = frozenset({"time", "times", "compile_time", "verification_time", "benchmark_time",
                         "strategy_time", "framework_time", "timestamp"})
# Prefix of the keys hybridperf adds to an exported cache (sizes, reason, spread) to read it back.
OWN = "hybridperf_"
# The sweep's timing columns, in table order.
TIME_COLUMNS = ("time_ms", "repeats", "time_std_ms", "time_min_ms", "time_max_ms")
# Where an imported cache keeps each entry's ``times`` (ms, a JSON list), so that an export gives them back.
TIMES_COLUMN = "info.times_ms"


@functools.cache
def counter_name(key: str) -> str:
    """The sweep's ``counter.*`` name of a cache entry's numeric field (``GFLOP/s`` -> ``gflop_per_s``)."""
    return slug(key.replace("/", "_per_"), keep="_.").replace("-", "_")


# Kernel Tuner's own names of the observed quantities its scripts record, by the counter name they import as
# (an export writes them back under Kernel Tuner's name).
FIELDS = {counter_name(k): k for k in ("GFLOP/s", "TFLOP/s", "GB/s", "TB/s")}
