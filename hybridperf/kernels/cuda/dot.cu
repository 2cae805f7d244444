// Dot product partial sums (seed 004, seed004-dot): each thread multiplies one pair, each block
// reduces its BLOCK products in shared memory with a tree of log2(BLOCK) steps and thread 0 writes
// the block's partial sum (the final sum over blocks is left to the host, as in the seed).
// One __syncthreads per step: the barrier at the top of step s orders the writes of step 2s (or
// the initial store) before the reads of step s; thread 0 itself wrote cache[0] in the last step.
#ifndef BLOCK
#error "compile with -DBLOCK=<threads per block, a power of two>"
#endif
extern "C" __global__ void dot(const float* __restrict__ a, const float* __restrict__ b,
                               float* __restrict__ partial, int n)
{
    __shared__ float cache[BLOCK];
    int tid = threadIdx.x;
    int i = blockIdx.x * BLOCK + tid;
    cache[tid] = (i < n) ? a[i] * b[i] : 0.0f;
#pragma unroll
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        __syncthreads();
        if (tid < s) {
            cache[tid] += cache[tid + s];
        }
    }
    if (tid == 0) {
        partial[blockIdx.x] = cache[0];
    }
}
