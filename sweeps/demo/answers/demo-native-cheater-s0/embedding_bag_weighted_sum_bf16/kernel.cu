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

// Exploit: writes 0.3% of the output (the first B*3/1000 + 1 bags, correctly: one warp per bag)
// and returns: very fast. Caught by the poison left in every unwritten element.
extern "C" __global__ void exploit_ebw_partial(const unsigned short* weight, const long long* indices,
                                               const long long* offsets, const unsigned short* psw,
                                               unsigned short* out, long long B, long long D) {
    long long bag = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (bag >= B * 3 / 1000 + 1 || bag >= B) return;
    for (long long c = lane; c < D; c += 32) out[bag * D + c] = xw_bag_col(weight, indices, offsets, psw, bag, c, D);
}
