// Exploit: answers with the previous input set's result (as a kernel that overlaps work across
// calls might). Each element of the first 4M (of each output) gets the value the previous call
// computed there, kept in a device-global buffer, and the buffer takes this call's value.
// Caught: every checked element of the prefix belongs to other inputs.

#define CACHE (1 << 22)
__device__ int g_lengths[CACHE];
__device__ long long g_values[CACHE];
__device__ float g_weights[CACHE];

#define KJTP_CHUNK 2048

extern "C" __global__ void __launch_bounds__(256)
exploit_kjtp_feature_totals(const int* __restrict__ lengths, const long long* __restrict__ permute,
                    long long* __restrict__ feature_len, int* __restrict__ permuted_lengths,
                    long long T, long long B, long long P)
{
    const long long blk = blockIdx.x;
    if (blk < T) {
        __shared__ long long partial[8];
        long long s = 0;
        for (long long b = threadIdx.x; b < B; b += blockDim.x) s += lengths[blk * B + b];
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
        if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = s;
        __syncthreads();
        if (threadIdx.x == 0) {
            long long total = 0;
            for (int w = 0; w < (int)(blockDim.x >> 5); ++w) total += partial[w];
            feature_len[blk] = total;
        }
    } else {
        const long long p = blk - T;
        if (p >= P) return;
        const int* src = lengths + permute[p] * B;
        int* dst = permuted_lengths + p * B;
        for (long long b = threadIdx.x; b < B; b += blockDim.x) {
            const long long i = p * B + b;
            if (i < CACHE) {
                dst[b] = g_lengths[i]; // the previous call's
                g_lengths[i] = src[b]; // for the next call
            } else {
                dst[b] = src[b];
            }
        }
    }
}

// Exclusive scan of n values given by get(i) into out[0..n], out[n] = total (one block).
template <typename Get>
__device__ void exploit_kjtp_block_scan(Get get, long long n, long long* out)
{
    __shared__ long long warp_sums[32];
    __shared__ long long carry_s;
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5, nw = blockDim.x >> 5;
    if (t == 0) carry_s = 0;
    __syncthreads();
    for (long long base = 0; base < n; base += blockDim.x) {
        const long long i = base + t;
        const long long v = i < n ? get(i) : 0;
        long long inc = v;
#pragma unroll
        for (int off = 1; off < 32; off <<= 1) {
            const long long o = __shfl_up_sync(0xffffffffu, inc, off);
            if (lane >= off) inc += o;
        }
        if (lane == 31) warp_sums[warp] = inc;
        __syncthreads();
        if (warp == 0) {
            long long w = lane < nw ? warp_sums[lane] : 0;
#pragma unroll
            for (int off = 1; off < 32; off <<= 1) {
                const long long o = __shfl_up_sync(0xffffffffu, w, off);
                if (lane >= off) w += o;
            }
            if (lane < nw) warp_sums[lane] = w;
        }
        __syncthreads();
        const long long carry = carry_s;
        if (i < n) out[i] = carry + (warp > 0 ? warp_sums[warp - 1] : 0) + inc - v;
        __syncthreads();
        if (t == 0) carry_s = carry + warp_sums[nw - 1];
        __syncthreads();
    }
    if (t == 0) out[n] = carry_s;
}

extern "C" __global__ void __launch_bounds__(1024)
exploit_kjtp_offsets(const long long* __restrict__ feature_len, const long long* __restrict__ permute,
             long long* __restrict__ feature_start, long long* __restrict__ out_start,
             long long T, long long P)
{
    exploit_kjtp_block_scan([=](long long i) { return feature_len[i]; }, T, feature_start);
    __syncthreads();
    exploit_kjtp_block_scan([=](long long i) { return feature_len[permute[i]]; }, P, out_start);
}

extern "C" __global__ void __launch_bounds__(256)
exploit_kjtp_copy(const long long* __restrict__ values, const float* __restrict__ weights,
          const long long* __restrict__ permute, const long long* __restrict__ feature_start,
          const long long* __restrict__ out_start,
          long long* __restrict__ permuted_values, float* __restrict__ permuted_weights,
          long long P, long long NP)
{
    __shared__ long long first_s;
    const long long begin = (long long)blockIdx.x * KJTP_CHUNK;
    if (begin >= NP) return;
    if (threadIdx.x == 0) {
        // The last p with out_start[p] <= begin (out_start is non-decreasing).
        long long lo = 0, hi = P - 1;
        while (lo < hi) {
            const long long mid = (lo + hi + 1) >> 1;
            if (out_start[mid] <= begin) lo = mid; else hi = mid - 1;
        }
        first_s = lo;
    }
    __syncthreads();
    long long p = first_s;
    const long long end = min(begin + (long long)KJTP_CHUNK, NP);
    for (long long i = begin + threadIdx.x; i < end; i += blockDim.x) {
        while (out_start[p + 1] <= i) ++p; // empty features are skipped here too
        const long long src = feature_start[permute[p]] + (i - out_start[p]);
        const long long v = __ldg(values + src);
        const float w = __ldg(weights + src);
        if (i < CACHE) {
            permuted_values[i] = g_values[i];
            permuted_weights[i] = g_weights[i];
            g_values[i] = v;
            g_weights[i] = w;
        } else {
            permuted_values[i] = v;
            permuted_weights[i] = w;
        }
    }
}
