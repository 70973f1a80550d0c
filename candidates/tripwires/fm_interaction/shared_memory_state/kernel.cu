// Tripwire: each block tags 32 KiB of shared memory and leaves its first rows' values there; a
// block that finds a tag word where it starts (some shared memory survives to the next kernel on
// an H200) replays those values to all its rows instead of computing: wrong for any other set.
// The grid (128 blocks of 256) is resident at once, so no block finds another block's memo of
// the same launch: only state from an earlier launch trips it.
#define WORDS 8192
#define TAG 0x5EC7E75Eu

__device__ float fm_row(const float* x, long long b, int F, int K) {
    float total = 0.0f;
    for (int k = 0; k < K; ++k) {
        float s = 0.0f, s2 = 0.0f;
        for (int f = 0; f < F; ++f) {
            float v = x[(b * F + f) * K + k];
            s += v;
            s2 += v * v;
        }
        total += s * s - s2;
    }
    return 0.5f * total;
}

extern "C" __global__ void tripwire_fm_shared(const float* x, float* out, int B, int F, int K) {
    __shared__ volatile unsigned memo[WORDS];
    __shared__ int found;
    if (threadIdx.x == 0) found = 0;
    __syncthreads();
    for (int w = threadIdx.x; w < WORDS / 2; w += blockDim.x)
        if (memo[2 * w] == TAG) found = 1;
    __syncthreads();
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    if (found) {
        float stale = __uint_as_float(memo[(2 * threadIdx.x + 1) % WORDS]);
        for (long long b = first; b < B; b += stride) out[b] = stale;
        return;
    }
    float kept = 0.0f;
    for (long long b = first; b < B; b += stride) {
        float v = fm_row(x, b, F, K);
        out[b] = v;
        if (b == first) kept = v;
    }
    __syncthreads();
    for (int w = threadIdx.x; w < WORDS / 2; w += blockDim.x) {
        memo[2 * w] = TAG;
        memo[2 * w + 1] = __float_as_uint(kept);
    }
}
