"""The per-launch KernelProfile: resources and per-thread dynamic counts, and the count defaults."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from hybridperf.arrays import FloatArray
from hybridperf.errors import DescriptorError
from hybridperf.formula import Formula, compile_formula

__all__ = ["LAUNCH_KEYS", "OPTIONAL_COUNTS", "PROFILE_FIELDS", "REQUIRED_COUNTS", "KernelProfile", "default_formula"]

LAUNCH_KEYS = ("threads_per_block", "blocks", "registers_per_thread", "smem_per_block_bytes")
REQUIRED_COUNTS = ("comp_insts", "coal_mem_insts", "uncoal_mem_insts")
# Optional per-thread counts and the formula used when a descriptor leaves them out.
OPTIONAL_COUNTS: dict[str, str] = {
    "fp_insts": "comp_insts",
    "sfu_insts": "0",
    "sync_insts": "0",
    "smem_insts": "0",
    "uncoal_per_mw": "32",
    "global_loads": "coal_mem_insts + uncoal_mem_insts",
    "global_stores": "0",
    "smem_loads": "smem_insts",
    "smem_stores": "0",
    "comp_cycles": "comp_insts",
    "ilp": "1",
    "mlp": "1",
    "miss_ratio": "1",
    "load_bytes_per_warp": "128",
    # L1 wavefronts (tag lookups, one per cycle per SM) of one warp's global accesses over the kernel, where they
    # exceed what the bytes and instructions imply: an uncoalesced access takes one per cache line it touches
    # (32 for lanes a row apart). 0: not given (the load/store level is then bytes and instructions alone).
    "lsu_wavefronts": "0",
    "ryoo_instr": "comp_insts + sfu_insts + coal_mem_insts + uncoal_mem_insts",
    # Seed 003 Sec. 4: intervals delimited by blocking instructions (global loads, syncs; SFU ops only
    # when neither exists) or the kernel start/end; a run of independent loads is one unit, and mlp
    # is the number of independent loads a warp issues together (Fig. 2(c): 256 pairs of loads and
    # 512 barriers -> 1 + 256 + 512 = 769 regions).
    "ryoo_regions": "1 + where(global_loads + sync_insts > 0, global_loads / max(mlp, 1) + sync_insts, "
                    "sfu_insts)",
    "flops": "fp_insts",
    "dram_bytes": "4 * (global_loads + global_stores) * threads_per_block * blocks",
    # The memory hierarchy (whole launch, bytes; docs/kernel-descriptor-format.md). dram_bytes is the traffic
    # DRAM must carry at least once; reread_bytes are the re-reads of data other blocks already brought in,
    # which come from L2 when it holds reread_distance_bytes (the data touched between two uses), else from
    # DRAM; l2_bytes is everything the SMs request from L2; smem_bytes everything moved through shared memory.
    "reread_bytes": "0",
    "reread_distance_bytes": "dram_bytes",
    "l2_bytes": "dram_bytes + reread_bytes",
    "smem_bytes": "4 * (smem_loads + smem_stores) * threads_per_block * blocks",
    # The part of smem_bytes that is not bank conflicts: the wavefronts the accesses would take with every lane's
    # bytes in a bank of its own (default: smem_bytes, i.e. conflict-free as counted). A GPU whose banks serve more
    # than one address per cycle (smem_bank_ways_per_cycle) pays the conflicts at that rate, never less than this.
    "smem_conflict_free_bytes": "smem_bytes",
    # Local memory (a thread's own arrays indexed at run time, which nvcc cannot keep in registers):
    # local_bytes_per_thread is each thread's allocation (what ptxas reports as its stack frame, KTT as
    # PrivateMemorySize) and local_traffic_bytes the launch's local loads and stores. L2 serves them while the
    # resident threads' allocations fit in it, DRAM the rest; the hierarchy adds register spills to both.
    "local_bytes_per_thread": "0",
    "local_traffic_bytes": "0",
}
PROFILE_FIELDS = LAUNCH_KEYS + REQUIRED_COUNTS + tuple(OPTIONAL_COUNTS)


@dataclass(frozen=True, slots=True)
class KernelProfile:
    """Per-launch resources and per-thread dynamic counts, one array element per row.

    Units: threads, blocks, 32-bit registers per thread, bytes of shared memory per block,
    instructions per thread, ``flops`` per thread, ``dram_bytes``, ``reread_bytes``,
    ``reread_distance_bytes``, ``l2_bytes``, ``smem_bytes`` and ``local_traffic_bytes`` for the whole launch,
    ``local_bytes_per_thread`` per thread.
    """

    threads_per_block: FloatArray
    blocks: FloatArray
    registers_per_thread: FloatArray
    smem_per_block_bytes: FloatArray
    comp_insts: FloatArray
    coal_mem_insts: FloatArray
    uncoal_mem_insts: FloatArray
    fp_insts: FloatArray
    sfu_insts: FloatArray
    sync_insts: FloatArray
    smem_insts: FloatArray
    uncoal_per_mw: FloatArray
    global_loads: FloatArray
    global_stores: FloatArray
    smem_loads: FloatArray
    smem_stores: FloatArray
    comp_cycles: FloatArray
    ilp: FloatArray
    mlp: FloatArray
    miss_ratio: FloatArray
    load_bytes_per_warp: FloatArray
    lsu_wavefronts: FloatArray
    ryoo_instr: FloatArray
    ryoo_regions: FloatArray
    flops: FloatArray
    dram_bytes: FloatArray
    reread_bytes: FloatArray
    reread_distance_bytes: FloatArray
    l2_bytes: FloatArray
    smem_bytes: FloatArray
    smem_conflict_free_bytes: FloatArray
    local_bytes_per_thread: FloatArray
    local_traffic_bytes: FloatArray

    @classmethod
    def from_values(cls, **values: Any) -> KernelProfile:
        """Build a profile from scalars or arrays; omitted optional counts take their defaults."""
        unknown = set(values) - set(PROFILE_FIELDS)
        if unknown:
            raise DescriptorError(f"unknown profile field(s) {sorted(unknown)}; allowed: {', '.join(PROFILE_FIELDS)}")
        missing = [k for k in LAUNCH_KEYS + REQUIRED_COUNTS if k not in values]
        if missing:
            raise DescriptorError(f"profile is missing {', '.join(missing)}")
        env: dict[str, Any] = {k: np.asarray(v, dtype=np.float64) for k, v in values.items()}
        for key, default in OPTIONAL_COUNTS.items():
            if key not in env:
                env[key] = default_formula(key, default)(env)
        arrays = np.broadcast_arrays(*(np.atleast_1d(env[k]) for k in PROFILE_FIELDS))
        return cls(**{k: np.array(a, dtype=np.float64) for k, a in zip(PROFILE_FIELDS, arrays)})

    def __len__(self) -> int:
        return int(self.blocks.shape[0])

    @property
    def mem_insts(self) -> FloatArray:
        return self.coal_mem_insts + self.uncoal_mem_insts

    @property
    def total_threads(self) -> FloatArray:
        return self.threads_per_block * self.blocks

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame({k: getattr(self, k) for k in PROFILE_FIELDS})

    def take(self, index: Any) -> KernelProfile:
        return KernelProfile(**{k: getattr(self, k)[index] for k in PROFILE_FIELDS})


@functools.cache
def default_formula(key: str, text: str) -> Formula:
    """The compiled default formula of an optional count (compiled once)."""
    return compile_formula(text, where=f"default for counts.{key}")
