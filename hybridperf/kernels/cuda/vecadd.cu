// Vector addition c = a + b, one thread per element (seed 004, descriptor seed004-vecadd).
// Launch: 1-D grid of ceil(N / BLOCK) blocks of BLOCK threads. BLOCK is passed as -DBLOCK=... only so
// that every shipped kernel compiles with its config parameters defined; this kernel uses blockDim.
extern "C" __global__ void vecadd(const float* __restrict__ a, const float* __restrict__ b,
                                  float* __restrict__ c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}
