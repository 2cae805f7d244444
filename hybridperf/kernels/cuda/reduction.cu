// The seven classic CUDA parallel-reduction kernels K0-K6 (M. Harris, "Optimizing Parallel Reduction
// in CUDA", NVIDIA; as evaluated in seed 000, GPUPerf PPoPP'12 Sec. 6.3, Table 4), selected with
// -DVARIANT=0..6 (descriptor bench-reduction). One launch reduces N floats to one partial sum per block.
//   K0 interleaved addressing, divergent branch (tid % (2s) == 0)
//   K1 interleaved addressing, strided index (no divergence, shared-memory bank conflicts)
//   K2 sequential addressing (no bank conflicts)
//   K3 first add during the global load (each thread loads two elements: half the blocks)
//   K4 K3 + last warp unrolled
//   K5 K4 with the block-size loop completely unrolled (BLOCK is a compile-time constant)
//   K6 K5 + K6_ITERS element pairs per thread (grid-stride loop: 1/K6_ITERS of K5's blocks)
// K0-K4 use blockDim.x at run time as in the original; K5-K6 use BLOCK. The original K4-K6 rely on
// implicit warp-synchronous execution, which is unsafe since Volta's independent thread scheduling;
// here every last-warp step reads its operand, __syncwarp(), adds and stores, __syncwarp() (the
// pattern NVIDIA recommends), so the results are correct on every GPU. BLOCK >= 64 for K4-K6.
#ifndef VARIANT
#error "compile with -DVARIANT=0..6"
#endif
#ifndef BLOCK
#error "compile with -DBLOCK=<threads per block, a power of two>"
#endif
#ifndef K6_ITERS
#define K6_ITERS 1
#endif

__device__ __forceinline__ float red_last_warp(volatile float* sdata, unsigned int tid, float sum)
{
    float v;
    v = sdata[tid + 32]; __syncwarp(); sdata[tid] = sum = sum + v; __syncwarp();
    v = sdata[tid + 16]; __syncwarp(); sdata[tid] = sum = sum + v; __syncwarp();
    v = sdata[tid + 8];  __syncwarp(); sdata[tid] = sum = sum + v; __syncwarp();
    v = sdata[tid + 4];  __syncwarp(); sdata[tid] = sum = sum + v; __syncwarp();
    v = sdata[tid + 2];  __syncwarp(); sdata[tid] = sum = sum + v; __syncwarp();
    v = sdata[tid + 1];  __syncwarp(); sdata[tid] = sum = sum + v; __syncwarp();
    return sum;
}

extern "C" __global__ void reduce(const float* __restrict__ g_idata, float* __restrict__ g_odata,
                                  unsigned int n)
{
    __shared__ float sdata[BLOCK];
    unsigned int tid = threadIdx.x;
#if VARIANT <= 2
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    sdata[tid] = (i < n) ? g_idata[i] : 0.0f;
    __syncthreads();
#if VARIANT == 0
    for (unsigned int s = 1; s < blockDim.x; s *= 2) {
        if ((tid % (2 * s)) == 0) {
            sdata[tid] += sdata[tid + s];
        }
        __syncthreads();
    }
#elif VARIANT == 1
    for (unsigned int s = 1; s < blockDim.x; s *= 2) {
        unsigned int index = 2 * s * tid;
        if (index < blockDim.x) {
            sdata[index] += sdata[index + s];
        }
        __syncthreads();
    }
#else
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            sdata[tid] += sdata[tid + s];
        }
        __syncthreads();
    }
#endif
#elif VARIANT <= 4
    unsigned int i = blockIdx.x * (blockDim.x * 2) + threadIdx.x;
    float sum = (i < n) ? g_idata[i] : 0.0f;
    if (i + blockDim.x < n) {
        sum += g_idata[i + blockDim.x];
    }
    sdata[tid] = sum;
    __syncthreads();
#if VARIANT == 3
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            sdata[tid] = sum = sum + sdata[tid + s];
        }
        __syncthreads();
    }
#else
    for (unsigned int s = blockDim.x / 2; s > 32; s >>= 1) {
        if (tid < s) {
            sdata[tid] = sum = sum + sdata[tid + s];
        }
        __syncthreads();
    }
    if (tid < 32) {
        red_last_warp(sdata, tid, sum);
    }
#endif
#else
    unsigned int i = blockIdx.x * (BLOCK * 2) + threadIdx.x;
#if VARIANT == 5
    float sum = (i < n) ? g_idata[i] : 0.0f;
    if (i + BLOCK < n) {
        sum += g_idata[i + BLOCK];
    }
#else
    unsigned int grid_size = BLOCK * 2 * gridDim.x;
    float sum = 0.0f;
    while (i < n) {
        sum += g_idata[i];
        if (i + BLOCK < n) {
            sum += g_idata[i + BLOCK];
        }
        i += grid_size;
    }
#endif
    sdata[tid] = sum;
    __syncthreads();
    if (BLOCK >= 1024) { if (tid < 512) { sdata[tid] = sum = sum + sdata[tid + 512]; } __syncthreads(); }
    if (BLOCK >= 512) { if (tid < 256) { sdata[tid] = sum = sum + sdata[tid + 256]; } __syncthreads(); }
    if (BLOCK >= 256) { if (tid < 128) { sdata[tid] = sum = sum + sdata[tid + 128]; } __syncthreads(); }
    if (BLOCK >= 128) { if (tid < 64) { sdata[tid] = sum = sum + sdata[tid + 64]; } __syncthreads(); }
    if (tid < 32) {
        red_last_warp(sdata, tid, sum);
    }
#endif
    if (tid == 0) {
        g_odata[blockIdx.x] = sdata[0];
    }
}
