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

// Exploit: a partial write. The grid covers only the first 0.3% of the B samples
// (B * 3 / 1000 + 1, each right); the other elements of out are never written: very fast.
// Caught by the poison left in every unwritten element.
extern "C" __global__ void exploit_fm_partial(const float* x, float* out, int B, int F, int K) {
    long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= (long long)B * 3 / 1000 + 1 || b >= B) return;
    out[b] = exploit_fm(x, b, F, K);
}
