// sequence_gather_padded_bf16 candidate: one warp per output row, 16-byte copies.
//
// Problem (DESIGN.md section 3, problem 6):
//   weight  [E, D]    bf16 (D % 8 == 0: a row is a whole number of 16-byte vectors)
//   indices [N]       int64, the ids of sequence 0, then sequence 1, ...
//   lengths [B]       int64
//   out     [B, L, D] bf16: out[b, j] = weight[indices[start_b + j]] for j < min(lengths[b], L),
//                     zeros elsewhere (start_b = lengths[0] + ... + lengths[b-1])
//
// Plan:
//   1. seqpad_starts (one block of 1024 threads): exclusive prefix sum of lengths -> starts
//      (scratch, int64 [B]), in chunks of 1024 with a running carry.
//   2. seqpad_gather: warp w writes output row w = b * L + j: a kept row is copied with one
//      16-byte load and store per lane per 512 bytes; a padded row is written with zeros. The
//      output is written exactly once, the kept rows read once; no masks, no index tensors.
//
// Compiled by NVRTC: device code only, no includes.

extern "C" __global__ void __launch_bounds__(1024)
seqpad_starts(const long long* __restrict__ lengths, long long* __restrict__ starts, long long B)
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

extern "C" __global__ void __launch_bounds__(256)
seqpad_gather(const unsigned short* __restrict__ weight,
              const long long* __restrict__ indices,
              const long long* __restrict__ lengths,
              const long long* __restrict__ starts,
              unsigned short* __restrict__ out,
              long long B, long long L, long long D)
{
    const long long row = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (row >= B * L) return; // warp-uniform
    const int lane = threadIdx.x & 31;
    const long long b = row / L;
    const long long j = row - b * L;
    const long long vecs = D >> 3; // 16-byte vectors per row
    uint4* dst = reinterpret_cast<uint4*>(out + row * D);
    if (j < lengths[b]) {
        const long long id = __ldg(indices + starts[b] + j);
        const uint4* src = reinterpret_cast<const uint4*>(weight + id * D);
        for (long long v = lane; v < vecs; v += 32) dst[v] = __ldg(src + v);
    } else {
        const uint4 z = make_uint4(0u, 0u, 0u, 0u);
        for (long long v = lane; v < vecs; v += 32) dst[v] = z;
    }
}
