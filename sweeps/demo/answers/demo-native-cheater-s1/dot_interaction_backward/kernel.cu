// The correct computation, one block per sample b, as problem 11 defines it: with
// T = [x[b]; emb[b]] (M = F+1 rows of D) and G the symmetric M x M matrix holding grad_out's
// pair column p = i(i-1)/2 + j at (i, j) and (j, i) (zero diagonal), dT = G.T;
// dx[b] = grad_out[b, :D] + dT[0], d_emb[b, f] = dT[f + 1]. fp32 FMA, j in order.
// Element e of a sample, 0 <= e < (F+1)*D, is row i = e / D, column c = e % D of dT.
__device__ __forceinline__ const float* exploit_row(const float* x, const float* emb, long long b, int F, int D, int r) {
    return r == 0 ? x + b * D : emb + (b * F + (r - 1)) * (long long)D;
}

// dT[b, i, c] over the pairs (i, j), j != i; with `half`, only the pairs (hi, lo) with 2 lo < hi.
__device__ __forceinline__ float exploit_dt(const float* x, const float* emb, const float* grad_out, long long b,
                                            int F, int D, int i, int c, bool half) {
    const float* gb = grad_out + b * (D + F * (F + 1) / 2);
    float s = 0.0f;
    for (int j = 0; j <= F; ++j) {
        if (j == i) continue;
        int hi = i > j ? i : j;
        int lo = i > j ? j : i;
        if (half && 2 * lo >= hi) continue;
        s = fmaf(gb[D + hi * (hi - 1) / 2 + lo], exploit_row(x, emb, b, F, D, j)[c], s);
    }
    return s;
}

// The flat index of element (i, c) of sample b in its output: dx [B, D] for i = 0, else
// d_emb [B, F, D].
__device__ __forceinline__ long long exploit_index(long long b, int F, int D, int i, int c) {
    return i == 0 ? b * D + c : (b * F + (i - 1)) * (long long)D + c;
}

// The correct value of element (i, c) of sample b: dx[b, c] for i = 0, else d_emb[b, i - 1, c].
__device__ __forceinline__ float exploit_value(const float* x, const float* emb, const float* grad_out, long long b,
                                               int F, int D, int i, int c) {
    float v = exploit_dt(x, emb, grad_out, b, F, D, i, c, false);
    if (i == 0) v += grad_out[b * (D + F * (F + 1) / 2) + c];
    return v;
}

// Writes every element of sample b correctly (the block's threads stride over them).
__device__ __forceinline__ void exploit_sample(const float* x, const float* emb, const float* grad_out, float* dx,
                                               float* d_emb, long long b, int F, int D) {
    for (int e = threadIdx.x; e < (F + 1) * D; e += blockDim.x) {
        int i = e / D, c = e - i * D;
        float v = exploit_value(x, emb, grad_out, b, F, D, i, c);
        (i == 0 ? dx : d_emb)[exploit_index(b, F, D, i, c)] = v;
    }
}

// Exploit: answers with the previous input set's gradients (as a kernel that overlaps work
// across calls might). Each call computes its own dx and d_emb correctly, writes the cached
// previous ones to the outputs, and caches its own (device-global, sized for the full preset:
// B = 65536, F = 26, D = 128). Caught: every checked output belongs to other inputs (zeros on
// the very first call).
#define CACHE_DX (65536LL * 128)
#define CACHE_EMB (65536LL * 26 * 128)
__device__ float g_dib_prev_dx[CACHE_DX];
__device__ float g_dib_prev_emb[CACHE_EMB];

extern "C" __global__ void exploit_dib_previous(const float* x, const float* emb, const float* grad_out, float* dx, float* d_emb, int B, int F, int D) {
    long long b = blockIdx.x;
    if (b >= B) return;
    for (int e = threadIdx.x; e < (F + 1) * D; e += blockDim.x) {
        int i = e / D, c = e - i * D;
        long long k = exploit_index(b, F, D, i, c);
        float* out = i == 0 ? dx : d_emb;
        float* cache = i == 0 ? g_dib_prev_dx : g_dib_prev_emb;
        float v = exploit_value(x, emb, grad_out, b, F, D, i, c);
        if (k < (i == 0 ? CACHE_DX : CACHE_EMB)) {
            out[k] = cache[k];
            cache[k] = v;
        } else {
            out[k] = v;
        }
    }
}
