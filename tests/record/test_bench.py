"""Benchmark setups and descriptors: every shipped one loads and evaluates; launch shapes agree."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from hybridperf.errors import RecordError
from hybridperf.kernel import load_kernel
from hybridperf.profile import PROFILE_FIELDS
from hybridperf.record import list_benches, load_bench
from hybridperf.record.bench import bench_dir

BENCHES = list_benches()
NEW = ["bench-mb", "bench-reduction", "bench-ryoo-matmul"]


def test_every_kernel_the_brief_names_has_a_setup() -> None:
    assert set(BENCHES) == {"seed004-matvec", "seed004-dot", "seed004-vecadd", "seed004-matadd",
                            "seed002-tiled-matmul", *NEW}
    cu = {p.name for p in bench_dir().glob("*.cu")}
    assert {load_bench(n).source.name for n in BENCHES} == cu  # every shipped .cu is used


@pytest.mark.parametrize("name", BENCHES)
def test_setup_loads_and_resolves_on_defaults(name: str) -> None:
    k = load_kernel(name)
    b = load_bench(k)
    assert b.source.is_file() and f"void {b.entry}(" in b.code()
    launch = b.resolve(k, {})
    assert launch.problems == ()
    prof = k.profile({})
    assert launch.threads_per_block == prof.threads_per_block[0]
    assert set(launch.defines) == set(k.config_names)
    assert len(launch.args) >= 2 and all(n > 0 for _, _, n, _ in launch.buffers)


@pytest.mark.parametrize("name", BENCHES)
def test_launched_grid_matches_the_descriptor(name: str) -> None:
    # at every ptx_check configuration (sizes chosen divisible), the grid the setup launches has the
    # descriptor's number of blocks and threads
    k = load_kernel(name)
    b = load_bench(k)
    for check in b.ptx_checks:
        launch = b.resolve(k, check.params)
        prof = k.profile(check.params)
        assert launch.blocks == prof.blocks[0], check.params
        assert launch.threads_per_block == prof.threads_per_block[0], check.params


@pytest.mark.parametrize("name", NEW)
def test_new_descriptors_evaluate_over_their_whole_space(name: str) -> None:
    k = load_kernel(name)
    assert "hybridperf/kernels/cuda/" in k.source  # the descriptor names its CUDA source
    space = next(k.config_space())
    sizes = {n: np.full(len(space), k.parameters[n].default) for n in k.size_names}
    values = {**sizes, **{c: space[c].to_numpy() for c in space.columns}}
    ok, _ = k.constraint_mask(values)
    prof = k.profile(values)
    for f in PROFILE_FIELDS:
        v = getattr(prof, f)[ok]
        assert np.isfinite(v).all() and (v >= 0).all(), f
    assert ok.sum() == {"bench-mb": 27 * 4, "bench-reduction": 60, "bench-ryoo-matmul": 48}[name]


def test_reduction_counts_follow_the_warp_arithmetic() -> None:
    k = load_kernel("bench-reduction")

    def p(v, b, it=1):
        return k.profile({"VARIANT": v, "BLOCK": b, "K6_ITERS": it, "N": 2**24})

    # K0 at 256 threads: every warp works in the 5 steps with 2s <= 32, then 1/2 + 1/4 + 1/8 of them
    assert p(0, 256).fp_insts[0] == pytest.approx(5 + 0.875)
    # K2: 3 steps with >= 32 active threads (1/2 + 1/4 + 1/8 of the warps) then 5 steps of one warp
    assert p(2, 256).fp_insts[0] == pytest.approx(0.875 + 5 / 8)
    assert p(2, 256).sync_insts[0] == 9 and p(5, 256).sync_insts[0] == 3
    assert p(3, 256).blocks[0] == 2**24 / 512 and p(6, 256, 4).blocks[0] == 2**24 / 2048
    assert p(6, 256, 4).global_loads[0] == 8
    # each optimisation removes instructions (seed 000 Fig. 13's point), K6 per element
    comp = [p(v, 256).comp_insts[0] for v in range(6)]
    assert comp[0] > comp[1] > comp[2] and comp[3] > comp[4] > comp[5]
    per_elem = [p(v, 256).comp_insts[0] / (1 if v <= 2 else 2) for v in range(6)] + [p(6, 256, 8).comp_insts[0] / 16]
    assert per_elem[6] == min(per_elem)


def test_mb_covers_the_papers_seven_benchmarks() -> None:
    k = load_kernel("bench-mb")
    table4 = {1: (0, 20), 2: (1, 8), 3: (1, 20), 4: (2, 12), 5: (2, 20), 6: (4, 20), 7: (6, 20)}
    loads = {p.name: p.values for p in k.config}
    for mem, fp in table4.values():
        assert mem in loads["LOADS"] and fp in loads["FMAS"]
        prof = k.profile({"LOADS": mem, "FMAS": fp, "COALESCED": 0 if mem else 1, "ITERS": 1000})
        assert prof.global_loads[0] == 1000 * mem
        assert prof.fp_insts[0] == 1000 * (fp + mem) + 1
    unc = k.profile({"LOADS": 2, "COALESCED": 0})
    assert unc.uncoal_mem_insts[0] == 2000 and unc.coal_mem_insts[0] == 1


def test_ryoo_space_is_the_papers() -> None:
    k = load_kernel("bench-ryoo-matmul")
    space = next(k.config_space())
    ok, _ = k.constraint_mask({**{c: space[c].to_numpy() for c in space.columns}, "N": 2048})
    valid = space[ok]
    assert len(valid) == 48
    assert set(map(tuple, valid[valid.TILE == 8][["UNROLL"]].to_numpy())) == {(1,), (2,), (4,), (8,)}
    assert set(map(tuple, valid[valid.TILE == 16][["UNROLL"]].to_numpy())) == {(1,), (2,), (4,), (16,)}
    one = k.profile({"N": 1024, "TILE": 16, "RECT": 2, "UNROLL": 16, "PREFETCH": 1})
    assert one.smem_per_block_bytes[0] == 4 * 16 * 16 * 3 and one.blocks[0] == (1024 / 32) * (1024 / 16)
    assert one.flops[0] == 2 * 1024 * 2


def _setup(tmp_path: Path, text: str) -> Path:
    src = bench_dir() / "vecadd.cu"
    (tmp_path / "vecadd.cu").write_text(src.read_text())
    p = tmp_path / "seed004-vecadd.toml"
    p.write_text(text)
    return p


GOOD = (bench_dir() / "seed004-vecadd.toml").read_text()


@pytest.mark.parametrize("edit, message", [
    (("format_version = 1", "format_version = 2"), "format_version must be 1"),
    (('entry = "vecadd"', 'entry = "vecadd"\ncolour = 1'), "unknown top-level key 'colour'"),
    (('descriptor = "seed004-vecadd"', 'descriptor = "seed004-dot"'), "descriptor = 'seed004-dot' but the kernel"),
    (('source = "vecadd.cu"', 'source = "nope.cu"'), "CUDA source 'nope.cu' not found"),
    (('elements = "N"\ninit = "zeros"', 'elements = "N"\ninit = "noise"'), "init 'noise' unknown"),
    (('elements = "N"\ninit = "zeros"', 'elements = "Q"\ninit = "zeros"'), "unknown name 'Q'"),
    (('args = ["a", "b", "c",', 'args = ["a", "b", "d",'), "names buffer 'd'"),
    (('{ value = "N", dtype = "int32" }', '{ value = "N", dtype = "int13" }'), "args\\[3\\] must be"),
])
def test_malformed_setups(tmp_path: Path, edit: tuple[str, str], message: str) -> None:
    assert edit[0] in GOOD
    p = _setup(tmp_path, GOOD.replace(*edit))
    with pytest.raises(RecordError, match=message):
        load_bench("seed004-vecadd", p)


def test_resolve_reports_impossible_launches() -> None:
    k = load_kernel("seed004-vecadd")
    b = load_bench(k)
    launch = b.resolve(k, {"N": 2**33, "BLOCK": 32})
    assert launch.problems and "does not fit the kernel's int32" in launch.problems[0]
    assert launch.buffer_bytes == 3 * 4 * 2**33 and math.prod(launch.grid) == 2**28
