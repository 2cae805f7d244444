// Seed 002 micro-benchmarks (Hong & Kim ISCA'09 Sec. 4.2, Table 4; descriptor bench-mb): every thread
// runs a loop of ITERS iterations (1000 in the paper); each iteration issues LOADS global loads and
// FMAS dependent single-precision multiply-adds. COALESCED=1: the 32 lanes of a warp read 32
// consecutive floats (one 128-byte request); COALESCED=0: lanes read floats 128 bytes apart, so a
// warp load touches 32 different 32-byte sectors. Addresses advance by one grid-sized slice per load
// and wrap inside the input buffer (mask = elements - 1, a power of two) so no load is loop-invariant
// and the working set (256 MiB by default) exceeds the L2 cache.
// "#pragma unroll 1" keeps one iteration per trip: the static PTX loop body is the per-iteration count.
#ifndef LOADS
#error "compile with -DLOADS=<global loads per iteration>"
#endif
#ifndef FMAS
#error "compile with -DFMAS=<multiply-adds per iteration>"
#endif
#ifndef COALESCED
#error "compile with -DCOALESCED=0 or 1"
#endif
#if COALESCED
#define MB_LANE_STRIDE 1u
#else
#define MB_LANE_STRIDE 32u
#endif

extern "C" __global__ void mb(const float* __restrict__ in, float* __restrict__ out, int iters,
                              unsigned int mask, float b, float c)
{
    unsigned int tid = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int step = gridDim.x * blockDim.x * MB_LANE_STRIDE;
    unsigned int idx = tid * MB_LANE_STRIDE;
    float a = (float)threadIdx.x;
    float acc = 0.0f;
#pragma unroll 1
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int l = 0; l < LOADS; ++l) {
            acc += in[idx & mask];
            idx += step;
        }
#pragma unroll
        for (int f = 0; f < FMAS; ++f) {
            a = fmaf(a, b, c);
        }
    }
    out[tid] = a + acc;
}
