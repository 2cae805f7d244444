"""Per-SM limits of each compute capability (the CUDA Programming Guide's table), from a versioned TOML data file."""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from hybridperf.errors import SpecError
from hybridperf.tomlfile import read_document

__all__ = ["CC_INT_KEYS", "MAX_LIMIT_VALUE", "MAX_SPEC_VALUE", "CCLimits", "in_range", "load_cc_limits"]

FORMAT_VERSION = 1
# Largest value a spec field may hold: far above any real GPU (bandwidths ~1e4 GB/s, clocks ~1e3 MHz,
# peak rates ~1e6 GFLOP/s); it keeps sums and products of spec values finite.
MAX_SPEC_VALUE = 1e12
MAX_LIMIT_VALUE = 2**31 - 1


def in_range(v: Any, hi: float) -> bool:
    """A real number (not bool) in [0, hi]; False for NaN, infinities and integers too large for a float."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return 0 <= float(v) <= hi
    except OverflowError:
        return False


@dataclass(frozen=True, slots=True)
class CCLimits:
    """Per-SM limits and allocation granularities of one compute capability.

    Sizes are in bytes, registers in 32-bit registers, granularities in warps.
    Source: CUDA C++ Programming Guide, "Technical Specifications per Compute Capability",
    and the CUDA Occupancy Calculator.
    """

    compute_capability: str
    warp_size: int
    warp_schedulers_per_sm: int
    max_threads_per_block: int
    max_threads_per_sm: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    registers_per_sm: int
    max_registers_per_block: int
    max_registers_per_thread: int
    register_alloc_unit: int
    register_alloc_granularity: str
    warp_alloc_granularity: int
    smem_per_sm_bytes: int
    max_smem_per_block_bytes: int
    smem_alloc_unit_bytes: int
    reserved_smem_per_block_bytes: int
    source: str
    # Whether the L1 cache serves global loads. False on cc 3.0: the Programming Guide's "Compute Capability
    # 3.x" section says global memory accesses are cached in L2 only, and cc 3.0 has no read-only data cache
    # path (__ldg needs cc >= 3.5), so every global load sector crosses L2 (the hierarchical roofline charges
    # them there).
    global_loads_cached_in_l1: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.global_loads_cached_in_l1, bool):
            raise SpecError(f"compute capability {self.compute_capability}: global_loads_cached_in_l1 must be "
                            f"true or false, got {str(self.global_loads_cached_in_l1)[:30]}")
        if self.register_alloc_granularity not in ("warp", "block"):
            raise SpecError(
                f"compute capability {self.compute_capability}: register_alloc_granularity must be "
                f"'warp' or 'block', got {self.register_alloc_granularity!r}"
            )
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.type == "int" and (not isinstance(v, int) or not in_range(v, MAX_LIMIT_VALUE)):
                raise SpecError(
                    f"compute capability {self.compute_capability}: {f.name} must be an integer from 0 to "
                    f"{MAX_LIMIT_VALUE}, got {str(v)[:30]}"
                )


CC_INT_KEYS = tuple(f.name for f in dataclasses.fields(CCLimits) if f.type == "int")


@functools.cache
def _cc_table() -> dict[str, CCLimits]:
    ref = resources.files("hybridperf") / "data" / "compute_capabilities.toml"
    path = Path(str(ref))
    _, doc = read_document(path, SpecError, "compute-capability table", FORMAT_VERSION, {"format_version", "cc"})
    out: dict[str, CCLimits] = {}
    for cc, entry in doc.get("cc", {}).items():
        missing = [k for k in CC_INT_KEYS + ("register_alloc_granularity", "source") if k not in entry]
        if missing:
            raise SpecError(f"{path}: [cc.\"{cc}\"] is missing {', '.join(missing)}")
        unknown = set(entry) - set(CC_INT_KEYS) - {"register_alloc_granularity", "source", "global_loads_cached_in_l1"}
        if unknown:
            raise SpecError(f"{path}: [cc.\"{cc}\"] has unknown keys {sorted(unknown)}")
        out[cc] = CCLimits(compute_capability=cc, **entry)
    return out


def load_cc_limits(compute_capability: str) -> CCLimits:
    """Per-SM limits for a compute capability such as ``"8.6"``."""
    table = _cc_table()
    try:
        return table[str(compute_capability)]
    except KeyError:
        raise SpecError(
            f"unknown compute capability {compute_capability!r}; known: {', '.join(table)}"
        ) from None
