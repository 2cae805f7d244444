"""Kill a command while it writes: the target is the old file or the complete new one, never partial; SIGINT and
SIGTERM remove the temporary file and exit 130 / 143."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hybridperf.errors import SweepError
from hybridperf.sweepfile import read_sweep, write_sweep
from tests.paths import REPO, TITANV_SWEEP

OLD = "old contents\n"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a test runner may start children with SIGINT ignored


def _plain_csv(path: Path, n_sizes: int) -> int:
    """Timings of matvec in a plain CSV (n, bs, time): ``n_sizes`` sizes x 6 block sizes."""
    n = np.repeat(np.arange(1, n_sizes + 1) * 1024.0, 6)
    bs = np.tile([32, 64, 128, 256, 512, 1024], n_sizes)
    pd.DataFrame({"n": n, "bs": bs, "time": 1e-6 * n + 0.01}).to_csv(path, index=False)
    return len(n)


IMPORT = ["import", "--format", "csv", "--map", "n=size.N", "--map", "bs=config.BLOCK", "--map", "time=time_ms",
          "--option", "kernel=seed004-matvec", "--option", "gpu=titan-v"]
CLI = [sys.executable, "-c", "import sys; from hybridperf.cli import main; sys.exit(main(sys.argv[1:]))"]


def _temp_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def _start_slow_write(tmp_path: Path, target: Path) -> tuple[subprocess.Popen[bytes], Path]:
    source = tmp_path / "plain.csv"
    _plain_csv(source, 10)
    marker = tmp_path / "marker"
    proc = subprocess.Popen([sys.executable, "-m", "tests.hostile.slow_write", str(marker), IMPORT[0], str(source),
                             *IMPORT[1:], "-o", str(target)], cwd=REPO, env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=_default_sigint)
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the write never started"
        time.sleep(0.05)
    return proc, marker


@pytest.mark.parametrize("sig, code, word", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_signal_mid_write_keeps_old_file_and_removes_temp(tmp_path: Path, sig: int, code: int, word: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    target = out / "sweep.csv"
    target.write_text(OLD)
    proc, _ = _start_slow_write(tmp_path, target)
    assert _temp_files(out), "the temporary file exists while the write is in progress"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code
    assert err.decode() == f"hybridperf: {word}\n"
    assert target.read_text() == OLD
    assert _temp_files(out) == []


def test_sigkill_mid_write_keeps_old_file(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    target = out / "sweep.csv"
    target.write_text(OLD)
    proc, _ = _start_slow_write(tmp_path, target)
    proc.kill()
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert target.read_text() == OLD  # a leftover .tmp file is possible after SIGKILL; the target is intact


def _outcome(target: Path, old: pd.DataFrame, n_rows: int) -> str:
    """What a reader finds after the kill: the old sweep, the complete new one, or a refused mismatch between
    the CSV and its sidecar (killed between the two writes) — never a partial file or mixed provenance."""
    try:
        df = read_sweep(target)
    except SweepError as exc:
        assert "sidecar" in str(exc) and "sha256 mismatch" in str(exc), str(exc)
        assert len(pd.read_csv(target)) == n_rows  # the CSV itself is complete
        return "mismatch refused"
    if len(df) == len(old) and df["time_ms"].tolist() == old["time_ms"].tolist():
        return "old"
    assert len(df) == n_rows and df.attrs["provenance"]["importer"] == "csv"
    return "new"


@pytest.mark.slow
def test_kills_at_any_time_leave_old_or_complete_file(tmp_path: Path) -> None:
    source = tmp_path / "plain.csv"
    n_rows = _plain_csv(source, 20_000)
    target = tmp_path / "sweep.csv"
    old = read_sweep(TITANV_SWEEP)
    old = old[old["kernel"] == "seed004-matvec"]
    argv = [*CLI, IMPORT[0], str(source), *IMPORT[1:], "-o", str(target)]
    write_sweep(old, target, provenance={"importer": "old"})
    t0 = time.monotonic()
    subprocess.run(argv, cwd=REPO, env=_env(), check=True, capture_output=True)
    full = time.monotonic() - t0
    assert _outcome(target, old, n_rows) == "new"
    seen = set()
    for i, sig in enumerate([signal.SIGKILL, signal.SIGTERM, signal.SIGINT] * 2):
        write_sweep(old, target, provenance={"importer": "old"})
        proc = subprocess.Popen(argv, cwd=REPO, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                preexec_fn=_default_sigint)
        time.sleep(full * (0.4 + 0.11 * i))  # spread over the run, most of them late (reading done, writing)
        proc.send_signal(sig)
        proc.communicate(timeout=120)
        seen.add(_outcome(target, old, n_rows))
        if sig != signal.SIGKILL:
            assert _temp_files(tmp_path) == []
        for name in _temp_files(tmp_path):  # SIGKILL cannot be handled: its temporary file may stay behind
            (tmp_path / name).unlink()
    assert seen <= {"old", "new", "mismatch refused"}
