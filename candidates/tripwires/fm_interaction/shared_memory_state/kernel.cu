// Tripwire: each block leaves a tag all over 32 KiB of shared memory and its rows' values after
// it; a block that finds any tag word where it starts (some shared memory survives to the next
// kernel on an H200) replays values from there instead of computing: wrong for any other set.
#define WORDS 8192
#define TAG 0x5EC7E75Eu

extern "C" __global__ void tripwire_fm_shared(const float* x, float* out, int B, int F, int K) {
    __shared__ volatile unsigned memo[WORDS];
    __shared__ int found;
    if (threadIdx.x == 0) found = 0;
    __syncthreads();
    for (int w = threadIdx.x; w < WORDS / 2; w += blockDim.x)
        if (memo[2 * w] == TAG) found = 1;
    __syncthreads();
    long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    bool mine = b < B;
    if (found) {
        if (mine) out[b] = __uint_as_float(memo[(2 * threadIdx.x + 1) % WORDS]);
        return;
    }
    float total = 0.0f;
    for (int k = 0; mine && k < K; ++k) {
        float s = 0.0f, s2 = 0.0f;
        for (int f = 0; f < F; ++f) {
            float v = x[(b * F + f) * K + k];
            s += v;
            s2 += v * v;
        }
        total += s * s - s2;
    }
    if (mine) out[b] = 0.5f * total;
    for (int w = threadIdx.x; w < WORDS / 2; w += blockDim.x) {
        memo[2 * w] = TAG;
        memo[2 * w + 1] = __float_as_uint(0.5f * total);
    }
}
