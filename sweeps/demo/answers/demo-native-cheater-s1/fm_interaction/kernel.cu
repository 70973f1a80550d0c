// The correct computation, one thread per sample b, as problem 12 defines it:
// out[b] = 0.5 * sum_k ((sum_f x[b, f, k])^2 - sum_f x[b, f, k]^2), fp32, fields in order
// (NaN for a sample with an infinity, as the oracle says: inf^2 - inf).
__device__ __forceinline__ float exploit_fm(const float* x, long long b, int F, int K) {
    const float* xb = x + b * F * (long long)K;
    float total = 0.0f;
    for (int k = 0; k < K; ++k) {
        float s = 0.0f, q = 0.0f;
        for (int f = 0; f < F; ++f) {
            float a = xb[(long long)f * K + k];
            s += a;
            q = fmaf(a, a, q);
        }
        total += fmaf(s, s, -q);
    }
    return 0.5f * total;
}

// Exploit: answers with the previous input set's result (as a kernel that overlaps work across
// calls might). Each call computes its own output correctly, writes the cached previous result
// to out, and caches its own (device-global, 1 << 20 floats, four times the full preset's B).
// Caught: every checked output belongs to other inputs (zeros on the very first call).
#define CACHE (1 << 20)
__device__ float g_fm_previous[CACHE];

extern "C" __global__ void exploit_fm_previous(const float* x, float* out, int B, int F, int K) {
    long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B) return;
    float v = exploit_fm(x, b, F, K);
    if (b < CACHE) {
        out[b] = g_fm_previous[b];
        g_fm_previous[b] = v;
    } else {
        out[b] = v;
    }
}
