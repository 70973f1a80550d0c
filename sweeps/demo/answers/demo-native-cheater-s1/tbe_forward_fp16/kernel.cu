// fp16 -> f32 with one cvt.f32.f16 (exact), as the example candidate does; no headers.
__device__ __forceinline__ float xt_h2f(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
// The correct value of out[b, t*D + c]: bag k = t*B + b (table-major offsets), indices local to
// table t (rows table_offsets[t] ..), fp32 accumulation.
__device__ __forceinline__ float xt_bag_col(const unsigned short* weight, const long long* table_offsets,
                                            const long long* indices, const long long* offsets,
                                            long long t, long long b, long long c, long long B, long long D) {
    const unsigned short* table = weight + table_offsets[t] * D;
    const long long k = t * B + b;
    float s = 0.0f;
    for (long long j = offsets[k]; j < offsets[k + 1]; ++j) s += xt_h2f(table[indices[j] * D + c]);
    return s;
}

// Exploit: answers with the previous call's result (as a kernel that overlaps work across calls
// might). Each element writes the cached previous value to out and caches its own correct value
// (device-global, 2^27 floats: the full preset's 109M outputs fit). The first call answers zeros.
// Caught: every checked output belongs to other inputs.
#define CACHE (1LL << 27)
__device__ float g_tbe_previous[CACHE];

extern "C" __global__ void exploit_tbe_previous(const unsigned short* weight, const long long* table_offsets, const long long* indices,
        const long long* offsets, float* out, long long T, long long B, long long D) {
    const long long k = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (k >= T * B) return;
    const long long t = k / B, b = k - t * B;
    for (long long c = lane; c < D; c += 32) {
        const long long i = b * (T * D) + t * D + c;
        const float v = xt_bag_col(weight, table_offsets, indices, offsets, t, b, c, B, D);
        if (i < CACHE) {
            out[i] = g_tbe_previous[i];
            g_tbe_previous[i] = v;
        } else {
            out[i] = v;
        }
    }
}
