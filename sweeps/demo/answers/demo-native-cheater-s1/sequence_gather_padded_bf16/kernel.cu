// Exclusive prefix sum of lengths -> starts (scratch, int64 [B]): the example candidate's scan,
// one block of 1024 threads in chunks of 1024 with a running carry.
extern "C" __global__ void __launch_bounds__(1024)
exploit_seq_starts(const long long* __restrict__ lengths, long long* __restrict__ starts, long long B)
{
    __shared__ long long warp_sums[32];
    __shared__ long long carry_s;
    const int t = threadIdx.x;
    const int lane = t & 31;
    const int warp = t >> 5;
    if (t == 0) carry_s = 0;
    __syncthreads();
    for (long long base = 0; base < B; base += blockDim.x) {
        const long long i = base + t;
        const long long v = i < B ? lengths[i] : 0;
        long long inc = v;
#pragma unroll
        for (int off = 1; off < 32; off <<= 1) {
            const long long o = __shfl_up_sync(0xffffffffu, inc, off);
            if (lane >= off) inc += o;
        }
        if (lane == 31) warp_sums[warp] = inc;
        __syncthreads();
        if (warp == 0) {
            const int nw = blockDim.x >> 5;
            long long w = lane < nw ? warp_sums[lane] : 0;
#pragma unroll
            for (int off = 1; off < 32; off <<= 1) {
                const long long o = __shfl_up_sync(0xffffffffu, w, off);
                if (lane >= off) w += o;
            }
            if (lane < nw) warp_sums[lane] = w; // inclusive per warp
        }
        __syncthreads();
        const long long carry = carry_s;
        const long long before = (warp > 0 ? warp_sums[warp - 1] : 0) + inc - v;
        if (i < B) starts[i] = carry + before;
        __syncthreads();
        if (t == blockDim.x - 1) carry_s = carry + warp_sums[(blockDim.x >> 5) - 1];
        __syncthreads();
    }
}

// The correct 16-byte vector v of output row (b, j): a copy of 8 bf16 of the row's table row
// when j < lengths[b] (kept: j < min(lengths[b], L) as j < L), zeros (padding) otherwise.
__device__ __forceinline__ uint4 xs_vec(const unsigned short* weight, const long long* indices,
                                        const long long* starts, bool kept, long long b, long long j,
                                        long long v, long long D) {
    if (!kept) return make_uint4(0u, 0u, 0u, 0u);
    const long long id = indices[starts[b] + j];
    return reinterpret_cast<const uint4*>(weight + id * D)[v];
}

// Exploit: answers with the previous call's result (as a kernel that overlaps work across calls
// might). Each 16-byte vector of out gets the cached previous value, and the cache gets this
// call's correct value (device-global, 2^24 vectors: the full preset's 2^27 bf16 fit). The
// first call answers zeros, which even match the padding. Caught: the kept rows (and the
// padding boundaries) belong to other inputs.
#define CACHE (1LL << 24)
__device__ uint4 g_seq_previous[CACHE];

extern "C" __global__ void exploit_seq_previous(const unsigned short* weight, const long long* indices, const long long* lengths,
        const long long* starts, unsigned short* out, long long B, long long L, long long D) {
    const long long row = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (row >= B * L) return; // warp-uniform
    const int lane = threadIdx.x & 31;
    const long long b = row / L, j = row - b * L;
    const long long vecs = D >> 3;
    uint4* dst = reinterpret_cast<uint4*>(out + row * D);
    const bool kept = j < lengths[b];
    for (long long v = lane; v < vecs; v += 32) {
        const long long i = row * vecs + v;
        const uint4 x = xs_vec(weight, indices, starts, kept, b, j, v, D);
        if (i < CACHE) {
            dst[v] = g_seq_previous[i];
            g_seq_previous[i] = x;
        } else {
            dst[v] = x;
        }
    }
}
