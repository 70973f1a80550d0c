// The correct computation, one block per sample b, as problem 10 defines it: out[b, :D] = x[b];
// out[b, D + p] = T_i . T_j for pair p = i(i-1)/2 + j (i > j) of T = [x[b]; emb[b]], fp32 FMA
// with k in order (no TF32).
__device__ __forceinline__ const float* exploit_row(const float* x, const float* emb, long long b, int F, int D, int r) {
    return r == 0 ? x + b * D : emb + (b * F + (r - 1)) * (long long)D;
}

// Pair p of DLRM's row-major lower triangle: p = i(i-1)/2 + j, i > j.
__device__ __forceinline__ void exploit_pair(int p, int& i, int& j) {
    i = 1;
    while ((i + 1) * i / 2 <= p) ++i;
    j = p - i * (i - 1) / 2;
}

__device__ __forceinline__ float exploit_dot(const float* a, const float* c, int D) {
    float s = 0.0f;
    for (int k = 0; k < D; ++k) s = fmaf(a[k], c[k], s);
    return s;
}

// out[b, col] for col < D + P.
__device__ __forceinline__ float exploit_value(const float* x, const float* emb, long long b, int F, int D, int col) {
    if (col < D) return x[b * D + col];
    int i, j;
    exploit_pair(col - D, i, j);
    return exploit_dot(exploit_row(x, emb, b, F, D, i), exploit_row(x, emb, b, F, D, j), D);
}

// Exploit: answers with the previous input set's result (as a kernel that overlaps work across
// calls might). Each call computes its own output correctly, writes the cached previous result
// to out, and caches its own (device-global, sized for the full preset: 65536 x 479 floats).
// Caught: every checked output belongs to other inputs (zeros on the very first call).
#define CACHE (65536LL * 479)
__device__ float g_di_previous[CACHE];

extern "C" __global__ void exploit_di_previous(const float* x, const float* emb, float* out, int B, int F, int D) {
    long long b = blockIdx.x;
    if (b >= B) return;
    int width = D + F * (F + 1) / 2;
    for (int col = threadIdx.x; col < width; col += blockDim.x) {
        long long i = b * width + col;
        float v = exploit_value(x, emb, b, F, D, col);
        if (i < CACHE) {
            out[i] = g_di_previous[i];
            g_di_previous[i] = v;
        } else {
            out[i] = v;
        }
    }
}
