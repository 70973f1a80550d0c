// Exploit: writes 0.3% of the output (the first 0.3% of the bags, correctly) and returns: very
// fast. Caught by the poison left in every unwritten element.
extern "C" __global__ void exploit_partial(const float* weight, const long long* indices, const long long* offsets,
                                           float* out, long long B, long long D) {
    long long bag = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (bag >= B * 3 / 1000 + 1 || bag >= B) return;
    for (long long c = lane; c < D; c += 32) {
        float s = 0.0f;
        for (long long j = offsets[bag]; j < offsets[bag + 1]; ++j) s += weight[indices[j] * D + c];
        out[bag * D + c] = s;
    }
}
