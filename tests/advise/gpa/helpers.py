"""Shared helpers for the GPA tests: fixture paths and small in-memory sample tables."""
from __future__ import annotations

from pathlib import Path

from hybridperf.advise.gpa import InstructionSamples, SampleTable
from tests.paths import GPA_FIXTURES

FIXTURES = GPA_FIXTURES
PLAIN_CASES = ("raw_across_blocks", "predicate", "barrier", "war", "sync", "loop")


def fixture(case: str) -> Path:
    """Path of a fixture's sample table."""
    name = "source.csv" if case.startswith("ncu") else "samples.csv"
    return FIXTURES / case / name


def make_table(rows, *, function: str = "k", kernel: str | None = None,
               extra: tuple[InstructionSamples, ...] = ()) -> SampleTable:
    """rows: (sass, issued, {reason: (all, latency)}) at pcs 0x0, 0x10, ..."""
    recs = []
    for i, (sass, issued, stalls) in enumerate(rows):
        recs.append(InstructionSamples.from_counts(
            function, 16 * i, sass, issued=issued,
            stalls={r: a for r, (a, _) in stalls.items()},
            latency={r: lat for r, (_, lat) in stalls.items()}, line=i + 1))
    return SampleTable(tuple(recs) + tuple(extra), kernel=kernel)
