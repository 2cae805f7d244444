"""The record package's public API: sorted __all__ lists naming real objects; the ncu child's errors."""
from __future__ import annotations

import importlib
import sys

import pytest

MODULES = ["hybridperf.record", "hybridperf.record.bench", "hybridperf.record.plan", "hybridperf.record.stats",
           "hybridperf.record.table", "hybridperf.record.runner", "hybridperf.record.device",
           "hybridperf.record.cupy_runner", "hybridperf.record.ncu", "hybridperf.record.child",
           "hybridperf.record.ptx", "hybridperf.record.record"]


@pytest.mark.parametrize("name", MODULES)
def test_all_is_sorted_and_resolves(name: str) -> None:
    mod = importlib.import_module(name)

    def key(n: str) -> tuple[int, str]:
        return (0 if n.isupper() else 1 if n[0].isupper() else 2, n)

    assert list(mod.__all__) == sorted(mod.__all__, key=key)
    for attr in mod.__all__:
        assert hasattr(mod, attr), attr


def test_record_error_is_a_hybridperf_error() -> None:
    from hybridperf.errors import HybridperfError, RecordError
    from hybridperf.record import ContextLost, RunFailed

    assert issubclass(RecordError, HybridperfError) and issubclass(ContextLost, RunFailed)
    assert issubclass(RunFailed, RecordError)
    assert str(RunFailed("two\n lines")) == "two lines"


def test_child_without_cupy_exits_1_with_one_line(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from hybridperf.record.child import child_spec, main

    monkeypatch.setitem(sys.modules, "cupy", None)
    spec = child_spec("seed004-vecadd", "", {"N": 1024.0, "BLOCK": 256.0})
    from hybridperf.record.bench import bench_dir

    spec = spec.replace('"bench": ""', f'"bench": "{bench_dir() / "seed004-vecadd.toml"}"')
    assert main([spec]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("hybridperf.record.child: error: no CUDA GPU found") and "\n" not in err
