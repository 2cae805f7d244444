"""Per-instruction PC-sample tables: the data model both readers produce."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hybridperf.advise.gpa.errors import GPAInputError
from hybridperf.advise.gpa.reasons import REASONS, STALL_REASONS
from hybridperf.advise.gpa.sass import Instruction, parse_sass

__all__ = ["InstructionSamples", "SampleTable", "resolve_branch_target"]

_N = len(REASONS)
_ZEROS = (0,) * _N


@dataclass(frozen=True, slots=True)
class InstructionSamples:
    """The PC samples of one instruction.

    ``all_samples[k]`` is CUPTI's ``samples`` for reason ``REASONS[k]`` (every sample taken at
    this pc with that reason) and ``latency_samples[k]`` its ``latencySamples`` (the subset taken
    while the warp's scheduler issued nothing): GPA.md Sec. 0. ``REASONS[0]`` is ``NONE``, so
    ``all_samples[0]`` are the issued samples.
    """

    function: str
    pc: int
    instruction: Instruction
    all_samples: tuple[int, ...] = _ZEROS
    latency_samples: tuple[int, ...] = _ZEROS
    line: int | None = None
    file: str | None = None
    inlined_from: str | None = None

    def __post_init__(self) -> None:
        where = f"function {self.function!r} pc {self.pc:#x}"
        if not isinstance(self.function, str) or not self.function:
            raise GPAInputError(f"pc {self.pc!r}: function name must be a non-empty string")
        if not isinstance(self.pc, int) or isinstance(self.pc, bool) or self.pc < 0:
            raise GPAInputError(f"function {self.function!r}: pc must be an integer >= 0, got {self.pc!r}")
        for name in ("all_samples", "latency_samples"):
            counts = getattr(self, name)
            if len(counts) != _N:
                raise GPAInputError(f"{where}: {name} needs {_N} counts (one per reason), got {len(counts)}")
            for reason, c in zip(REASONS, counts):
                if not isinstance(c, int) or isinstance(c, bool) or c < 0:
                    raise GPAInputError(f"{where}: {name}[{reason}] must be an integer >= 0, got {c!r}")
        for reason, s, lat in zip(REASONS, self.all_samples, self.latency_samples):
            if lat > s:
                raise GPAInputError(
                    f"{where}: {reason} latency samples ({lat}) exceed all samples ({s}); "
                    "latency samples are a subset of all samples"
                )
        if self.line is not None and (not isinstance(self.line, int) or self.line < 0):
            raise GPAInputError(f"{where}: line must be an integer >= 0 or None, got {self.line!r}")

    @classmethod
    def from_counts(cls, function: str, pc: int, sass: str | Instruction, *, issued: int = 0,
                    stalls: Mapping[str, int] | None = None,
                    latency: Mapping[str, int] | None = None, line: int | None = None,
                    file: str | None = None, inlined_from: str | None = None) -> InstructionSamples:
        """Build from reason-keyed counts, e.g. ``stalls={"GMEM": 40}, latency={"GMEM": 30}``."""
        inst = parse_sass(sass) if isinstance(sass, str) else sass
        all_c = [0] * _N
        lat_c = [0] * _N
        all_c[0] = issued
        for target, values in ((all_c, stalls or {}), (lat_c, latency or {})):
            for reason, value in values.items():
                if reason not in STALL_REASONS:
                    raise GPAInputError(
                        f"function {function!r} pc {pc:#x}: unknown stall reason {reason!r}; "
                        f"use one of {', '.join(STALL_REASONS)}"
                    )
                target[REASONS.index(reason)] = value
        return cls(function, pc, inst, tuple(all_c), tuple(lat_c), line, file, inlined_from)

    @property
    def sass(self) -> str:
        return self.instruction.text

    @property
    def issued(self) -> int:
        """Samples with reason NONE: the sampled warp issued this instruction."""
        return self.all_samples[0]

    @property
    def total(self) -> int:
        return sum(self.all_samples)

    @property
    def latency_total(self) -> int:
        return sum(self.latency_samples)

    def samples(self, reason: str) -> int:
        return self.all_samples[REASONS.index(reason)]

    def latency(self, reason: str) -> int:
        return self.latency_samples[REASONS.index(reason)]


@dataclass(frozen=True, slots=True)
class SampleTable:
    """The sampled instructions of one kernel (and the device functions it calls).

    Kernel-level quantities follow GPA.md Sec. 0: ``total_samples`` T, ``latency_samples``
    L (no issue by the sampled warp's scheduler), ``active_samples`` A = T - L and
    ``issued_samples`` (reason NONE).
    """

    instructions: tuple[InstructionSamples, ...]
    source: str = "<memory>"
    kernel: str | None = None
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.instructions:
            raise GPAInputError(f"{self.source}: no instructions; the table must list at least one")
        seen: set[tuple[str, int]] = set()
        for rec in self.instructions:
            key = (rec.function, rec.pc)
            if key in seen:
                raise GPAInputError(
                    f"{self.source}: function {rec.function!r} lists pc {rec.pc:#x} twice; "
                    "each instruction must appear once"
                )
            seen.add(key)
        if self.total_samples == 0:
            raise GPAInputError(
                f"{self.source}: every sample count is 0; re-profile with PC sampling enabled"
            )

    @property
    def functions(self) -> tuple[str, ...]:
        """Function names in order of first appearance."""
        return tuple(dict.fromkeys(r.function for r in self.instructions))

    @property
    def total_samples(self) -> int:
        return sum(r.total for r in self.instructions)

    @property
    def latency_samples(self) -> int:
        return sum(r.latency_total for r in self.instructions)

    @property
    def active_samples(self) -> int:
        return self.total_samples - self.latency_samples

    @property
    def issued_samples(self) -> int:
        return sum(r.issued for r in self.instructions)

    def reason_totals(self) -> dict[str, tuple[int, int]]:
        """``{reason: (all samples, latency samples)}`` summed over the kernel."""
        out = {}
        for k, reason in enumerate(REASONS):
            out[reason] = (sum(r.all_samples[k] for r in self.instructions),
                           sum(r.latency_samples[k] for r in self.instructions))
        return out

    def to_frame(self) -> Any:
        """One row per instruction as a pandas DataFrame (columns as in the plain CSV format)."""
        import pandas as pd

        rows = []
        for r in self.instructions:
            row: dict[str, Any] = {"function": r.function, "pc": r.pc, "sass": r.sass,
                                   "line": r.line, "issued": r.issued}
            for k, reason in enumerate(REASONS[1:], start=1):
                row[f"stall_{reason}"] = r.all_samples[k]
                row[f"latency_{reason}"] = r.latency_samples[k]
            rows.append(row)
        return pd.DataFrame(rows)


def resolve_branch_target(pcs: Sequence[int], target: int) -> int | None:
    """Index of a branch target among a function's sorted pcs, or None.

    The target is tried as an address first, then as an offset from the function's first pc
    (cuobjdump prints offsets, Nsight Compute absolute addresses).
    """
    for candidate in (target, pcs[0] + target if pcs else target):
        lo, hi = 0, len(pcs)
        while lo < hi:
            mid = (lo + hi) // 2
            if pcs[mid] < candidate:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(pcs) and pcs[lo] == candidate:
            return lo
    return None
