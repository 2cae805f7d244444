"""Record kernel timings on a CUDA GPU into a sweep: planning, timing statistics, writing, runners."""
from __future__ import annotations

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
    "plan_sweep",
    "record_sweep",
    "should_stop",
    "summarize_times",
]
