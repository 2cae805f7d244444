"""The command line as a user meets it: table widths at 100 columns, seconds to the first progress output, doc lines.

Run from the repository root: ``python experiments/cli_ux.py`` (writes experiments/results/cli_ux.md).
Each command runs as a user would run it, in a subprocess: tables with ``COLUMNS=100`` and stdout a pipe;
long commands under a pseudo-terminal (progress bars are drawn only on a terminal), timed from the
start of the process to its first output and to the first line of a real task (not the start-up
spinner), then stopped: only the time to feedback is measured here, not the commands' run times.
"""
from __future__ import annotations

import os
import platform
import pty
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = str(Path(sys.executable).parent / "hybridperf")
RAW = ROOT.parent / "shared" / "data" / "raw"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

TABLES = [
    ["gpus"], ["gpus", "show", "a100"], ["kernels"], ["datasets"], ["reproduce"],
    ["analyze", "--gpu", "a100", "--kernel", "matvec", "--set", "N=4096"],
    ["analyze", "--gpu", "a100", "--kernel", "matvec", "--set", "N=4096", "--terms"],
    ["analyze", "--gpu", "titan-v", "--kernel", "tiled-matmul", "--set", "N=512:4096:x2", "--set", "TILE=8,16,32"],
    ["predict", "-m", "{model}", "--kernel", "matvec", "--set", "N=1024:65536:x2"],
    ["rank", "--kernel", "clblast-xgemm", "--gpu", "gtx680", "--set", "M=2048", "--set", "N=2048", "--set", "K=2048"],
    ["evaluate", "titanv-seed004", "--split", "S2"],
    ["advise", "--gpu", "a100", "--kernel", "matvec", "--set", "N=1024,16384"],
]

LONG = [
    ["train", "uci-sgemm-gtx680", "-o", "{tmp}/uci.json"],
    ["train", "titanv-seed004", "-o", "{tmp}/tuned.json", "--tune", "5"],
    ["evaluate", "uci-sgemm-gtx680", "--split", "S5"],
    ["evaluate", "kt-gemm-rtx", "--split", "S4", "--holdout", "geforce-rtx-2080-ti", "--calibration-runs", "50"],
    ["rank", "--kernel", "clblast-xgemm", "--gpu", "gtx680", "--set", "M=2048", "--set", "N=2048", "--set", "K=2048"],
    ["replay", "kt-convolution", "--kernel", "kt-convolution", "--gpu", "rtx-a4000", "--budget", "20", "--seeds", "2"],
    ["calibrate", "titanv-seed004", "--gpu", "titan-v"],
    ["import", str(RAW / "sgemm-uci" / "sgemm_product_dataset.zip"), "--format", "uci-sgemm", "-o", "{tmp}/uci.parquet"],
]


def _widest(argv: list[str], env: dict[str, str]) -> tuple[int, int]:
    out = subprocess.run([BIN, *argv], capture_output=True, text=True, env=env, check=False).stdout
    return max((len(line) for line in out.splitlines()), default=0), len(out.splitlines())


def _first_outputs(argv: list[str], limit_s: float = 180.0) -> tuple[float | None, float | None, str]:
    """(seconds to the first output, seconds to the first real task's line, that task) under a terminal."""
    t0 = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:  # the child: the command, on a 100-column terminal
        os.environ["COLUMNS"] = "100"
        os.execv(BIN, [BIN, *argv])
    first = real = None
    task, text = "", ""
    try:
        while time.perf_counter() - t0 < limit_s and real is None:
            ready, _, _ = select.select([fd], [], [], 0.02)
            if not ready:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    break
                continue
            try:
                chunk = os.read(fd, 65536).decode("utf-8", "replace")
            except OSError:
                break
            now = time.perf_counter() - t0
            first = first if first is not None else now
            text += chunk
            for line in ANSI.sub("", text).replace("\r", "\n").splitlines():
                words = line.strip(" ⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏━╸╺")
                if words and not re.search(r": (starting|loading)\b", words):
                    real, task = now, re.split(r"\s{2,}|━", words)[0][:60]
                    break
    finally:
        try:
            os.kill(pid, signal.SIGTERM)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(fd)
    return first, real, task


def main() -> int:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout
    env = {**os.environ, "COLUMNS": "100"}
    lines = ["# The command line as a user meets it", "",
             f"`python experiments/cli_ux.py` at commit {commit.strip()}, {platform.node()}: a shared 2-core "
             f"machine (load average {os.getloadavg()[0]:.1f} at the start), so times are noisy.", ""]
    with tempfile.TemporaryDirectory() as tmp:
        model = f"{tmp}/model.json"
        subprocess.run([BIN, "train", "titanv-seed004", "-o", model, "-q"], check=True, capture_output=True)
        lines += ["## Table widths with COLUMNS=100 (stdout a pipe)", "", "| command | widest line | lines |",
                  "|---|---|---|"]
        for argv in TABLES:
            argv = [a.format(model=model) for a in argv]
            width, n = _widest(argv, env)
            lines.append(f"| `hybridperf {' '.join(argv).replace(tmp, 'TMP')}` | {width} | {n} |")
            print(lines[-1], flush=True)
        width, n = _widest(["gpus", "--wide"], env)
        lines += ["", f"`hybridperf gpus --wide` (every column): widest line {width}.", "",
                  "## Seconds to the first progress output (a 100-column terminal)", "",
                  "First output: the start-up spinner; first task: the first progress line of real work.", "",
                  "| command | first output (s) | first task (s) | the task |", "|---|---|---|---|"]
        for argv in LONG:
            argv = [a.format(tmp=tmp) for a in argv]
            first, real, task = _first_outputs(argv)
            fmt = (lambda v: "-" if v is None else f"{v:.2f}")
            lines.append(f"| `hybridperf {' '.join(argv).replace(tmp, 'TMP')}` | {fmt(first)} | {fmt(real)} | "
                         f"{task} |")
            print(lines[-1], flush=True)
    sys.path.insert(0, str(ROOT))
    from tests.cli.test_docs import ALL

    docs = sorted({c.doc for c in ALL})
    lines += ["", "`hybridperf record` needs CuPy and an NVIDIA GPU (none here): its progress is tested with a fake "
              "runner (tests/record), not timed.", "", "## Doc command lines run by tests (tests/cli/test_docs.py)", "",
              "| document | run | parsed only (needs-gpu) |", "|---|---|---|"]
    for d in docs:
        cmds = [c for c in ALL if c.doc == d]
        lines.append(f"| {d} | {sum(not c.needs_gpu for c in cmds)} | {sum(c.needs_gpu for c in cmds)} |")
    lines.append(f"| all | {sum(not c.needs_gpu for c in ALL)} | {sum(c.needs_gpu for c in ALL)} |")
    out = ROOT / "experiments" / "results" / "cli_ux.md"
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
