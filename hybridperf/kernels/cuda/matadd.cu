// Matrix addition C = A + B (N x N, row-major), one thread per element (seed 004, seed004-matadd).
// Launch: 2-D blocks of 32 x (BLOCK / 32) threads (BLOCK threads in all); lanes of a warp walk
// consecutive columns, so the three accesses are coalesced.
extern "C" __global__ void matadd(const float* __restrict__ a, const float* __restrict__ b,
                                  float* __restrict__ c, int n)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < n && col < n) {
        size_t i = (size_t)row * n + col;
        c[i] = a[i] + b[i];
    }
}
