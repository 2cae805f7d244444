"""The importers' progress output goes to stderr."""
from __future__ import annotations

import pytest

from hybridperf.errors import HybridperfError
from hybridperf.importers import import_sweep
from tests.paths import SWEEP_FIXTURES


def test_progress_is_reported_and_can_be_disabled(capsys) -> None:
    from hybridperf.progress import reporting
    from tests.recorder import Recorder

    rec = Recorder()
    with reporting(rec):
        import_sweep(SWEEP_FIXTURES / "kt_convolution_a100.json", "kernel-tuner", progress=True)
    (entries,) = rec.named("import kernel-tuner")
    assert entries["total"] == entries["done"] == 12 and entries["stopped"]  # one step per cache entry
    assert capsys.readouterr() == ("", "")  # the library prints nothing itself
    rec = Recorder()
    with reporting(rec):
        import_sweep(SWEEP_FIXTURES / "kt_convolution_a100.json", "kernel-tuner", progress=False)
    assert rec.tasks == []


def test_text_options_as_the_command_line_gives_them(tmp_path) -> None:
    df = import_sweep(SWEEP_FIXTURES / "kt_gemm_rtx2080ti.json", "kernel-tuner", sizes="K=4096", progress="false")
    assert (df["size.K"] == 4096).all()
    ns = import_sweep(SWEEP_FIXTURES / "neusight" / "bmm" / "p2.1.0" / "Tesla P4.csv", "neusight", ops="bmm,linear")
    assert len(ns) == 10
    (tmp_path / "r.csv").write_text("n,t\n1,2\n")
    csv = import_sweep(tmp_path / "r.csv", "csv", mapping="n=size.N,t=time_ms", kernel="k", gpu="titan-v")
    assert csv["time_ms"].tolist() == [2.0]
    for bad in ({"sizes": "K"}, {"sizes": "K=big"}, {"progress": "maybe"}):
        with pytest.raises(HybridperfError, match="option"):
            import_sweep(SWEEP_FIXTURES / "kt_gemm_rtx2080ti.json", "kernel-tuner", **bad)
