"""Record kernel timings on a CUDA GPU into a sweep: planning, timing statistics, writing, runners."""
from __future__ import annotations

from collections.abc import Sequence

from hybridperf.errors import RecordError
from hybridperf.record.bench import BenchSetup, LaunchPlan, list_benches, load_bench
from hybridperf.record.plan import Plan, PlannedRow, done_keys, plan_sweep
from hybridperf.record.record import RecordSummary, record_sweep
from hybridperf.record.runner import ContextLost, Launch, RunFailed, Runner
from hybridperf.record.stats import TimingStats, measure, should_stop, summarize_times

__all__ = [
    "BenchSetup",
    "ContextLost",
    "Launch",
    "LaunchPlan",
    "Plan",
    "PlannedRow",
    "RecordError",
    "RecordSummary",
    "RunFailed",
    "Runner",
    "TimingStats",
    "done_keys",
    "list_benches",
    "load_bench",
    "measure",
    "parse_assignments",
    "plan_sweep",
    "record_sweep",
    "should_stop",
    "summarize_times",
]


def parse_assignments(items: Sequence[str], flag: str = "--sizes") -> dict[str, list[float]]:
    """``["N=1024:8192:x2", "M=64"]`` -> ``{"N": [1024, 2048, 4096, 8192], "M": [64]}``.

    Values use :func:`hybridperf.analyze.parse_values` syntax (``1,2,3``, ``a:b:step``,
    ``a:b:xF``); ``true``/``false`` stand for 1/0. Items may also be comma-joined pairs
    separated by spaces; a name given twice is an error.
    """
    from hybridperf.analyze import parse_values

    out: dict[str, list[float]] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name or not value:
            raise RecordError(f"{flag} {item!r}: write NAME=VALUES, e.g. {flag} N=1024,2048 or N=1024:8192:x2")
        if name in out:
            raise RecordError(f"{flag}: {name} is given twice; give all its values once, e.g. {name}=1,2,3")
        words = {"true": "1", "false": "0"}
        value = ",".join(words.get(v.strip().lower(), v.strip()) for v in value.split(","))
        out[name] = parse_values(value)
    return out
