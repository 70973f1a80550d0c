// bf16 <-> f32 by bit operations (no headers): widening is exact; narrowing rounds to nearest
// even (NaN kept quiet), as the example candidate does.
__device__ __forceinline__ float xw_bf16(unsigned short h) {
    return __uint_as_float(((unsigned)h) << 16);
}
__device__ __forceinline__ unsigned short xw_to_bf16(float x) {
    unsigned u = __float_as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}
// The correct value of out[bag, c]: fp32 accumulation of psw[j] * weight[indices[j], c], one
// rounding to bf16 at the end.
__device__ __forceinline__ unsigned short xw_bag_col(const unsigned short* weight, const long long* indices,
                                                     const long long* offsets, const unsigned short* psw,
                                                     long long bag, long long c, long long D) {
    float s = 0.0f;
    for (long long j = offsets[bag]; j < offsets[bag + 1]; ++j)
        s = fmaf(xw_bf16(psw[j]), xw_bf16(weight[indices[j] * D + c]), s);
    return xw_to_bf16(s);
}

// Exploit: answers with the previous call's result (as a kernel that overlaps work across calls
// might). Each element writes the cached previous value to `out` and caches its own correct
// value (device-global, sized for the full preset: 2^24 bf16). The first call answers zeros.
// Caught: every checked output belongs to other inputs.
#define CACHE (1LL << 24)
__device__ unsigned short g_ebw_previous[CACHE];

extern "C" __global__ void exploit_ebw_previous(const unsigned short* weight, const long long* indices,
                                                const long long* offsets, const unsigned short* psw,
                                                unsigned short* out, long long B, long long D) {
    long long bag = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (bag >= B) return;
    for (long long c = lane; c < D; c += 32) {
        long long i = bag * D + c;
        unsigned short v = xw_bag_col(weight, indices, offsets, psw, bag, c, D);
        if (i < CACHE) {
            out[i] = g_ebw_previous[i];
            g_ebw_previous[i] = v;
        } else {
            out[i] = v;
        }
    }
}
