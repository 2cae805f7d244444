"""Run hostile cases in one process under a memory limit, one JSON line per case (``python -m tests.hostile.runner``).

Usage: ``python -m tests.hostile.runner WORKSPACE CASES.json RESULTS.jsonl``. Each case runs
``hybridperf.cli.main(argv)`` in-process inside WORKSPACE with stdout/stderr captured, a 10 s alarm,
and the peak resident memory of the case measured (``VmHWM`` after resetting it through
``/proc/self/clear_refs``); the files of WORKSPACE are listed before and after. RLIMIT_DATA caps the
process so that a runaway allocation fails instead of exhausting the machine.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import resource
import signal
import stat
import sys
import time
from pathlib import Path
from typing import Any

CASE_SECONDS = 10
HEADROOM_BYTES = 3 << 30  # RLIMIT_DATA above the warmed-up process: a backstop; cases are held to 1 GiB RSS


class CaseTimeout(BaseException):
    """A case ran past CASE_SECONDS."""


def _status(key: str) -> int:
    text = Path("/proc/self/status").read_text()
    m = re.search(rf"^{key}:\s+(\d+) kB", text, re.MULTILINE)
    return int(m.group(1)) * 1024 if m else 0


def _reset_peak() -> None:
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def snapshot(root: Path) -> dict[str, list[Any]]:
    """Every path under ``root`` (links not followed, nothing opened) with its type, size and mtime."""
    out: dict[str, list[Any]] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(folder, name)
            st = os.lstat(p)
            kind = "d" if stat.S_ISDIR(st.st_mode) else "l" if stat.S_ISLNK(st.st_mode) else \
                "f" if stat.S_ISREG(st.st_mode) else "s"
            out[os.path.relpath(p, root)] = [kind, st.st_size if kind == "f" else 0,
                                             st.st_mtime_ns if kind in "fl" else 0]
    return out


def _changes(before: dict[str, list[Any]], after: dict[str, list[Any]]) -> list[str]:
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


def _on_alarm(signum: int, frame: Any) -> None:
    raise CaseTimeout()


def run_case(main: Any, case: dict[str, Any], root: Path) -> dict[str, Any]:
    """Run one case; its exit code (or what escaped main), output, time, peak memory and file changes."""
    before = snapshot(root)
    env_old = {k: os.environ.get(k) for k in case.get("env", {})}
    os.environ.update(case.get("env", {}))
    out, err = io.StringIO(), io.StringIO()
    _reset_peak()
    rss_before = _status("VmRSS")
    t0 = time.perf_counter()
    signal.setitimer(signal.ITIMER_REAL, CASE_SECONDS)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc: Any = main(list(case["argv"]))
    except CaseTimeout:
        rc = "timeout"
    except BaseException as exc:  # noqa: BLE001 - anything escaping main is a finding
        rc = f"raised {type(exc).__name__}: {exc}"[:300]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for k, v in env_old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return {"id": case["id"], "rc": rc, "stdout": out.getvalue()[-200_000:], "stderr": err.getvalue()[-5000:],
            "seconds": time.perf_counter() - t0, "peak_rss": _status("VmHWM"), "rss_before": rss_before,
            "changes": _changes(before, snapshot(root))}


WARM_MODULES = ("pandas", "pyarrow.parquet", "xgboost", "sklearn.pipeline", "scipy.optimize", "jsonschema",
                "matplotlib.pyplot", "optuna", "distributed", "hybridperf.learn.model", "hybridperf.learn.schema",
                "hybridperf.learn.booster", "hybridperf.search.rank", "hybridperf.search.measure_next",
                "hybridperf.importers", "hybridperf.advise.benefits", "hybridperf.advise.gpa",
                "hybridperf.evaluation.evaluate", "hybridperf.learn.calibrate")


def _warm_up(main: Any) -> None:
    """Import what the commands import and load the shipped data before the memory limit and the clock start:
    a case's 10 s are for its work, and an import cut off by the alarm would leave a half-imported module."""
    import importlib

    import matplotlib

    matplotlib.use("Agg")
    for name in WARM_MODULES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    with contextlib.redirect_stdout(io.StringIO()):
        main(["gpus", "--json"])
        main(["kernels", "--json"])


def main_runner(argv: list[str]) -> int:
    root, cases_path, results_path = Path(argv[0]), Path(argv[1]), Path(argv[2])
    cases = json.loads(cases_path.read_text())
    os.chdir(root)
    from hybridperf.cli import main

    signal.signal(signal.SIGALRM, _on_alarm)
    _warm_up(main)
    limit = _status("VmData") + HEADROOM_BYTES
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    with results_path.open("w") as fh:
        for case in cases:
            fh.write(json.dumps({"started": case["id"]}) + "\n")
            fh.flush()
            fh.write(json.dumps(run_case(main, case, root)) + "\n")
            fh.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main_runner(sys.argv[1:]))
