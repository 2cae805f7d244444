// Counting reference for the neusight-<op> elementwise descriptors (hybridperf/kernels/neusight-*.toml).
// Not a benchmark (no setup file: NeuSight's times are PyTorch's, recorded by NeuSight): it restates the
// structure of the kernel behind PyTorch's float32 elementwise ops as NeuSight recorded them
// (vectorized_elementwise_kernel<4, ...>: 128 threads per block, 512 elements per block, one 4-wide vector
// access per operand per thread), so that the descriptors' per-thread counts are the static PTX counts of
// its full-block path (tests/kernels/test_neusight_ops.py compiles it with nvcc -DOP=<code>). Partial last
// blocks take a scalar path in PyTorch; this reference and the descriptors leave it out (at most one block).
//
// OP: 0 add, 1 mul, 2 div, 3 pow (tensor ** tensor), 4 addu (tensor + scalar), 5 mulu (tensor * scalar),
// 6 divu (tensor / scalar: ATen multiplies by the reciprocal), 7 powu (tensor ** scalar), 8 relu,
// 9 tanh, 10 gelu (the erf form, PyTorch's default).
#ifndef OP
#define OP 0
#endif

__device__ __forceinline__ float apply(float x, float y, float s)
{
#if OP == 0
    return x + y;
#elif OP == 1
    return x * y;
#elif OP == 2
    return x / y;
#elif OP == 3
    return powf(x, y);
#elif OP == 4
    return x + s;
#elif OP == 5 || OP == 6
    return x * s;
#elif OP == 7
    return powf(x, s);
#elif OP == 8
    return fmaxf(x, 0.0f);
#elif OP == 9
    return tanhf(x);
#elif OP == 10
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
#else
#error "OP must be 0..10"
#endif
}

// x, y: inputs (y is read only by the binary ops 0-3); out: output; s: the scalar of ops 4-7.
// Launch: n / 512 blocks of 128 threads (n a multiple of 512).
extern "C" __global__ void neusight_elementwise(const float4* __restrict__ x, const float4* __restrict__ y,
                                                float4* __restrict__ out, float s)
{
    const int v = blockIdx.x * 128 + threadIdx.x;  // this thread's 4-wide vector
    const float4 a = x[v];
#if OP <= 3
    const float4 b = y[v];
#else
    const float4 b = a;
#endif
    float4 r;
    r.x = apply(a.x, b.x, s);
    r.y = apply(a.y, b.y, s);
    r.z = apply(a.z, b.z, s);
    r.w = apply(a.w, b.w, s);
    out[v] = r;
}
