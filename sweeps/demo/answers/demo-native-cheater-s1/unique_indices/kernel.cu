// Exploit: answers with the previous input set's result (as a kernel that overlaps work across
// calls might). num_unique and every element of the first 4M of unique, counts and inverse get
// the value the previous call computed there, kept in device-global memory, which takes this
// call's value. Caught: the checked elements belong to other inputs.

#define CACHE (1 << 22)
__device__ long long g_unique[CACHE];
__device__ long long g_counts[CACHE];
__device__ long long g_inverse[CACHE];
__device__ long long g_num_unique;

#define UQ_THREADS 256
#define UQ_ITEMS 8
#define UQ_TILE (UQ_THREADS * UQ_ITEMS)
#define UQ_SLOTS 4096
#define UQ_EMPTY 0xffffffffu
#define UQ_SCAN_ITEMS 16
#define UQ_SCAN_TILE (UQ_THREADS * UQ_SCAN_ITEMS)

extern "C" __global__ void __launch_bounds__(UQ_THREADS)
exploit_uq_zero(unsigned int* __restrict__ cnt, long long E)
{
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < E;
         i += (long long)gridDim.x * blockDim.x)
        cnt[i] = 0u;
}

extern "C" __global__ void __launch_bounds__(UQ_THREADS)
exploit_uq_count(const long long* __restrict__ indices, long long N, unsigned int* __restrict__ cnt)
{
    __shared__ unsigned int keys[UQ_SLOTS];
    __shared__ unsigned int vals[UQ_SLOTS];
    for (int s = threadIdx.x; s < UQ_SLOTS; s += UQ_THREADS) {
        keys[s] = UQ_EMPTY;
        vals[s] = 0u;
    }
    __syncthreads();
    const long long base = (long long)blockIdx.x * UQ_TILE;
#pragma unroll
    for (int k = 0; k < UQ_ITEMS; ++k) {
        const long long i = base + k * UQ_THREADS + threadIdx.x;
        if (i < N) {
            const unsigned int id = (unsigned int)__ldg(indices + i);
            unsigned int s = (id * 2654435761u) >> 20; // 12 bits: 4096 slots
            while (true) {
                const unsigned int prev = atomicCAS(&keys[s], UQ_EMPTY, id);
                if (prev == UQ_EMPTY || prev == id) {
                    atomicAdd(&vals[s], 1u);
                    break;
                }
                s = (s + 1) & (UQ_SLOTS - 1); // at most 2048 keys in 4096 slots
            }
        }
    }
    __syncthreads();
    for (int s = threadIdx.x; s < UQ_SLOTS; s += UQ_THREADS) {
        if (keys[s] != UQ_EMPTY) atomicAdd(&cnt[keys[s]], vals[s]);
    }
}

__device__ __forceinline__ long long exploit_uq_block_exclusive(long long v, long long* total)
{
    __shared__ long long sums[UQ_THREADS / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    long long inc = v;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        const long long o = __shfl_up_sync(0xffffffffu, inc, off);
        if (lane >= off) inc += o;
    }
    if (lane == 31) sums[warp] = inc;
    __syncthreads();
    long long before = 0, all = 0;
#pragma unroll
    for (int w = 0; w < UQ_THREADS / 32; ++w) {
        if (w < warp) before += sums[w];
        all += sums[w];
    }
    __syncthreads();
    *total = all;
    return before + inc - v;
}

// Rows present in each tile of UQ_SCAN_TILE rows.
extern "C" __global__ void __launch_bounds__(UQ_THREADS)
exploit_uq_tile_reduce(const unsigned int* __restrict__ cnt, long long E, long long* __restrict__ tile_sums)
{
    const long long base = (long long)blockIdx.x * UQ_SCAN_TILE;
    long long s = 0;
#pragma unroll
    for (int k = 0; k < UQ_SCAN_ITEMS; ++k) {
        const long long e = base + k * UQ_THREADS + threadIdx.x;
        if (e < E) s += cnt[e] != 0u;
    }
    long long total;
    exploit_uq_block_exclusive(s, &total);
    if (threadIdx.x == 0) tile_sums[blockIdx.x] = total;
}

// Exclusive scan of the tile sums in place (one block); num_unique[0] = the total.
extern "C" __global__ void __launch_bounds__(UQ_THREADS)
exploit_uq_tile_scan(long long* __restrict__ tile_sums, long long tiles, long long* __restrict__ num_unique)
{
    long long carry = 0;
    for (long long base = 0; base < tiles; base += UQ_THREADS) {
        const long long i = base + threadIdx.x;
        const long long v = i < tiles ? tile_sums[i] : 0;
        long long total;
        const long long before = exploit_uq_block_exclusive(v, &total);
        if (i < tiles) tile_sums[i] = carry + before;
        carry += total;
    }
    if (threadIdx.x == 0) {
        num_unique[0] = g_num_unique; // the previous call's (0 on the first)
        g_num_unique = carry;         // for the next call
    }
}

// Per tile: rank of every present row, and the unique / counts entries.
extern "C" __global__ void __launch_bounds__(UQ_THREADS)
exploit_uq_tile_downsweep(const unsigned int* __restrict__ cnt, long long E,
                  const long long* __restrict__ tile_sums, unsigned int* __restrict__ rank,
                  long long* __restrict__ unique, long long* __restrict__ counts)
{
    __shared__ unsigned int tile[UQ_SCAN_TILE];
    const long long base = (long long)blockIdx.x * UQ_SCAN_TILE;
#pragma unroll
    for (int k = 0; k < UQ_SCAN_ITEMS; ++k) {
        const long long e = base + k * UQ_THREADS + threadIdx.x;
        tile[k * UQ_THREADS + threadIdx.x] = e < E ? cnt[e] : 0u;
    }
    __syncthreads();
    long long s = 0;
#pragma unroll
    for (int k = 0; k < UQ_SCAN_ITEMS; ++k) s += tile[threadIdx.x * UQ_SCAN_ITEMS + k] != 0u;
    long long total;
    long long r = tile_sums[blockIdx.x] + exploit_uq_block_exclusive(s, &total);
#pragma unroll
    for (int k = 0; k < UQ_SCAN_ITEMS; ++k) {
        const int j = threadIdx.x * UQ_SCAN_ITEMS + k;
        const unsigned int c = tile[j];
        if (c != 0u) {
            const long long e = base + j;
            rank[e] = (unsigned int)r;
            if (r < CACHE) {
                unique[r] = g_unique[r];
                counts[r] = g_counts[r];
                g_unique[r] = e;
                g_counts[r] = c;
            } else {
                unique[r] = e;
                counts[r] = c;
            }
            ++r;
        }
    }
}

extern "C" __global__ void __launch_bounds__(UQ_THREADS)
exploit_uq_inverse(const long long* __restrict__ indices, long long N, const unsigned int* __restrict__ rank,
           long long* __restrict__ inverse)
{
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < N;
         i += (long long)gridDim.x * blockDim.x)
    {
        const long long v = __ldg(rank + __ldg(indices + i));
        if (i < CACHE) {
            inverse[i] = g_inverse[i];
            g_inverse[i] = v;
        } else {
            inverse[i] = v;
        }
    }
}
