// embedding_bag_sum with dynamic tile scheduling: each block of 8 warps takes the next tile of 8
// bags from g_next_tile (one warp a bag) until none is left. A block counts itself out in
// g_blocks_done after its last (failed) take, so the block that brings the count to gridDim.x
// knows every take is over and resets both counters for the next launch.
__device__ unsigned int g_next_tile;
__device__ unsigned int g_blocks_done;

extern "C" __global__ void ebs_dynamic_tiles(const float* weight, const long long* indices,
                                             const long long* offsets, float* out, long long B,
                                             long long D) {
    __shared__ unsigned int tile;
    const int warps = blockDim.x / 32;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const long long tiles = (B + warps - 1) / warps;
    while (true) {
        if (threadIdx.x == 0) tile = atomicAdd(&g_next_tile, 1u);
        __syncthreads();
        const long long t = tile;
        __syncthreads();
        if (t >= tiles) break;
        const long long bag = t * warps + warp;
        if (bag < B) {
            const long long begin = offsets[bag], end = offsets[bag + 1];
            for (long long c = lane; c < D; c += 32) {
                float s = 0.0f;
                for (long long j = begin; j < end; ++j) s += weight[indices[j] * D + c];
                out[bag * D + c] = s;
            }
        }
    }
    if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd(&g_blocks_done, 1u) == gridDim.x - 1) {
            g_next_tile = 0;
            g_blocks_done = 0;
            __threadfence();
        }
    }
}
