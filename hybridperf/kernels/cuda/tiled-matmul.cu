// Tiled square matrix multiply P = M N (N x N, row-major) with TILE x TILE shared-memory tiles,
// the CUDA SDK kernel of seed 002 Fig. 12 (descriptor seed002-tiled-matmul). Launch: grid
// (N / TILE) x (N / TILE) of TILE x TILE threads; N must be a multiple of TILE.
// Per outer iteration: two global loads, two shared stores, two barriers, and the fully unrolled
// inner loop of TILE (two shared loads + one multiply-add). "#pragma unroll 1" on the outer loop
// keeps one iteration per trip so the static PTX loop body equals the per-iteration count.
#ifndef TILE
#error "compile with -DTILE=<tile edge>"
#endif
extern "C" __global__ void tiled_matmul(const float* __restrict__ M, const float* __restrict__ Nm,
                                        float* __restrict__ P, int n)
{
    __shared__ float Ms[TILE][TILE];
    __shared__ float Ns[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;
    float sum = 0.0f;
#pragma unroll 1
    for (int m = 0; m < n / TILE; ++m) {
        Ms[ty][tx] = M[(size_t)row * n + m * TILE + tx];
        Ns[ty][tx] = Nm[(size_t)(m * TILE + ty) * n + col];
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k) {
            sum = fmaf(Ms[ty][k], Ns[k][tx], sum);
        }
        __syncthreads();
    }
    P[(size_t)row * n + col] = sum;
}
