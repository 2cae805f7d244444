"""experiments/record_gpu.sh and record_holdout.sh, the scripts that recorded datasets/h200-cuda-bench,
h100-cuda-bench and the two *-cuda-holdout sets, run end to end against the fake CuPy: every step's command line
is still one `hybridperf record` accepts."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hybridperf.sweepfile import read_sweep
from tests.paths import REPO

KERNELS = {"seed004-vecadd", "seed004-matadd", "seed004-matvec", "seed004-dot", "seed002-tiled-matmul",
           "bench-ryoo-matmul", "bench-reduction", "bench-mb"}


@pytest.mark.slow
@pytest.mark.parametrize("script", ["record_gpu.sh", "record_holdout.sh"])
def test_the_recording_script_records_every_kernel_with_a_fake_gpu(tmp_path, script) -> None:
    shim = tmp_path / "shim" / "cupy"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(REPO)!r})\n"
        "from tests.record.fake_cupy import make_fake_cupy\n"
        "sys.modules['cupy'] = make_fake_cupy(name=b'NVIDIA H200', memory=150_000_000_000)\n",
        encoding="utf-8")
    env = {**os.environ, "OUT": str(tmp_path / "out"), "PY": sys.executable, "NCU": "0",
           "PYTHONPATH": os.pathsep.join([str(tmp_path / "shim"), str(REPO)])}
    run = subprocess.run(["bash", str(REPO / "experiments" / script)], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=600)
    log = (tmp_path / "out" / "log.txt").read_text(encoding="utf-8")
    assert run.returncode == 0, log[-3000:]
    assert "nothing could be timed" not in log and "rc=0" in log
    assert not [ln for ln in log.splitlines() if ln.strip().startswith("rc=") and ln.strip() != "rc=0"
                and not ln.strip().startswith("rc=0 ")], log[-3000:]
    sweep = read_sweep(tmp_path / "out" / "sweep.parquet")
    assert set(sweep["kernel"]) == KERNELS and set(sweep["gpu"]) == {"h200"}
    assert (sweep["status"] != "failed").all()
