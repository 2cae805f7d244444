"""The thread-block tile of a cuBLAS / CUTLASS GEMM kernel, read from its name."""
from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["GemmTile", "gemm_tile"]


@dataclass(frozen=True, slots=True)
class GemmTile:
    """A kernel's block tile: ``m`` x ``n`` outputs (the first and second numbers of the name, cuBLAS's
    m and n), ``k`` per main-loop step where the name gives it, ``sliced`` (4 for ``sliced1x4``
    kernels), ``family`` (which naming scheme matched) and ``tensor_cores`` (the name says so)."""

    m: int
    n: int
    k: int | None
    sliced: int
    family: str
    tensor_cores: bool


# Name schemes, most specific first (examples from cuBLAS 10-12 and CUTLASS 2.x kernel names):
_SCHEMES = (
    # sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_...
    ("xmma", re.compile(r"xmma_gemm.*?tilesize(\d+)x(\d+)x(\d+)")),
    # cutlass_80_tensorop_s1688gemm_256x128_32x3_nn_align4, cutlass_80_simt_sgemm_128x128_8x5_nn_align1
    ("cutlass", re.compile(r"cutlass_\w*?gemm_(\d+)x(\d+)_(\d+)x\d+")),
    # ampere_sgemm_128x64_nn, volta_sgemm_32x32_sliced1x4_tn, maxwell_sgemm_128x64_nn
    ("cublas-arch",
     re.compile(r"(?:^|_)(?:maxwell|volta|turing|ampere|hopper)_sgemm_(\d+)x(\d+)(?:_sliced1x4)?_[nt]{2}")),
    # sgemm_128x128x8_NT_vec, sgemm_32x32x32_NN (the generic kernels of older cuBLAS)
    ("cublas-generic", re.compile(r"(?:^|_)sgemm_(\d+)x(\d+)x(\d+)_[NT]{2}(?:_vec)?(?:$|_)")),
)


def gemm_tile(name: str) -> GemmTile | None:
    """The block tile a GEMM kernel's name states, or None when no known scheme matches (the caller then
    leaves the tile to the descriptor's defaults and marks it so)."""
    text = str(name)
    for family, pattern in _SCHEMES:
        m = pattern.search(text)
        if m is None:
            continue
        k = int(m.group(3)) if m.lastindex and m.lastindex >= 3 else None
        tensor = "tensorop" in text or "hmma" in text or ("xmma" in text and "ffma" not in text)
        return GemmTile(m=int(m.group(1)), n=int(m.group(2)), k=k, sliced=4 if "sliced1x4" in text else 1,
                        family=family, tensor_cores=tensor)
    return None
