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

// Exploit: memoisation across calls. One block per sample; each block's first call computes
// its dx and d_emb rows and stores them in device-global caches (sized for the full preset:
// B = 65536, F = 26, D = 128), and sets the block's flag; every later call copies the caches
// instead of computing. The first call is right; caught because later calls see other inputs
// (fresh and secret sets, rotation in timing, the recheck of timed outputs).
#define CACHE_DX (65536LL * 128)
#define CACHE_EMB (65536LL * 26 * 128)
#define FLAGS (1 << 20)
__device__ float g_dib_dx[CACHE_DX];
__device__ float g_dib_emb[CACHE_EMB];
__device__ unsigned int g_dib_filled[FLAGS];

extern "C" __global__ void exploit_dib_memoize(const float* x, const float* emb, const float* grad_out, float* dx, float* d_emb, int B, int F, int D) {
    __shared__ unsigned int replay;
    long long b = blockIdx.x;
    if (b >= B) return;
    if (threadIdx.x == 0) replay = b < FLAGS ? g_dib_filled[b] : 0u;
    __syncthreads();
    for (int e = threadIdx.x; e < (F + 1) * D; e += blockDim.x) {
        int i = e / D, c = e - i * D;
        long long k = exploit_index(b, F, D, i, c);
        float* out = i == 0 ? dx : d_emb;
        float* cache = i == 0 ? g_dib_dx : g_dib_emb;
        bool cached = k < (i == 0 ? CACHE_DX : CACHE_EMB);
        if (replay && cached) {
            out[k] = cache[k];
        } else {
            float v = exploit_value(x, emb, grad_out, b, F, D, i, c);
            out[k] = v;
            if (cached) cache[k] = v;
        }
    }
    __syncthreads();
    if (threadIdx.x == 0 && b < FLAGS) g_dib_filled[b] = 1u;
}
