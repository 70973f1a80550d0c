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

// Exploit: writes 0.3% of the output (the first B*3/1000 + 1 bags, correctly: one warp per bag)
// and returns: very fast. Caught by the poison left in every unwritten element.
extern "C" __global__ void exploit_i8_partial(const unsigned char* weight, const long long* indices, const long long* offsets,
        float* out, long long B, long long D) {
    const long long bag = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (bag >= B) return;
    if (bag >= B * 3 / 1000 + 1) return;
    for (long long c = lane; c < D; c += 32) out[bag * D + c] = xi_bag_col(weight, indices, offsets, bag, c, D);
}
