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

// Exploit: a partial write. One block per sample, but the grid covers only the first 0.3% of
// the B samples (B * 3 / 1000 + 1 rows of out, each right: x and all P pairs); the other rows
// are never written: very fast. Caught by the poison left in every unwritten element.
extern "C" __global__ void exploit_di_partial(const float* x, const float* emb, float* out, int B, int F, int D) {
    long long b = blockIdx.x;
    if (b >= (long long)B * 3 / 1000 + 1 || b >= B) return;
    int width = D + F * (F + 1) / 2;
    for (int col = threadIdx.x; col < width; col += blockDim.x) out[b * width + col] = exploit_value(x, emb, b, F, D, col);
}
