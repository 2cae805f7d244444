"""record_sweep end to end with a fake runner: rows, resume, atomic flushing, failures (no GPU)."""
from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from hybridperf.errors import RecordError
from hybridperf.record import ContextLost, RunFailed, record_sweep
from hybridperf.sweepfile import read_provenance, read_sweep


class FakeLaunch:
    def __init__(self, ms: float, noise: float = 0.0) -> None:
        self.counters = {"registers": 12.0, "static_smem_bytes": 0.0}
        self._t = itertools.cycle([ms, ms * (1 + noise)])

    def time_ms(self) -> float:
        return next(self._t)

    def close(self) -> None:
        pass


class FakeRunner:
    """Time = N / 1e6 ms; BLOCK == 1024 fails to launch; records what it was asked to run."""

    def __init__(self, fail_at: dict[int, BaseException] | None = None, noise: float = 0.0) -> None:
        self.calls: list[str] = []
        self.fail_at = fail_at or {}
        self.noise = noise

    def __call__(self, row, launch):
        self.calls.append(row.label())
        exc = self.fail_at.get(len(self.calls))
        if exc is not None:
            raise exc
        if row.params.get("BLOCK") == 1024:
            raise RunFailed("launch error: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", {"registers": 64.0})
        assert launch.grid[0] >= 1 and launch.block[0] == row.params["BLOCK"]
        return FakeLaunch(row.params["N"] / 1e6, self.noise)


def _record(out: Path, runner, sizes=None, space=None, **kw):
    kw.setdefault("progress", False)
    return record_sweep("seed004-vecadd", sizes or {"N": [1e6, 2e6]}, space, out, gpu="h100-sxm", runner=runner, **kw)


def test_rows_statuses_and_columns(tmp_path: Path) -> None:
    out = tmp_path / "sweep.csv"
    runner = FakeRunner()
    s = _record(out, runner, space={"BLOCK": [256, 1024, 2048]})
    assert (s.total, s.skipped, s.ok, s.failed, s.invalid, s.stopped) == (6, 0, 2, 2, 2, "")
    assert len(runner.calls) == 4  # invalid rows (2048 threads) never reach the runner
    df = read_sweep(out)  # the project's own reader validates the file
    assert list(df.columns[:4]) == ["kernel", "gpu", "size.N", "config.BLOCK"]
    ok = df[df.status == "ok"]
    assert list(ok["time_ms"]) == [1.0, 2.0] and list(ok["repeats"]) == [5, 5]
    assert (ok["time_std_ms"] == 0).all() and (ok["counter.registers"] == 12).all()
    failed = df[df.status == "failed"]
    assert failed["reason"].str.startswith("launch error").all() and (failed["counter.registers"] == 64).all()
    assert failed["time_ms"].isna().all()
    invalid = df[df.status == "invalid"]
    assert (invalid["reason"] == "occupancy: threads per block exceed the limit of 1024").all()
    assert set(df.gpu) == {"h100-sxm"}
    prov = read_provenance(out)
    assert prov["recordings"][0]["settings"]["kernel"] == "seed004-vecadd"
    assert prov["recordings"][0]["gpu_spec"] == "h100-sxm" and "hostname" in prov["recordings"][0]
    assert not list(tmp_path.glob(".*tmp*")), "no temporary files are left behind"
    assert "2 ok, 2 failed, 2 invalid" in s.describe()


def test_rerun_resumes_and_extends(tmp_path: Path) -> None:
    out = tmp_path / "sweep.csv"
    _record(out, FakeRunner(), space={"BLOCK": [128, 256]})
    again = FakeRunner()
    s = _record(out, again, space={"BLOCK": [128, 256]})
    assert (s.skipped, s.recorded, again.calls) == (4, 0, [])
    more = FakeRunner()
    s = _record(out, more, sizes={"N": [1e6, 2e6, 4e6]}, space={"BLOCK": [128, 256]})
    assert s.skipped == 4 and more.calls == ["N=4e+06 BLOCK=128", "N=4e+06 BLOCK=256"]
    df = read_sweep(out)
    assert len(df) == 6 and not df.duplicated(["size.N", "config.BLOCK"]).any()
    assert len(read_provenance(out)["recordings"]) == 2  # one session per call that wrote rows


def test_crash_keeps_the_flushed_rows_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "sweep.parquet"
    sizes = {"N": [1e6, 2e6, 3e6, 4e6]}
    seen_on_disk: list[int] = []

    class Watching(FakeRunner):
        def __call__(self, row, launch):
            seen_on_disk.append(len(read_sweep(out)) if out.exists() else 0)
            return super().__call__(row, launch)

    runner = Watching(fail_at={8: RuntimeError("segfault-like crash")})
    with pytest.raises(RuntimeError, match="crash"):
        _record(out, runner, sizes=sizes, space={"BLOCK": [128, 256]}, flush_every=3)
    assert seen_on_disk == [0, 0, 0, 3, 3, 3, 6, 6]  # flushed every 3 rows while running
    assert len(read_sweep(out)) == 7  # and the rows done before the crash on the way out
    rest = FakeRunner()
    s = _record(out, rest, sizes=sizes, space={"BLOCK": [128, 256]})
    assert s.skipped == 7 and rest.calls == ["N=4e+06 BLOCK=256"]


def test_a_failed_write_leaves_the_previous_file_intact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "sweep.csv"
    _record(out, FakeRunner(), space={"BLOCK": [128]})
    before = out.read_bytes()
    import os

    real_replace = os.replace

    def broken(src, dst):
        if str(dst) == str(out):
            raise OSError(28, "No space left on device")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(RecordError, match="No space left on device"):
        _record(out, FakeRunner(), sizes={"N": [3e6]}, space={"BLOCK": [128]})
    assert out.read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "temporary file removed"


def test_lost_context_stops_and_resume_continues(tmp_path: Path) -> None:
    out = tmp_path / "sweep.csv"
    lost = ContextLost("launch error: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered")
    runner = FakeRunner(fail_at={2: lost})
    s = _record(out, runner, space={"BLOCK": [128, 256]})
    assert s.ok == 1 and s.failed == 1 and "CUDA context was lost at N=1e+06 BLOCK=256" in s.stopped
    assert len(runner.calls) == 2
    df = read_sweep(out)
    assert "ILLEGAL_ADDRESS" in df.loc[1, "reason"]
    s = _record(out, FakeRunner(), space={"BLOCK": [128, 256]})
    assert s.skipped == 2 and s.ok == 2


def test_retry_failed_replaces_failed_rows(tmp_path: Path) -> None:
    out = tmp_path / "sweep.csv"
    _record(out, FakeRunner(fail_at={1: RunFailed("compile error: kern.cu(3): error: x")}), space={"BLOCK": [128]})
    assert list(read_sweep(out).status) == ["failed", "ok"]
    s = _record(out, FakeRunner(), space={"BLOCK": [128]}, retry_failed=True)
    assert s.ok == 1 and s.skipped == 1
    df = read_sweep(out)
    assert sorted(df.status) == ["ok", "ok"] and len(df) == 2


def test_failures_while_timing_and_unconverged_rows(tmp_path: Path) -> None:
    out = tmp_path / "sweep.csv"

    class Flaky(FakeRunner):
        def __call__(self, row, launch):
            launch_ = super().__call__(row, launch)
            if row.params["N"] == 2e6:
                def boom() -> float:
                    raise RunFailed("launch error: CUDA_ERROR_INVALID_VALUE")
                launch_.time_ms = boom
            return launch_

    s = _record(out, Flaky(noise=0.5), space={"BLOCK": [128]}, max_repeats=8)
    df = read_sweep(out)
    assert s.ok == 1 and s.failed == 1
    assert df.loc[1, "reason"] == "launch error: CUDA_ERROR_INVALID_VALUE" and df.loc[1, "counter.registers"] == 12
    assert df.loc[0, "repeats"] == 8 and "above target 0.02 after 8 repeats" in df.loc[0, "info.timing"]


def test_interrupt_flushes_then_propagates(tmp_path: Path) -> None:
    out = tmp_path / "sweep.csv"
    with pytest.raises(KeyboardInterrupt):
        _record(out, FakeRunner(fail_at={3: KeyboardInterrupt()}), space={"BLOCK": [128, 256]})
    assert len(read_sweep(out)) == 2


def test_progress_is_reported_per_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hybridperf.progress import reporting
    from tests.recorder import Recorder

    rec = Recorder()
    with reporting(rec):
        _record(tmp_path / "s.csv", FakeRunner(), space={"BLOCK": [128]}, progress=True)
    (rows,) = rec.named("record seed004-vecadd")
    assert rows["total"] == rows["done"] == len(read_sweep(tmp_path / "s.csv")) and rows["stopped"]
    assert capsys.readouterr().out == ""


def test_other_kernels_rows_are_kept(tmp_path: Path) -> None:
    out = tmp_path / "sweep.csv"
    _record(out, FakeRunner(), space={"BLOCK": [128]})
    record_sweep("seed004-dot", {"N": [1e6]}, {"BLOCK": [64]}, out, gpu="h100-sxm", runner=FakeRunner(), progress=False)
    df = read_sweep(out)
    assert sorted(df.kernel.unique()) == ["seed004-dot", "seed004-vecadd"] and len(df) == 3


@pytest.mark.parametrize("kwargs, message", [
    ({"gpu": None}, "pass gpu="),
    ({"flush_every": 0}, "flush_every"),
    ({"min_repeats": 0}, "min_repeats"),
])
def test_bad_arguments(tmp_path: Path, kwargs: dict, message: str) -> None:
    args = {"gpu": "h100-sxm", "runner": FakeRunner(), "progress": False} | kwargs
    with pytest.raises(RecordError, match=message):
        record_sweep("seed004-vecadd", {"N": [1e6]}, None, tmp_path / "s.csv", **args)


def test_kernel_without_setup_and_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(RecordError, match="has no CUDA benchmark setup; recordable kernels: bench-mb"):
        record_sweep("clblast-xgemm", {}, None, tmp_path / "s.csv", gpu="h100-sxm", runner=FakeRunner())
    with pytest.raises(RecordError, match="does not exist; create it first"):
        record_sweep("seed004-vecadd", {}, None, tmp_path / "no" / "s.csv", gpu="h100-sxm", runner=FakeRunner())


def test_unreadable_existing_file_is_not_overwritten(tmp_path: Path) -> None:
    out = tmp_path / "s.csv"
    out.write_text("not,a,sweep\n1,2,3\n")
    with pytest.raises(RecordError, match="cannot resume"):
        _record(out, FakeRunner())
    assert out.read_text() == "not,a,sweep\n1,2,3\n"


def test_retry_failed_keeps_failed_rows_outside_the_request(tmp_path: Path) -> None:
    out = tmp_path / "sweep.csv"
    fail_all = FakeRunner(fail_at={1: RunFailed("launch error: a"), 2: RunFailed("launch error: b")})
    _record(out, fail_all, space={"BLOCK": [128]})  # both sizes fail
    s = _record(out, FakeRunner(), sizes={"N": [1e6]}, space={"BLOCK": [128]}, retry_failed=True)
    assert s.ok == 1
    df = read_sweep(out).sort_values("size.N")
    assert list(df.status) == ["ok", "failed"]  # the 2e6 row was not asked for: kept as it was
