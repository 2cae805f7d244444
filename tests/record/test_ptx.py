"""PTX: every shipped .cu compiles with nvcc; static counts agree with the descriptors (docs/record.md)."""
from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest

from hybridperf.errors import RecordError
from hybridperf.kernel import load_kernel
from hybridperf.record import list_benches, load_bench
from hybridperf.record.ptx import count_ptx, ptxas_resources, run_ptx_checks

HAVE_NVCC = shutil.which("nvcc") is not None
needs_nvcc = pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not on PATH")

SAMPLE = """
.visible .entry k(
\t.param .u64 k_param_0
)
{
\t.reg .pred \t%p<3>;
\t.shared .align 4 .b8 _ZZ1kE1s[1024];
\tld.param.u64 \t%rd1, [k_param_0];
\tmov.u32 \t%r1, 0;
$L__BB0_1:
\tld.global.nc.f32 \t%f1, [%rd1];
\tmov.u32 \t%r2, 0;
$L__BB0_2:
\tld.volatile.shared.f32 \t%f2, [%r2];
\tfma.rn.f32 \t%f3, %f1, %f2, %f3;
\tbar.warp.sync \t-1;
\tadd.s32 \t%r2, %r2, 4;
\tsetp.lt.s32 \t%p1, %r2, 64;
\t@%p1 bra \t$L__BB0_2;
\tbar.sync \t0;
\tadd.s32 \t%r1, %r1, 1;
\tsetp.lt.s32 \t%p2, %r1, 8;
\t@%p2 bra \t$L__BB0_1;
\tst.global.f32 \t[%rd1], %f3;   // the result
\tret;
}
"""


def test_counter_on_handwritten_ptx() -> None:
    c = count_ptx(SAMPLE, "k")
    assert c.smem_bytes == 1024 and len(c.loops) == 2
    assert c.kernel["total"] == 16 and c.straight["total"] == 4  # ld.param, mov, st.global, ret
    outer, inner = c.loops
    assert (outer["ld_global"], outer["bar_sync"], outer["branch"], outer["total"]) == (1, 1, 1, 6)
    assert (inner["ld_shared"], inner["fma_f32"], inner["bar_warp"], inner["fp32"], inner["total"]) == (1, 1, 1, 1, 6)
    assert c.loop["total"] == 12 and c.kernel["st_global"] == 1 and c.kernel["non_global"] == 14
    assert c.region("loop1") == inner
    with pytest.raises(RecordError, match="no entry 'nope' \\(found: k\\)"):
        count_ptx(SAMPLE, "nope")
    with pytest.raises(RecordError, match="unknown PTX region 'loop2'"):
        c.region("loop2")


@pytest.fixture(scope="module")
def ptx_results() -> dict[str, list]:
    def one(name: str) -> tuple[str, list]:
        k = load_kernel(name)
        return name, run_ptx_checks(load_bench(k), k)

    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        return dict(pool.map(one, list_benches()))


@needs_nvcc
@pytest.mark.parametrize("name", list_benches())
def test_ptx_counts_match_the_descriptor(ptx_results: dict[str, list], name: str) -> None:
    results = ptx_results[name]
    assert results, f"{name} has no ptx_check"
    bad = [f"check {r.check} {r.region} {r.quantity}: PTX {r.actual:g}, descriptor {r.expected:g}"
           for r in results if not r.ok]
    assert not bad, "; ".join(bad)


@needs_nvcc
@pytest.mark.parametrize("name", ["bench-mb", "bench-reduction", "bench-ryoo-matmul", "seed002-tiled-matmul",
                                  "seed004-dot"])
def test_ptxas_resources_match_the_descriptor(name: str) -> None:
    # shared memory exactly; registers (ptxas sm_80, nvcc 13.0) within 3 for the new descriptors,
    # whose register formulas were fitted to ptxas; the seed descriptors keep their papers' values
    k = load_kernel(name)
    b = load_bench(k)
    params = b.ptx_checks[0].params
    res = ptxas_resources(b.source, {n: k.resolve(params)[n] for n in b.defines}, b.entry)
    prof = k.profile(params)
    assert res.smem_bytes == prof.smem_per_block_bytes[0]
    assert res.spill_bytes == 0
    if name.startswith("bench-"):
        assert abs(res.registers - prof.registers_per_thread[0]) <= 3, (res.registers, prof.registers_per_thread[0])


@needs_nvcc
def test_compile_errors_are_one_line(tmp_path) -> None:
    from hybridperf.record.ptx import compile_ptx

    bad = tmp_path / "bad.cu"
    bad.write_text('extern "C" __global__ void k() { undefined_name = 1; }\n')
    with pytest.raises(RecordError, match=r"nvcc failed on bad.cu: .*error.*undefined_name"):
        compile_ptx(bad, {})
    with pytest.raises(RecordError, match="nvcc failed on dot.cu: .*compile with -DBLOCK"):
        compile_ptx(load_bench("seed004-dot").source, {})
