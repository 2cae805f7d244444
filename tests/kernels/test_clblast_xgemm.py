"""clblast-xgemm: CLBlast constraints, launch geometry, shared memory and exact 2MNK flops."""
from __future__ import annotations

import itertools
import zipfile

import numpy as np
import pandas as pd
import pytest

from hybridperf.kernel import load_kernel

from ._data import FIXTURES, raw

PARAMS = ("MWG", "NWG", "KWG", "MDIMC", "NDIMC", "MDIMA", "NDIMB", "KWI", "VWM", "VWN", "STRM", "STRN", "SA", "SB")


@pytest.fixture(scope="module")
def xgemm():
    return load_kernel("clblast-xgemm")


def _rows(name: str) -> pd.DataFrame:
    return pd.read_csv(FIXTURES / name)


@pytest.mark.parametrize("fixture, size", [("xgemm_uci_rows.csv", 2048.0), ("xgemm_kt_rtx2080ti_rows.csv", 4096.0)])
def test_recorded_configs_are_valid_and_give_exact_flops(xgemm, fixture: str, size: float) -> None:
    rows = _rows(fixture)
    params = {p: rows[p].to_numpy(float) for p in PARAMS}
    params.update(M=size, N=size, K=size)
    if "PRECISION" in rows:
        params["PRECISION"] = rows["PRECISION"].to_numpy(float)
    ok, reasons = xgemm.constraint_mask(params)
    assert ok.all(), reasons
    prof = xgemm.profile(params)
    assert np.isfinite(prof.to_frame().to_numpy()).all()
    # flops per thread x threads = 2 M N K, exactly, for every configuration
    np.testing.assert_array_equal(prof.flops * prof.threads_per_block * prof.blocks, 2 * size**3)
    assert (prof.total_threads * (rows["MWG"] / rows["MDIMC"]) * (rows["NWG"] / rows["NDIMC"]) == size**2).all()


def test_hand_computed_launch_and_memory(xgemm) -> None:
    # Defaults: 64x64x32 tiles, 16x16 threads, SA=SB=1 at 4096^3.
    p = xgemm.profile({})
    assert p.threads_per_block[0] == 256 and p.blocks[0] == 64 * 64
    assert p.smem_per_block_bytes[0] == (32 * 64 + 32 * 64) * 4
    assert p.sync_insts[0] == 2 * 4096 / 32
    # MWG=128 NWG=32 KWG=16, 16x8 threads, MDIMA=32 NDIMB=8, KWI=8, VWM=VWN=4, A in shared memory, B not.
    cfg = {"MWG": 128, "NWG": 32, "KWG": 16, "MDIMC": 16, "NDIMC": 8, "MDIMA": 32, "NDIMB": 8, "KWI": 8,
           "VWM": 4, "VWN": 4, "STRM": 0, "STRN": 0, "SA": 1, "SB": 0, "M": 2048, "N": 2048, "K": 2048}
    assert xgemm.constraint_mask(cfg)[0].all()
    p = xgemm.profile(cfg)
    assert p.threads_per_block[0] == 128 and p.blocks[0] == 16 * 64
    assert p.smem_per_block_bytes[0] == 16 * 128 * 4
    # A: 128*16/(4*128) = 4 float4 loads per K-tile x 128 tiles; B: every k, NWI/VWN = 1 float4.
    assert p.global_loads[0] == 4 * 128 + 2048 * 1
    assert p.fp_insts[0] == 2048 * 8 * 4
    # float8 vectors take two 128-bit instructions
    p8 = xgemm.profile({**cfg, "VWM": 8, "MDIMC": 16, "MDIMA": 16, "NDIMB": 8})
    p4 = xgemm.profile({**cfg, "VWM": 4, "MDIMC": 16, "MDIMA": 16, "NDIMB": 8})
    assert p8.global_stores[0] == p4.global_stores[0]  # same bytes, same 128-bit store count


def test_constraints_reject_invalid_configs(xgemm) -> None:
    base = {"MWG": 64, "NWG": 64, "KWG": 32, "MDIMC": 16, "NDIMC": 16, "MDIMA": 16, "NDIMB": 16, "KWI": 2,
            "VWM": 2, "VWN": 2}
    bad = [
        {"MWG": 16, "MDIMC": 32},                    # MWG % (MDIMC*VWM)
        {"NWG": 16, "VWN": 4, "NDIMC": 8},           # NWG % (NDIMC*VWN)
        {"MDIMC": 32, "NDIMC": 32, "MDIMA": 8},      # KWG % (MDIMC*NDIMC/MDIMA) = 32 % 128
        {"KWG": 16, "KWI": 8, "MDIMA": 32, "NDIMB": 32, "MDIMC": 8, "NDIMC": 8},  # valid: control row
        {"M": 1000},                                 # M % MWG
    ]
    ok, reasons = xgemm.constraint_mask({k: np.array([r.get(k, base.get(k, 4096)) for r in bad], dtype=float)
                                         for k in set(base) | {"M"}})
    assert list(ok) == [False, False, False, True, False]
    assert "MDIMC * VWM" in reasons[0] and "M % MWG" in reasons[4]


def test_uci_set_is_exactly_the_constrained_space(xgemm) -> None:
    with zipfile.ZipFile(raw("sgemm-uci", "sgemm_product_dataset.zip")) as zf:
        uci = pd.read_csv(zf.open("sgemm_product.csv"), usecols=list(PARAMS))
    sizes = {"M": 2048.0, "N": 2048.0, "K": 2048.0}
    ok, _ = xgemm.constraint_mask({**sizes, **{p: uci[p].to_numpy(float) for p in PARAMS}})
    assert ok.all()
    product = np.array(list(itertools.product(*(sorted(uci[p].unique()) for p in PARAMS))), dtype=float)
    mask, _ = xgemm.constraint_mask({**sizes, **{p: product[:, i] for i, p in enumerate(PARAMS)}})
    assert mask.sum() == len(uci) == 241_600


def _wavefronts(lane_bytes: list[tuple[int, int]], conflict_free: bool = False) -> int:
    """Shared-memory wavefronts of one warp instruction by brute force: each 4-byte word lives in bank
    word % 32; a wavefront serves one word per bank (lanes reading the same word share it), so the
    instruction takes as many wavefronts as the busiest bank has distinct words; ``conflict_free``: as many as
    its distinct words need 32 banks for."""
    words = {w for start, size in lane_bytes for w in range(start // 4, (start + size) // 4)}
    if conflict_free:
        return -(-len(words) // 32)
    per_bank: dict[int, int] = {}
    for w in words:
        per_bank[w % 32] = per_bank.get(w % 32, 0) + 1
    return max(per_bank.values())


def _local_to_private_wavefronts(cfg: dict[str, int], operand: str, conflict_free: bool = False) -> int:
    """Wavefronts of one warp's LocalToPrivateA (or B) per k, enumerated from the kernel source's indexing
    (CLBlast xgemm_part1: apm[mi] = alm[kg*(MWG/VWM) + mg], mg = mi + get_local_id(0)*(MWI/VWM) with STRM=0,
    get_local_id(0) + mi*MDIMC with STRM=1; B likewise with get_local_id(1), NDIMC, NWI, VWN, STRN). A lane
    reads VW floats; a vector wider than 16 bytes is two or more 128-bit instructions, one per 16-byte part."""
    dimc, wg, vw, strided = ((cfg["MDIMC"], cfg["MWG"], cfg["VWM"], cfg["STRM"]) if operand == "A"
                             else (cfg["NDIMC"], cfg["NWG"], cfg["VWN"], cfg["STRN"]))
    wi = wg // dimc
    lanes = range(min(32, cfg["MDIMC"] * cfg["NDIMC"]))
    ids = [lane % cfg["MDIMC"] if operand == "A" else lane // cfg["MDIMC"] for lane in lanes]
    total = 0
    for mi in range(wi // vw):
        starts = [4 * vw * (i + mi * dimc if strided else mi + i * (wi // vw)) for i in ids]
        for part in range(0, 4 * vw, 16):
            total += _wavefronts([(s + part, min(16, 4 * vw)) for s in starts], conflict_free)
    return total


def test_local_to_private_bank_traffic_matches_brute_force(xgemm) -> None:
    """The descriptor's smem_bytes and smem_conflict_free_bytes, less the tile stores, against each warp's
    LocalToPrivate loads enumerated lane by lane, over every vector width, access order and thread count of one
    operand staged in shared memory at 128x128 tiles (float8 vectors, two 128-bit loads each, were charged the
    wavefronts of one before)."""
    checked = set()
    for operand, vw, strided, dimc, dima, dimb in itertools.product("AB", (1, 2, 4, 8), (0, 1), (8, 16, 32),
                                                                   (8, 16, 32), (8, 16, 32)):
        cfg = {"MWG": 128, "NWG": 128, "KWG": 32, "MDIMC": 16, "NDIMC": 16, "MDIMA": dima, "NDIMB": dimb,
               "KWI": 2, "VWM": 1, "VWN": 1, "STRM": 0, "STRN": 0, "SA": int(operand == "A"),
               "SB": int(operand == "B"), "M": 1024, "N": 1024, "K": 1024}
        cfg |= ({"MDIMC": dimc, "VWM": vw, "STRM": strided} if operand == "A" else
                {"NDIMC": dimc, "VWN": vw, "STRN": strided})
        if not xgemm.constraint_mask(cfg)[0].all() or (operand, vw, strided, dimc) in checked:
            continue
        checked.add((operand, vw, strided, dimc))
        p = xgemm.profile(cfg)
        blocks, k = (1024 // 128) ** 2, 1024
        stores = blocks * k * 128 * 4  # the tile's GlobalToLocal stores: contiguous bytes
        warps = -(-cfg["MDIMC"] * cfg["NDIMC"] // 32) * blocks
        per_warp_k = (p.smem_bytes[0] - stores) / (warps * k * 128)
        assert per_warp_k == pytest.approx(_local_to_private_wavefronts(cfg, operand)), cfg
        free_per_warp_k = (p.smem_conflict_free_bytes[0] - stores) / (warps * k * 128)
        assert free_per_warp_k == pytest.approx(_local_to_private_wavefronts(cfg, operand, conflict_free=True)), cfg
    # every width of both operands, in both access orders (MWG = 128 rules out float8 with 32 threads only)
    assert len(checked) == 2 * (4 * 2 * 3 - 2)
