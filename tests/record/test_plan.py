"""Planning: the grid of rows, constraint/occupancy/launch screening, resume filtering (no GPU)."""
from __future__ import annotations

import pandas as pd
import pytest

from hybridperf.errors import RecordError
from hybridperf.hardware import load_gpu
from hybridperf.kernel import load_kernel
from hybridperf.record import done_keys, load_bench, plan_sweep
from hybridperf.record.table import make_record

H100 = load_gpu("h100-sxm")


def test_grid_order_and_defaults() -> None:
    k = load_kernel("seed004-vecadd")
    plan = plan_sweep(k, H100, {"N": [1e6, 2e6]}, {"BLOCK": [128, 256]})
    assert plan.total == 4 and plan.skipped == 0 and plan.pending == 4
    assert [r.label() for r in plan.rows] == ["N=1e+06 BLOCK=128", "N=1e+06 BLOCK=256",
                                              "N=2e+06 BLOCK=128", "N=2e+06 BLOCK=256"]
    assert plan.rows[0].gpu == "h100-sxm" and plan.rows[0].kernel == "seed004-vecadd"
    # left-out sizes take their default; no space means the descriptor's whole space
    full = plan_sweep(k, H100, {}, None)
    assert full.total == 6 and {r.params["N"] for r in full.rows} == {10_000_000.0}


def test_constraints_make_invalid_rows() -> None:
    k = load_kernel("seed002-tiled-matmul")
    plan = plan_sweep(k, H100, {"N": [80]}, None)
    status = {r.params["TILE"]: (r.status, r.reason) for r in plan.rows}
    assert status[8.0][0] == "pending" and status[32.0][0] == "invalid"
    assert "N % TILE == 0" in status[32.0][1]


def test_occupancy_limits_make_invalid_rows() -> None:
    k = load_kernel("seed004-vecadd")
    plan = plan_sweep(k, H100, {"N": [4096]}, {"BLOCK": [1024, 2048]})
    assert [r.status for r in plan.rows] == ["pending", "invalid"]
    assert plan.rows[1].reason == "occupancy: threads per block exceed the limit of 1024"
    # 32x32 tiles of two 4-byte matrices fit, but the G80's 512 threads per block do not
    old = plan_sweep(load_kernel("seed002-tiled-matmul"), load_gpu("8800gtx"), {"N": [1024]}, {"TILE": [16, 32]})
    assert [r.status for r in old.rows] == ["pending", "invalid"]


def test_launch_and_memory_screening_with_the_setup() -> None:
    k = load_kernel("seed004-matvec")
    bench = load_bench(k)
    plan = plan_sweep(k, H100, {"N": [4096, 200_000]}, {"BLOCK": [256]}, bench=bench)
    assert plan.rows[0].status == "pending"
    assert plan.rows[1].status == "invalid" and plan.rows[1].reason.startswith("memory: needs 149 GiB")
    # N beyond int32 does not fit the kernel's int argument
    vec = load_kernel("seed004-vecadd")
    bad = plan_sweep(vec, load_gpu("h200"), {"N": [3e9]}, {"BLOCK": [256]}, bench=load_bench(vec))
    assert bad.rows[0].reason == "launch: argument N does not fit the kernel's int32"


def test_resume_skips_recorded_rows() -> None:
    k = load_kernel("seed004-vecadd")
    first = plan_sweep(k, H100, {"N": [1e6, 2e6]}, {"BLOCK": [128, 256]})
    recorded = pd.DataFrame([make_record(first.rows[0], status="failed", reason="launch error: x"),
                             make_record(first.rows[3], status="invalid", reason="x")])
    again = plan_sweep(k, H100, {"N": [1e6, 2e6]}, {"BLOCK": [128, 256]}, done=done_keys(recorded, k))
    assert again.skipped == 2 and [r.label() for r in again.rows] == ["N=1e+06 BLOCK=256", "N=2e+06 BLOCK=128"]
    retry = done_keys(recorded, k, retry_failed=True)
    assert len(retry) == 1  # the failed row is planned again
    # another GPU's rows never count as done
    other = plan_sweep(k, load_gpu("h200"), {"N": [1e6, 2e6]}, {"BLOCK": [128, 256]}, done=done_keys(recorded, k))
    assert other.skipped == 0


def test_done_keys_ignore_other_kernels_and_missing_columns() -> None:
    k = load_kernel("seed004-vecadd")
    assert done_keys(None, k) == set()
    df = pd.DataFrame({"kernel": ["seed004-dot"], "gpu": ["h100-sxm"], "size.N": [1.0], "config.BLOCK": [64.0],
                       "status": ["ok"]})
    assert done_keys(df, k) == set()
    assert done_keys(df.drop(columns=["config.BLOCK"]), load_kernel("seed004-dot")) == set()


@pytest.mark.parametrize("sizes, space, message", [
    ({"BLOCK": [64]}, None, "'BLOCK' is not a size parameter \\(a config parameter"),
    ({}, {"N": [64]}, "'N' is not a config parameter \\(a size parameter"),
    ({"N": []}, None, "no values given for N"),
])
def test_bad_names(sizes: dict, space: dict | None, message: str) -> None:
    with pytest.raises(RecordError, match=message):
        plan_sweep(load_kernel("seed004-vecadd"), H100, sizes, space)
