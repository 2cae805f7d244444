"""Kernel Tuner's cache file format (schema version 1.0.0) as a JSON schema, for checking exports.

Kernel Tuner's repository states the format as ``kernel_tuner/schema/cache/1.0.0/schema.json``; the
released package (1.5.0, the test extra) does not ship that file, so :func:`cache_schema` uses it when an
installed Kernel Tuner has it and otherwise this restatement of its rules: the header fields and their
types, cache keys of comma-separated whole numbers, and per entry a ``time`` (number or error name), an
optional ``times`` list of numbers, and the bookkeeping fields Kernel Tuner writes.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_NUMBER = {"type": "number"}
_KEY = r"^\d+(,\d+)*$"

RULES: dict[str, Any] = {
    "type": "object",
    "required": ["schema_version", "device_name", "kernel_name", "problem_size", "tune_params_keys", "tune_params",
                 "objective", "cache"],
    "properties": {
        "schema_version": {"const": "1.0.0"},
        "device_name": {"type": "string"},
        "kernel_name": {"type": "string"},
        "problem_size": {"type": "array", "items": {"type": "integer"}},
        "tune_params_keys": {"type": "array", "items": {"type": "string"}},
        "tune_params": {"type": "object", "additionalProperties": {"type": "array"}},
        "objective": {"type": "string"},
        "cache": {
            "type": "object",
            "propertyNames": {"pattern": _KEY},
            "patternProperties": {_KEY: {
                "type": "object",
                "required": ["time", "compile_time", "verification_time", "benchmark_time", "strategy_time",
                             "framework_time", "timestamp"],
                "properties": {
                    "time": {"anyOf": [{"type": "string"}, _NUMBER]},
                    "times": {"type": "array", "items": _NUMBER},
                    "GFLOP/s": _NUMBER,
                    **{k: _NUMBER for k in ("compile_time", "verification_time", "benchmark_time", "strategy_time",
                                            "framework_time")},
                    "timestamp": {"type": "string"},
                },
            }},
        },
    },
}


def cache_schema() -> tuple[dict[str, Any], str]:
    """(schema, where it came from): the installed Kernel Tuner's cache schema if it ships one, else :data:`RULES`."""
    import kernel_tuner

    shipped = sorted(Path(kernel_tuner.__file__).parent.glob("schema/cache/*/schema.json"))
    if shipped:
        return json.loads(shipped[-1].read_text()), str(shipped[-1])
    return RULES, "tests/importers/kt_cache_schema.py (Kernel Tuner's cache schema 1.0.0, restated)"
