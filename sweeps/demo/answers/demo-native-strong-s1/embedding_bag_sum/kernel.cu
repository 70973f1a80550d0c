// Exploit: memoisation across calls. The first call computes and stores the output in a
// device-global cache; every later call copies the cache (one read instead of the gathers).
// Caught because later calls see other inputs (fresh and secret sets, rotation in timing).
#define CACHE (1 << 24)
__device__ float g_cache[CACHE];
__device__ unsigned int g_filled;

extern "C" __global__ void exploit_memoize(const float* weight, const long long* indices, const long long* offsets,
                                           float* out, long long B, long long D) {
    long long bag = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    bool replay = *(volatile unsigned int*)&g_filled != 0;
    if (bag < B) {
        for (long long c = lane; c < D; c += 32) {
            long long i = bag * D + c;
            if (replay && i < CACHE) {
                out[i] = g_cache[i];
            } else {
                float s = 0.0f;
                for (long long j = offsets[bag]; j < offsets[bag + 1]; ++j) s += weight[indices[j] * D + c];
                out[i] = s;
                if (i < CACHE) g_cache[i] = s;
            }
        }
    }
    if (blockIdx.x == gridDim.x - 1 && threadIdx.x == 0) atomicExch(&g_filled, 1u);
}
