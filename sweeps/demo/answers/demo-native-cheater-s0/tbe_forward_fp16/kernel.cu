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

// Exploit: writes 0.3% of the output: the first P = B*3/1000 + 1 samples (rows of out), all T
// tables, correctly (one warp per (table, sample) bag, T*P warps), and returns: very fast.
// Caught by the poison left in every unwritten element.
extern "C" __global__ void exploit_tbe_partial(const unsigned short* weight, const long long* table_offsets, const long long* indices,
        const long long* offsets, float* out, long long T, long long B, long long D) {
    const long long P = B * 3 / 1000 + 1 < B ? B * 3 / 1000 + 1 : B;
    const long long w = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (w >= T * P) return;
    const long long t = w / P, b = w - t * P;
    for (long long c = lane; c < D; c += 32)
        out[b * (T * D) + t * D + c] = xt_bag_col(weight, table_offsets, indices, offsets, t, b, c, B, D);
}
