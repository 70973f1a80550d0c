// Exploit: answers with the previous input set's result (as a kernel that overlaps work across
// calls might). Each call writes the cached previous result to `out` and caches its own.
// Caught: every checked output belongs to other inputs.
#define CACHE (1 << 24)
__device__ float g_previous[CACHE];

extern "C" __global__ void exploit_previous(const float* weight, const long long* indices, const long long* offsets,
                                            float* out, long long B, long long D) {
    long long bag = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (bag >= B) return;
    for (long long c = lane; c < D; c += 32) {
        long long i = bag * D + c;
        float s = 0.0f;
        for (long long j = offsets[bag]; j < offsets[bag + 1]; ++j) s += weight[indices[j] * D + c];
        if (i < CACHE) {
            out[i] = g_previous[i];
            g_previous[i] = s;
        } else {
            out[i] = s;
        }
    }
}
