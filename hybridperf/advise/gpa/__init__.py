"""GPA (Zhou et al., CGO 2021): stall attribution from PC samples and speedup estimators."""
from __future__ import annotations

from hybridperf.advise.gpa.arch import V100, GPAArch
from hybridperf.advise.gpa.blame import Blame, BlameResult, apportion, blame_samples
from hybridperf.advise.gpa.cfg import FunctionCFG, Loop, Program, build_program
from hybridperf.advise.gpa.errors import (
    GPAError,
    GPAInputError,
    GPAInputWarning,
    GPAParameterError,
    SASSSyntaxError,
)
from hybridperf.advise.gpa.estimators import (
    block_increase_speedup,
    issue_rate,
    latency_hiding_speedup,
    parallel_speedup,
    scope_latency_hiding_speedup,
    stall_elimination_speedup,
    thread_increase_speedup,
)
from hybridperf.advise.gpa.ncu import read_ncu_source_csv
from hybridperf.advise.gpa.optimizers import (
    Hotspot,
    LaunchConfig,
    ScopeEstimate,
    Suggestion,
    run_optimizers,
)
from hybridperf.advise.gpa.plaincsv import read_plain_csv
from hybridperf.advise.gpa.readers import read_samples
from hybridperf.advise.gpa.reasons import NSIGHT_REASON_MAP, REASONS, STALL_REASONS
from hybridperf.advise.gpa.report import (
    GPAReport,
    advise,
    advise_from_samples,
    format_report,
    report_to_dict,
)
from hybridperf.advise.gpa.samples import InstructionSamples, SampleTable
from hybridperf.advise.gpa.sass import Instruction, Predicate, parse_sass

__all__ = [
    "NSIGHT_REASON_MAP",
    "REASONS",
    "STALL_REASONS",
    "V100",
    "Blame",
    "BlameResult",
    "FunctionCFG",
    "GPAArch",
    "GPAError",
    "GPAInputError",
    "GPAInputWarning",
    "GPAParameterError",
    "GPAReport",
    "Hotspot",
    "Instruction",
    "InstructionSamples",
    "LaunchConfig",
    "Loop",
    "Predicate",
    "Program",
    "SASSSyntaxError",
    "SampleTable",
    "ScopeEstimate",
    "Suggestion",
    "advise",
    "advise_from_samples",
    "apportion",
    "blame_samples",
    "block_increase_speedup",
    "build_program",
    "format_report",
    "issue_rate",
    "latency_hiding_speedup",
    "parallel_speedup",
    "parse_sass",
    "read_ncu_source_csv",
    "read_plain_csv",
    "read_samples",
    "report_to_dict",
    "run_optimizers",
    "scope_latency_hiding_speedup",
    "stall_elimination_speedup",
    "thread_increase_speedup",
]
