// Matrix-vector product y = A x (A is N x N, row-major), one thread per output row (seed 004,
// seed004-matvec). A thread walks its own row, so lanes of a warp read A at addresses N * 4 bytes
// apart (uncoalesced) while they read the same x[j] (one transaction per warp).
// "#pragma unroll 1" keeps one loop iteration per trip, as the seed's -O0 build did, so the static
// PTX loop body is the per-iteration count of the descriptor (2 loads, 1 FMA per j).
extern "C" __global__ void matvec(const float* __restrict__ A, const float* __restrict__ x,
                                  float* __restrict__ y, int n)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < n) {
        const float* a = A + (size_t)row * n;
        float sum = 0.0f;
#pragma unroll 1
        for (int j = 0; j < n; ++j) {
            sum = fmaf(a[j], x[j], sum);
        }
        y[row] = sum;
    }
}
