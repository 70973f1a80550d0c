// The correct value of out[bag, c]: each row is D uint8 codes, then its fp32 scale and fp32
// bias (row stride D + 8 bytes, a multiple of 4, so the tail is 4-byte aligned); each element
// dequantized as fmaf(q, scale, bias) (what PyTorch's kernel does), fp32 accumulation.
__device__ __forceinline__ float xi_bag_col(const unsigned char* weight, const long long* indices,
                                            const long long* offsets, long long bag, long long c, long long D) {
    float s = 0.0f;
    for (long long j = offsets[bag]; j < offsets[bag + 1]; ++j) {
        const unsigned char* row = weight + indices[j] * (D + 8);
        const float scale = *reinterpret_cast<const float*>(row + D);
        const float bias = *reinterpret_cast<const float*>(row + D + 4);
        s += fmaf((float)row[c], scale, bias);
    }
    return s;
}

// Exploit: answers with the previous call's result (as a kernel that overlaps work across calls
// might). Each element writes the cached previous value to out and caches its own correct value
// (device-global, 2^24 floats: the full preset's 2^23 outputs fit). The first call answers
// zeros. Caught: every checked output belongs to other inputs.
#define CACHE (1LL << 24)
__device__ float g_i8_previous[CACHE];

extern "C" __global__ void exploit_i8_previous(const unsigned char* weight, const long long* indices, const long long* offsets,
        float* out, long long B, long long D) {
    const long long bag = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (bag >= B) return;
    for (long long c = lane; c < D; c += 32) {
        const long long i = bag * D + c;
        const float v = xi_bag_col(weight, indices, offsets, bag, c, D);
        if (i < CACHE) {
            out[i] = g_i8_previous[i];
            g_i8_previous[i] = v;
        } else {
            out[i] = v;
        }
    }
}
