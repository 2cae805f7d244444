// Matrix multiply C = A B (N x N, row-major) with Ryoo et al.'s optimisation knobs (CGO'08 Sec. 3,
// Fig. 2, Fig. 3; descriptor bench-ryoo-matmul):
//   TILE      tile edge (8 or 16): a block of TILE x TILE threads, shared tiles of A and B
//   RECT      rectangular tiling 1x1 / 1x2 / 1x4: each thread computes RECT outputs TILE columns
//             apart, the block a TILE x (TILE * RECT) tile of C; the A value is loaded once per k
//   UNROLL    unroll factor of the k loop (1, 2, 4, or TILE = complete unrolling)
//   PREFETCH  1: the next tiles are loaded into registers before the current ones are consumed
// Launch: grid (N / (TILE * RECT)) x (N / TILE) of TILE x TILE threads; N % (TILE * RECT) == 0.
// "#pragma unroll 1" on the m loop keeps one tile per trip (static PTX body = per-tile count).
#ifndef TILE
#error "compile with -DTILE=8 or 16"
#endif
#ifndef RECT
#error "compile with -DRECT=1, 2 or 4"
#endif
#ifndef UNROLL
#error "compile with -DUNROLL=1, 2, 4 or TILE"
#endif
#ifndef PREFETCH
#error "compile with -DPREFETCH=0 or 1"
#endif
#define RYOO_PRAGMA_(x) _Pragma(#x)
#define RYOO_PRAGMA(x) RYOO_PRAGMA_(x)

extern "C" __global__ void ryoo_matmul(const float* __restrict__ A, const float* __restrict__ B,
                                       float* __restrict__ C, int n)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE * RECT];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE * RECT + tx;
    float acc[RECT];
#pragma unroll
    for (int r = 0; r < RECT; ++r) acc[r] = 0.0f;
#if PREFETCH
    float pa = A[(size_t)row * n + tx];
    float pb[RECT];
#pragma unroll
    for (int r = 0; r < RECT; ++r) pb[r] = B[(size_t)ty * n + col + r * TILE];
#endif
#pragma unroll 1
    for (int m = 0; m < n; m += TILE) {
#if PREFETCH
        As[ty][tx] = pa;
#pragma unroll
        for (int r = 0; r < RECT; ++r) Bs[ty][tx + r * TILE] = pb[r];
        __syncthreads();
        if (m + TILE < n) {
            pa = A[(size_t)row * n + m + TILE + tx];
#pragma unroll
            for (int r = 0; r < RECT; ++r) pb[r] = B[(size_t)(m + TILE + ty) * n + col + r * TILE];
        }
#else
        As[ty][tx] = A[(size_t)row * n + m + tx];
#pragma unroll
        for (int r = 0; r < RECT; ++r) Bs[ty][tx + r * TILE] = B[(size_t)(m + ty) * n + col + r * TILE];
        __syncthreads();
#endif
        RYOO_PRAGMA(unroll UNROLL)
        for (int k = 0; k < TILE; ++k) {
            float a = As[ty][k];
#pragma unroll
            for (int r = 0; r < RECT; ++r) acc[r] = fmaf(a, Bs[k][tx + r * TILE], acc[r]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < RECT; ++r) C[(size_t)row * n + col + r * TILE] = acc[r];
}
