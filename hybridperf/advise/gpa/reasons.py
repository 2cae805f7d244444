"""Stall-reason classes of GPA (CUPTI suffixes) and the Nsight Compute reason mapping."""
from __future__ import annotations

__all__ = [
    "DEPENDENCY_REASONS",
    "NSIGHT_REASON_MAP",
    "REASONS",
    "STALL_REASONS",
    "nsight_reason_class",
]

#: GPA's reason classes, in CUPTI order (GPA.md 0.1). ``NONE`` = the sampled warp issued.
REASONS: tuple[str, ...] = (
    "NONE", "IFET", "IDEP", "GMEM", "TMEM", "SYNC", "CMEM", "PIPE", "MTHR", "NSEL", "OTHR", "SLP",
)
STALL_REASONS: tuple[str, ...] = REASONS[1:]

#: Reasons caused by another instruction, which the blamer slices back to (paper Sec. 4).
DEPENDENCY_REASONS: frozenset[str] = frozenset({"IDEP", "GMEM", "SYNC"})

#: Nsight Compute warp-stall reason (``stall_<name>`` column or
#: ``smsp__pcsamp_warps_issue_stalled_<name>`` metric) -> GPA reason class.
#: Names follow the Nsight Compute Profiling Guide, "Statistical Sampler" section; the short
#: column spellings (``long_sb``, ``math``, ...) are those of the Source page CSV export.
NSIGHT_REASON_MAP: dict[str, str] = {
    "selected": "NONE",            # warp issued this cycle
    "long_sb": "GMEM",             # waiting on an L1TEX (global/local/texture/surface) scoreboard
    "long_scoreboard": "GMEM",
    "short_sb": "IDEP",            # waiting on an MIO scoreboard (shared memory, MUFU, S2R, ...)
    "short_scoreboard": "IDEP",
    "wait": "IDEP",                # fixed-latency execution dependency
    "imc": "CMEM",                 # immediate-constant cache miss
    "imc_miss": "CMEM",
    "no_inst": "IFET",             # instruction not yet fetched / i-cache miss
    "no_instruction": "IFET",
    "no_instructions": "IFET",
    "branch_resolving": "IFET",    # branch target not yet computed
    "branch": "IFET",
    "barrier": "SYNC",             # BAR.SYNC (__syncthreads)
    "membar": "SYNC",              # memory barrier
    "math": "PIPE",                # math pipe throttle
    "math_pipe_throttle": "PIPE",
    "mio": "MTHR",                 # MIO queue full
    "mio_throttle": "MTHR",
    "lg": "MTHR",                  # local/global queue full
    "lg_throttle": "MTHR",
    "tex": "TMEM",                 # texture queue full
    "tex_throttle": "TMEM",
    "not_selected": "NSEL",
    "sleep": "SLP",
    "sleeping": "SLP",
    "dispatch": "OTHR",
    "dispatch_stall": "OTHR",
    "drain": "OTHR",
    "misc": "OTHR",
}


def nsight_reason_class(name: str) -> str | None:
    """Map an Nsight stall name (``long_sb``, ``stall_long_sb``, metric name) to a GPA class.

    Returns ``None`` for an unknown name; the caller decides (the ncu reader counts it as OTHR
    and warns).
    """
    key = name.strip().lower()
    for prefix in ("smsp__pcsamp_warps_issue_stalled_", "stall_"):
        if key.startswith(prefix):
            key = key[len(prefix):]
            break
    return NSIGHT_REASON_MAP.get(key)
