// unique_indices candidate built from CUB's block-wide primitives.
//
// Problem (DESIGN.md section 3, problem 9): indices [N] int64, rows of a table of E rows
// (0 <= id < E, E < 2^32 - 1 here). Outputs: unique (the sorted distinct ids, first U entries),
// inverse [N] (the position of each id in unique), counts (first U entries), num_unique [1] = U.
//
// Plan (a histogram over the rows replaces a device-wide sort):
//   1. cubuq_zero: cnt[E] = 0 (uint32).
//   2. cubuq_count: a block loads 2048 ids (8 per thread), sorts them with
//      cub::BlockRadixSort over the bits E needs, flags run heads and tails with
//      cub::BlockDiscontinuity, and finds each item's run head with an inclusive max
//      cub::BlockScan; the tail of each run adds the run's length to cnt[id] (one global atomic
//      per distinct id per block). Padding items (past N) get key 0xffffffff, which sorts after
//      every id (ids < E <= 2^bits - 1) and is never counted.
//   3. cubuq_tile_reduce: per tile of 4096 rows, the number of present rows (cnt > 0), summed
//      with cub::BlockReduce.
//   4. cubuq_tile_scan (one block): exclusive scan of the tile sums with cub::BlockScan and a
//      running carry; num_unique = the total.
//   5. cubuq_tile_downsweep: per tile, cub::BlockScan gives every present row its rank; the
//      rows are visited in increasing order, so unique[rank] = row is sorted, and
//      counts[rank] = cnt[row].
//   6. cubuq_inverse: inverse[i] = rank[indices[i]].
#include <cub/block/block_discontinuity.cuh>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#define CUBUQ_THREADS 256
#define CUBUQ_ITEMS 8
#define CUBUQ_TILE (CUBUQ_THREADS * CUBUQ_ITEMS)
#define CUBUQ_SCAN_ITEMS 16
#define CUBUQ_SCAN_TILE (CUBUQ_THREADS * CUBUQ_SCAN_ITEMS)
#define CUBUQ_PAD 0xffffffffu

// Functors of our own: CUB's operator names changed between CCCL 2 and 3.
struct CubuqMax {
    __device__ __forceinline__ int operator()(int a, int b) const { return a > b ? a : b; }
};
struct CubuqDiffers {
    __device__ __forceinline__ bool operator()(unsigned a, unsigned b) const { return a != b; }
};

extern "C" __global__ void __launch_bounds__(CUBUQ_THREADS)
cubuq_zero(unsigned int* __restrict__ cnt, long long E)
{
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < E;
         i += (long long)gridDim.x * blockDim.x)
        cnt[i] = 0u;
}

extern "C" __global__ void __launch_bounds__(CUBUQ_THREADS)
cubuq_count(const long long* __restrict__ indices, long long N, long long E,
            unsigned int* __restrict__ cnt)
{
    using Sort = cub::BlockRadixSort<unsigned, CUBUQ_THREADS, CUBUQ_ITEMS>;
    using Flags = cub::BlockDiscontinuity<unsigned, CUBUQ_THREADS>;
    using Scan = cub::BlockScan<int, CUBUQ_THREADS>;
    __shared__ union {
        typename Sort::TempStorage sort;
        typename Flags::TempStorage flags;
        typename Scan::TempStorage scan;
    } temp;

    // Blocked arrangement: thread t holds items t * 8 .. t * 8 + 7 of the tile.
    const long long base = (long long)blockIdx.x * CUBUQ_TILE + threadIdx.x * CUBUQ_ITEMS;
    unsigned keys[CUBUQ_ITEMS];
#pragma unroll
    for (int k = 0; k < CUBUQ_ITEMS; ++k)
        keys[k] = base + k < N ? (unsigned)indices[base + k] : CUBUQ_PAD;

    // Bits that hold E itself, so every id (< E) is below 2^bits - 1, the padding's low bits.
    const int bits = E <= 1 ? 1 : 32 - __clz((unsigned)E);
    Sort(temp.sort).Sort(keys, 0, bits);
    __syncthreads();

    int heads[CUBUQ_ITEMS], tails[CUBUQ_ITEMS];
    Flags(temp.flags).FlagHeadsAndTails(heads, tails, keys, CubuqDiffers());
    __syncthreads();

    // run_head[k] = position in the tile of the first item of item k's run: the largest head
    // position at or before k (item 0 of the tile is always a head).
    int head_at[CUBUQ_ITEMS], run_head[CUBUQ_ITEMS];
#pragma unroll
    for (int k = 0; k < CUBUQ_ITEMS; ++k)
        head_at[k] = heads[k] ? (int)threadIdx.x * CUBUQ_ITEMS + k : 0;
    Scan(temp.scan).InclusiveScan(head_at, run_head, CubuqMax());

#pragma unroll
    for (int k = 0; k < CUBUQ_ITEMS; ++k) {
        const int at = (int)threadIdx.x * CUBUQ_ITEMS + k;
        if (tails[k] && keys[k] != CUBUQ_PAD)
            atomicAdd(&cnt[keys[k]], (unsigned)(at - run_head[k] + 1));
    }
}

// Rows present (cnt > 0) in each tile of 4096 rows.
extern "C" __global__ void __launch_bounds__(CUBUQ_THREADS)
cubuq_tile_reduce(const unsigned int* __restrict__ cnt, long long E,
                  long long* __restrict__ tile_sums)
{
    using Reduce = cub::BlockReduce<long long, CUBUQ_THREADS>;
    __shared__ typename Reduce::TempStorage temp;
    const long long base = (long long)blockIdx.x * CUBUQ_SCAN_TILE;
    long long s = 0;
    for (int k = 0; k < CUBUQ_SCAN_ITEMS; ++k) {
        const long long e = base + k * CUBUQ_THREADS + threadIdx.x;
        if (e < E) s += cnt[e] != 0u;
    }
    const long long total = Reduce(temp).Sum(s);
    if (threadIdx.x == 0) tile_sums[blockIdx.x] = total; // valid in thread 0 only
}

// Exclusive scan of the tile sums in place (one block); num_unique[0] = the total.
extern "C" __global__ void __launch_bounds__(CUBUQ_THREADS)
cubuq_tile_scan(long long* __restrict__ tile_sums, long long tiles,
                long long* __restrict__ num_unique)
{
    using Scan = cub::BlockScan<long long, CUBUQ_THREADS>;
    __shared__ typename Scan::TempStorage temp;
    long long carry = 0;
    for (long long base = 0; base < tiles; base += CUBUQ_THREADS) {
        const long long i = base + threadIdx.x;
        const long long v = i < tiles ? tile_sums[i] : 0;
        long long before, total;
        Scan(temp).ExclusiveSum(v, before, total);
        __syncthreads(); // temp is reused by the next round
        if (i < tiles) tile_sums[i] = carry + before;
        carry += total; // the same in every thread
    }
    if (threadIdx.x == 0) num_unique[0] = carry;
}

// Per tile: the rank of every present row, and its unique / counts entries.
extern "C" __global__ void __launch_bounds__(CUBUQ_THREADS)
cubuq_tile_downsweep(const unsigned int* __restrict__ cnt, long long E,
                     const long long* __restrict__ tile_sums, unsigned int* __restrict__ rank,
                     long long* __restrict__ unique, long long* __restrict__ counts)
{
    using Scan = cub::BlockScan<long long, CUBUQ_THREADS>;
    __shared__ typename Scan::TempStorage temp;
    // Thread t owns the 16 consecutive rows base + t * 16 .. base + t * 16 + 15.
    const long long first = (long long)blockIdx.x * CUBUQ_SCAN_TILE + threadIdx.x * CUBUQ_SCAN_ITEMS;
    unsigned c[CUBUQ_SCAN_ITEMS];
    long long present = 0;
#pragma unroll
    for (int k = 0; k < CUBUQ_SCAN_ITEMS; ++k) {
        c[k] = first + k < E ? cnt[first + k] : 0u;
        present += c[k] != 0u;
    }
    long long r;
    Scan(temp).ExclusiveSum(present, r);
    r += tile_sums[blockIdx.x];
#pragma unroll
    for (int k = 0; k < CUBUQ_SCAN_ITEMS; ++k) {
        if (c[k] != 0u) {
            rank[first + k] = (unsigned int)r;
            unique[r] = first + k;
            counts[r] = c[k];
            ++r;
        }
    }
}

extern "C" __global__ void __launch_bounds__(CUBUQ_THREADS)
cubuq_inverse(const long long* __restrict__ indices, long long N,
              const unsigned int* __restrict__ rank, long long* __restrict__ inverse)
{
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < N;
         i += (long long)gridDim.x * blockDim.x)
        inverse[i] = rank[indices[i]];
}
