// block_bucketize_sparse_features candidate: FBGEMM's two passes over the (feature, sample)
// segments, with counting instead of sorting.
//
// Problem (DESIGN.md section 3, problem 8): lengths [T, B] int32, indices [N] int64 and
// weights [N] f32 stored segment by segment ((t, b) in order), block_sizes [T] int64, W ranks.
// An id of feature t with block size s goes to rank id / s as id - rank*s when id < W*s, else
// to rank id % W as id / W. Outputs: new_lengths [W, T, B] int32, new_indices / new_weights
// grouped by (rank, t, b) with the original order inside each group, and unbucketize_permute
// (input i -> its output position).
//
// Plan (any W; the per-rank counters in shared memory take ranks 32 at a time):
//   1-3. exclusive scan of lengths -> seg_off [T*B + 1] (tile sums, one-block scan of the
//        tile sums, per-tile scan);
//   4.   bb_count: one thread per segment counts its ids per rank (counters in shared memory)
//        and writes new_lengths[r, t, b];
//   5-7. exclusive scan of new_lengths -> new_off [W*T*B + 1];
//   8.   bb_scatter: one thread per segment walks its ids in order again and writes each to
//        new_off[r, t, b] + (ids of rank r seen so far in the segment).
// Compiled by NVRTC: device code only, no includes.

#define BB_THREADS 256
#define BB_ITEMS 16
#define BB_TILE (BB_THREADS * BB_ITEMS)
#define BB_MAX_W 32

__device__ __forceinline__ long long bb_warp_inclusive(long long v)
{
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        const long long o = __shfl_up_sync(0xffffffffu, v, off);
        if (lane >= off) v += o;
    }
    return v;
}

// Exclusive block scan of one value per thread (block of BB_THREADS); returns the thread's
// exclusive prefix, *total gets the block total.
__device__ __forceinline__ long long bb_block_exclusive(long long v, long long* total)
{
    __shared__ long long sums[BB_THREADS / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const long long inc = bb_warp_inclusive(v);
    if (lane == 31) sums[warp] = inc;
    __syncthreads();
    long long before = 0, all = 0;
#pragma unroll
    for (int w = 0; w < BB_THREADS / 32; ++w) {
        if (w < warp) before += sums[w];
        all += sums[w];
    }
    __syncthreads();
    *total = all;
    return before + inc - v;
}

// Pass 1 of the scan: the sum of each tile of BB_TILE int32 values.
extern "C" __global__ void __launch_bounds__(BB_THREADS)
bb_tile_reduce(const int* __restrict__ in, long long n, long long* __restrict__ tile_sums)
{
    const long long base = (long long)blockIdx.x * BB_TILE;
    long long s = 0;
#pragma unroll
    for (int k = 0; k < BB_ITEMS; ++k) {
        const long long i = base + k * BB_THREADS + threadIdx.x;
        if (i < n) s += in[i];
    }
    long long total;
    bb_block_exclusive(s, &total);
    if (threadIdx.x == 0) tile_sums[blockIdx.x] = total;
}

// Pass 2: exclusive scan of the tile sums in place (one block of BB_THREADS).
extern "C" __global__ void __launch_bounds__(BB_THREADS)
bb_tile_scan(long long* __restrict__ tile_sums, long long tiles)
{
    long long carry = 0;
    for (long long base = 0; base < tiles; base += BB_THREADS) {
        const long long i = base + threadIdx.x;
        const long long v = i < tiles ? tile_sums[i] : 0;
        long long total;
        const long long before = bb_block_exclusive(v, &total);
        if (i < tiles) tile_sums[i] = carry + before;
        carry += total;
    }
}

// Pass 3: out[i] = in[0] + ... + in[i-1] for i in [0, n], int64.
extern "C" __global__ void __launch_bounds__(BB_THREADS)
bb_tile_downsweep(const int* __restrict__ in, long long n, const long long* __restrict__ tile_sums,
                  long long* __restrict__ out)
{
    __shared__ __align__(16) int tile[BB_TILE];
    const long long base = (long long)blockIdx.x * BB_TILE;
#pragma unroll
    for (int k = 0; k < BB_ITEMS; ++k) {
        const long long i = base + k * BB_THREADS + threadIdx.x;
        tile[k * BB_THREADS + threadIdx.x] = i < n ? in[i] : 0;
    }
    __syncthreads();
    long long vals[BB_ITEMS];
    long long s = 0;
#pragma unroll
    for (int k = 0; k < BB_ITEMS; ++k) {
        vals[k] = s; // exclusive inside the thread's run
        s += tile[threadIdx.x * BB_ITEMS + k];
    }
    long long total;
    const long long before = tile_sums[blockIdx.x] + bb_block_exclusive(s, &total);
    __syncthreads();
    long long* tile64 = reinterpret_cast<long long*>(tile); // reuse: BB_TILE / 2 longs per half
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        // Two rounds of BB_TILE/2 results each (the int tile holds half as many longs).
        const int lo = half * (BB_TILE / 2);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BB_ITEMS; ++k) {
            const int j = threadIdx.x * BB_ITEMS + k;
            if (j >= lo && j < lo + BB_TILE / 2) tile64[j - lo] = before + vals[k];
        }
        __syncthreads();
        for (int j = threadIdx.x; j < BB_TILE / 2; j += BB_THREADS) {
            const long long i = base + lo + j;
            if (i < n) out[i] = tile64[j];
        }
    }
    if (base + BB_TILE >= n && base <= n) {
        // The tile holding element n - 1 (or the empty first tile) writes out[n].
        if (threadIdx.x == BB_THREADS - 1) out[n] = before + s;
    }
}

__device__ __forceinline__ void bb_rule(long long id, long long s, long long W, long long* rank, long long* nid)
{
    if (id < W * s) {
        const long long r = id / s;
        *rank = r;
        *nid = id - r * s;
    } else {
        *rank = id % W;
        *nid = id / W;
    }
}

extern "C" __global__ void __launch_bounds__(BB_THREADS)
bb_count(const int* __restrict__ lengths, const long long* __restrict__ seg_off,
         const long long* __restrict__ indices, const long long* __restrict__ block_sizes,
         int* __restrict__ new_lengths, long long T, long long B, long long W)
{
    __shared__ int cnt[BB_MAX_W][BB_THREADS];
    const long long TB = T * B;
    const long long seg = (long long)blockIdx.x * BB_THREADS + threadIdx.x;
    // Ranks in passes of BB_MAX_W (one pass for W <= 32): each thread owns its column of the
    // counters, so no barrier is needed.
    for (long long r0 = 0; r0 < W; r0 += BB_MAX_W) {
        const int nr = (int)(W - r0 < BB_MAX_W ? W - r0 : BB_MAX_W);
        for (int r = 0; r < nr; ++r) cnt[r][threadIdx.x] = 0;
        if (seg < TB) {
            const long long s = block_sizes[seg / B];
            const long long begin = seg_off[seg], end = begin + lengths[seg];
            for (long long i = begin; i < end; ++i) {
                long long r, nid;
                bb_rule(__ldg(indices + i), s, W, &r, &nid);
                if (r >= r0 && r < r0 + nr) cnt[r - r0][threadIdx.x] += 1;
            }
            for (int r = 0; r < nr; ++r) new_lengths[(r0 + r) * TB + seg] = cnt[r][threadIdx.x];
        }
    }
}

extern "C" __global__ void __launch_bounds__(BB_THREADS)
bb_scatter(const int* __restrict__ lengths, const long long* __restrict__ seg_off,
           const long long* __restrict__ indices, const float* __restrict__ weights,
           const long long* __restrict__ block_sizes, const long long* __restrict__ new_off,
           long long* __restrict__ new_indices, float* __restrict__ new_weights,
           long long* __restrict__ unbucketize_permute, long long T, long long B, long long W)
{
    __shared__ int seen[BB_MAX_W][BB_THREADS];
    const long long TB = T * B;
    const long long seg = (long long)blockIdx.x * BB_THREADS + threadIdx.x;
    // Ranks in passes of BB_MAX_W, as in bb_count; each pass walks the segment in order, so a
    // rank's ids keep their order.
    for (long long r0 = 0; r0 < W; r0 += BB_MAX_W) {
        const int nr = (int)(W - r0 < BB_MAX_W ? W - r0 : BB_MAX_W);
        for (int r = 0; r < nr; ++r) seen[r][threadIdx.x] = 0;
        if (seg < TB) {
            const long long s = block_sizes[seg / B];
            const long long begin = seg_off[seg], end = begin + lengths[seg];
            for (long long i = begin; i < end; ++i) {
                long long r, nid;
                bb_rule(__ldg(indices + i), s, W, &r, &nid);
                if (r < r0 || r >= r0 + nr) continue;
                const long long pos = new_off[r * TB + seg] + seen[r - r0][threadIdx.x]++;
                new_indices[pos] = nid;
                new_weights[pos] = __ldg(weights + i);
                unbucketize_permute[i] = pos;
            }
        }
    }
}
