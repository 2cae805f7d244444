"""Scheduler geometry of the GPA models (from a GPU spec; GPA's V100 by default) and instruction latency bounds."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from hybridperf.advise.gpa.errors import GPAParameterError
from hybridperf.hardware import GPUSpec, load_gpu

__all__ = ["V100", "GPAArch"]


@dataclass(frozen=True, slots=True)
class GPAArch:
    """Scheduler geometry and instruction latencies used by the blamer and the estimators.

    The geometry fields (SMs, warp schedulers per SM, warps per SM, warp size) come from a GPU
    spec (:meth:`from_spec`); GPA hard-wires V100's (GPA.md Sec. 4: 80 SMs, 4 warp schedulers per
    SM, 64 warps per SM, 32 threads per warp), which :data:`V100` reads from the shipped Tesla
    V100 spec. The latencies are in core
    cycles and serve two purposes: the blamer's latency-based pruning (paper Sec. 4, rule 3) uses
    them as upper bounds, and Strength Reduction matches arithmetic whose latency is at least
    ``strength_reduction_min_cycles`` (GPA.md Sec. 5).

    Sources: ``arith_cycles`` (4) and ``fp64_cycles`` (8) are the Volta dependent-issue
    latencies of Jia et al. 2018 (paper ref.); ``convert_cycles`` and ``mufu_cycles`` (14) and
    ``bitcount_cycles`` (10, POPC/FLO/BREV) are the V100 minimum latencies GPA uses (GPA.md
    Sec. 5). The variable-latency bounds are *assumed* upper bounds, chosen above the worst
    cases measured by Jia et al. (a global access that misses the TLBs takes on the order of a
    thousand cycles; a 32-way shared-memory bank conflict about a hundred); calibrate them for
    another GPU.
    """

    name: str
    sm_count: int
    schedulers_per_sm: int
    max_warps_per_sm: int
    warp_size: int
    arith_cycles: int = 4
    fp64_cycles: int = 8
    bitcount_cycles: int = 10
    convert_cycles: int = 14
    mufu_cycles: int = 14
    tensor_cycles: int = 32
    short_variable_max_cycles: int = 128
    shared_max_cycles: int = 128
    memory_max_cycles: int = 1200
    strength_reduction_min_cycles: int = 10

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name == "name":
                if not isinstance(v, str) or not v:
                    raise GPAParameterError(f"GPAArch.name must be a non-empty string, got {v!r}")
            elif not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise GPAParameterError(f"GPAArch.{f.name} must be a positive integer, got {v!r}")
        if self.max_warps_per_sm < self.schedulers_per_sm:
            raise GPAParameterError(
                f"GPAArch: max_warps_per_sm ({self.max_warps_per_sm}) must be >= "
                f"schedulers_per_sm ({self.schedulers_per_sm})"
            )

    @classmethod
    def from_spec(cls, gpu: GPUSpec, **latencies: int) -> GPAArch:
        """The scheduler geometry of a GPU spec; latency bounds keep GPA's values unless given."""
        return cls(name=gpu.name, sm_count=gpu.sm_count, schedulers_per_sm=gpu.limits.warp_schedulers_per_sm,
                   max_warps_per_sm=gpu.limits.max_warps_per_sm, warp_size=gpu.warp_size, **latencies)

    def latency_cycles(self, latency_class: str) -> int:
        """Latency (upper bound for variable-latency classes) of a class from ``sass.latency_class``."""
        table = {
            "arith": self.arith_cycles,
            "fp64": self.fp64_cycles,
            "bitcount": self.bitcount_cycles,
            "convert": self.convert_cycles,
            "mufu": self.mufu_cycles,
            "tensor": self.tensor_cycles,
            "short_variable": self.short_variable_max_cycles,
            "shared": self.shared_max_cycles,
            "memory": self.memory_max_cycles,
        }
        try:
            return table[latency_class]
        except KeyError:
            raise GPAParameterError(
                f"unknown latency class {latency_class!r}; known: {', '.join(table)}"
            ) from None

    @property
    def max_latency_cycles(self) -> int:
        """The largest latency bound: how far back the blamer ever needs to search."""
        return max(self.latency_cycles(c) for c in (
            "arith", "fp64", "bitcount", "convert", "mufu", "tensor", "short_variable", "shared",
            "memory"))


#: The V100 (Volta GV100) GPA was built for and evaluated on.
V100 = dataclasses.replace(GPAArch.from_spec(load_gpu("tesla-v100-pcie-16gb")), name="V100")
