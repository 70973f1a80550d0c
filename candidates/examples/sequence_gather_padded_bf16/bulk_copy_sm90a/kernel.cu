// sequence_gather_padded_bf16 candidate for sm_90a: rows moved by the bulk-copy engine.
//
// Problem (DESIGN.md section 3, problem 6):
//   weight  [E, D]    bf16 (D % 8 == 0: a row is a whole number of 16-byte vectors)
//   indices [N]       int64, the ids of sequence 0, then sequence 1, ...
//   lengths [B]       int64
//   out     [B, L, D] bf16: out[b, j] = weight[indices[start_b + j]] for j < min(lengths[b], L),
//                     zeros elsewhere (start_b = lengths[0] + ... + lengths[b-1])
//
// Plan:
//   1. seqbulk_starts (one block of 1024 threads): exclusive prefix sum of lengths -> starts.
//   2. seqbulk_gather: block k handles sequence b = k / T and its rows j0 .. j0 + 31
//      (T = ceil(L / 32) tiles per sequence, j0 = (k % T) * 32). Of those, the first `kept`
//      (j < min(lengths[b], L)) are gathered:
//        a. thread 0 initialises an mbarrier (arrival count 1) in shared memory and arms it
//           with the bytes to expect (kept * D * 2), then the block synchronises;
//        b. thread r < kept issues one cp.async.bulk of row r's table row (D * 2 bytes, a
//           multiple of 16; both addresses 16-byte aligned) into shared row r; the copies
//           signal the mbarrier with their byte counts (complete_tx);
//        c. every thread waits on phase 0 of the mbarrier (try_wait.parity);
//        d. thread 0 copies the kept rows, contiguous in out[b, j0 ..], back to global memory
//           with one cp.async.bulk shared -> global and waits until it has read the shared
//           buffer (cp.async.bulk.wait_group.read 0) before the block may exit.
//      The padded rows j0 + kept .. are written with zeros by plain 16-byte stores meanwhile.
// cp.async.bulk and mbarrier expect_tx are sm_90 instructions; the manifest compiles for
// sm_90a, Hopper's arch-specific target. Inline PTX, no headers.

extern "C" __global__ void __launch_bounds__(1024)
seqbulk_starts(const long long* __restrict__ lengths, long long* __restrict__ starts, long long B)
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

#define SEQBULK_ROWS 32

__device__ __forceinline__ unsigned seqbulk_smem(const void* p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

extern "C" __global__ void __launch_bounds__(128)
seqbulk_gather(const unsigned short* __restrict__ weight,
               const long long* __restrict__ indices,
               const long long* __restrict__ lengths,
               const long long* __restrict__ starts,
               unsigned short* __restrict__ out,
               long long B, long long L, long long D)
{
    extern __shared__ __align__(128) unsigned char rows[]; // SEQBULK_ROWS * D * 2 bytes
    __shared__ __align__(8) unsigned long long bar;

    const long long tiles = (L + SEQBULK_ROWS - 1) / SEQBULK_ROWS;
    const long long b = blockIdx.x / tiles;
    const long long j0 = (blockIdx.x - b * tiles) * SEQBULK_ROWS;
    if (b >= B) return; // block-uniform
    const long long len = lengths[b] < L ? lengths[b] : L;
    const long long in_tile = L - j0 < SEQBULK_ROWS ? L - j0 : SEQBULK_ROWS;
    long long kept = len - j0;
    kept = kept < 0 ? 0 : (kept > in_tile ? in_tile : kept);
    const unsigned row_bytes = (unsigned)(D * 2);
    unsigned short* out_tile = out + (b * L + j0) * D;

    if (kept > 0) { // block-uniform
        const unsigned bar_addr = seqbulk_smem(&bar);
        if (threadIdx.x == 0) {
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar_addr) : "memory");
            // Make the initialised barrier visible to the async proxy (the bulk copies).
            asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                         ::"r"(bar_addr), "r"((unsigned)kept * row_bytes) : "memory");
        }
        __syncthreads();
        if (threadIdx.x < kept) {
            const long long id = indices[starts[b] + j0 + threadIdx.x];
            const unsigned short* src = weight + id * D;
            const unsigned dst = seqbulk_smem(rows + (size_t)threadIdx.x * row_bytes);
            asm volatile(
                "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                " [%0], [%1], %2, [%3];"
                ::"r"(dst), "l"(src), "r"(row_bytes), "r"(bar_addr) : "memory");
        }
        // Wait for phase 0 of the barrier: every kept row has landed in shared memory.
        unsigned done = 0;
        while (!done) {
            asm volatile(
                "{\n\t.reg .pred p;\n\t"
                "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n\t"
                "selp.u32 %0, 1, 0, p;\n\t}"
                : "=r"(done) : "r"(bar_addr) : "memory");
        }
        if (threadIdx.x == 0) {
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
                         ::"l"(out_tile), "r"(seqbulk_smem(rows)),
                           "r"((unsigned)kept * row_bytes) : "memory");
            asm volatile("cp.async.bulk.commit_group;" ::: "memory");
            // The shared buffer must stay until the copy has read it: wait before exiting.
            asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
        }
    }
    // Padded rows kept .. in_tile - 1 of the tile: zeros, 16 bytes per store.
    const long long vecs = (in_tile - kept) * (D >> 3);
    uint4* pad = reinterpret_cast<uint4*>(out_tile + kept * D);
    const uint4 z = make_uint4(0u, 0u, 0u, 0u);
    for (long long v = threadIdx.x; v < vecs; v += blockDim.x) pad[v] = z;
}
