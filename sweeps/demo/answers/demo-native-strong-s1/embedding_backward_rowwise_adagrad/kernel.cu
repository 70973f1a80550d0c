// Exploit: memoisation across calls. The first call runs the example candidate's pipeline and
// also stores every distinct row with its new W row and momentum in a device-global cache; every
// later call skips the dedup, reduction and update and writes the cached rows (with the shared
// table restored, a replay on the same inputs would be exact). Caught because later calls see
// other bags (fresh and secret sets, rotation in timing): the wrong rows change.

// Device-global cache of one call's result: distinct row, its new W row and its new momentum.
#define CACHE_ROWS (1 << 18)
#define CACHE_FLOATS (1 << 25)
__device__ long long g_rows[CACHE_ROWS];
__device__ __align__(16) float g_w[CACHE_FLOATS];
__device__ float g_m[CACHE_ROWS];
__device__ unsigned int g_count;
__device__ unsigned int g_filled; // set by the last launch of the first call

__device__ __forceinline__ bool replaying() { return *(volatile unsigned int*)&g_filled != 0u; }
__device__ __forceinline__ bool cached(long long u, long long D) { return u < CACHE_ROWS && (u + 1) * D <= CACHE_FLOATS; }

#define ADA_EMPTY 0xffffffffffffffffull

__device__ __forceinline__ unsigned long long exploit_ada_home(unsigned long long key, unsigned long long cap)
{
    const unsigned long long h = (key * 0x9E3779B97F4A7C15ull) >> 32;
    return (h * cap) >> 32;
}

extern "C" __global__ void __launch_bounds__(256)
exploit_ada_clear(unsigned long long* __restrict__ keys, long long cap, unsigned* __restrict__ counter)
{
    if (replaying()) return;
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < cap) {
        keys[i] = ADA_EMPTY;
    }
    if (i == 0) {
        *counter = 0u;
    }
}

extern "C" __global__ void __launch_bounds__(256)
exploit_ada_insert(const long long* __restrict__ indices,
           long long N,
           unsigned long long* keys,
           unsigned* __restrict__ ids,
           long long cap,
           unsigned* __restrict__ counter,
           long long* __restrict__ rows,
           float* __restrict__ grad_sum,
           long long D,
           unsigned* __restrict__ slot)
{
    if (replaying()) return;
    const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= N) {
        return;
    }
    const unsigned long long key = (unsigned long long)__ldg(indices + j);
    const unsigned long long ucap = (unsigned long long)cap;
    unsigned long long pos = exploit_ada_home(key, ucap);
    while (true) {
        const unsigned long long seen = *((volatile unsigned long long*)(keys + pos));
        if (seen == key) {
            break;
        }
        if (seen == ADA_EMPTY) {
            const unsigned long long before = atomicCAS(keys + pos, ADA_EMPTY, key);
            if (before == ADA_EMPTY) {
                const unsigned id = atomicAdd(counter, 1u);
                ids[pos] = id;
                rows[id] = (long long)key;
                float* g = grad_sum + (long long)id * D;
                if ((D & 3LL) == 0) {
                    for (long long c = 0; c < D; c += 4) {
                        *reinterpret_cast<float4*>(g + c) = make_float4(0.f, 0.f, 0.f, 0.f);
                    }
                } else {
                    for (long long c = 0; c < D; ++c) {
                        g[c] = 0.f;
                    }
                }
                break;
            }
            if (before == key) {
                break;
            }
        }
        pos = pos + 1 == ucap ? 0 : pos + 1;
    }
    slot[j] = (unsigned)pos;
}

extern "C" __global__ void __launch_bounds__(256)
exploit_ada_accumulate(const float* __restrict__ grad_output,
               const long long* __restrict__ offsets,
               const unsigned* __restrict__ slot,
               const unsigned* __restrict__ ids,
               float* __restrict__ grad_sum,
               long long B,
               long long D)
{
    const unsigned FULL = 0xffffffffu;
    const int lane = (int)(threadIdx.x & 31u);
    if (replaying()) return;
    const long long b = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (b >= B) {
        return; // warp-uniform
    }
    const long long start = __ldg(offsets + b);
    const long long end = __ldg(offsets + b + 1);
    if (start == end) {
        return;
    }
    const bool vec = (D & 3LL) == 0;
    const long long step = vec ? 128 : 32;
    for (long long c0 = 0; c0 < D; c0 += step) {
        const long long col = c0 + (vec ? 4LL * lane : (long long)lane);
        const bool active = col < D;
        float4 g = make_float4(0.f, 0.f, 0.f, 0.f);
        if (active) {
            if (vec) {
                g = __ldg(reinterpret_cast<const float4*>(grad_output + b * D + col));
            } else {
                g.x = __ldg(grad_output + b * D + col);
            }
        }
        for (long long base = start; base < end; base += 32) {
            const long long left = end - base;
            const int n = left < 32 ? (int)left : 32; // warp-uniform
            const unsigned my_id = lane < n ? __ldg(ids + __ldg(slot + base + lane)) : 0u;
            for (int k = 0; k < n; ++k) {
                const unsigned id = __shfl_sync(FULL, my_id, k);
                if (active) {
                    float* dst = grad_sum + (long long)id * D + col;
                    atomicAdd(dst, g.x);
                    if (vec) {
                        atomicAdd(dst + 1, g.y);
                        atomicAdd(dst + 2, g.z);
                        atomicAdd(dst + 3, g.w);
                    }
                }
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(256)
exploit_ada_update(const long long* __restrict__ rows,
           const unsigned* __restrict__ counter,
           const float* __restrict__ grad_sum,
           float* __restrict__ weight,
           float* __restrict__ momentum,
           float lr,
           float eps,
           long long D)
{
    const unsigned FULL = 0xffffffffu;
    const int lane = (int)(threadIdx.x & 31u);
    const long long u = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (replaying()) return;
    if (u >= (long long)*counter) {
        return; // warp-uniform
    }
    const long long row = rows[u];
    const float* g = grad_sum + u * D;
    float* w = weight + row * D;
    const bool vec = (D & 3LL) == 0;
    const float m_old = __shfl_sync(FULL, lane == 0 ? momentum[row] : 0.f, 0);
    float sq = 0.f;
    if (vec) {
        for (long long c = 4LL * lane; c < D; c += 128) {
            const float4 v = *reinterpret_cast<const float4*>(g + c);
            sq = fmaf(v.x, v.x, fmaf(v.y, v.y, fmaf(v.z, v.z, fmaf(v.w, v.w, sq))));
        }
    } else {
        for (long long c = lane; c < D; c += 32) {
            sq = fmaf(g[c], g[c], sq);
        }
    }
#pragma unroll
    for (int mask = 16; mask > 0; mask >>= 1) {
        sq += __shfl_xor_sync(FULL, sq, mask);
    }
    const float m = m_old + sq / (float)D;
    const float denom = sqrtf(m) + eps;
    const bool keep = cached(u, D);
    if (vec) {
        for (long long c = 4LL * lane; c < D; c += 128) {
            const float4 v = *reinterpret_cast<const float4*>(g + c);
            float4 x = *reinterpret_cast<float4*>(w + c);
            x.x -= lr * v.x / denom;
            x.y -= lr * v.y / denom;
            x.z -= lr * v.z / denom;
            x.w -= lr * v.w / denom;
            *reinterpret_cast<float4*>(w + c) = x;
            if (keep) *reinterpret_cast<float4*>(g_w + u * D + c) = x;
        }
    } else {
        for (long long c = lane; c < D; c += 32) {
            w[c] -= lr * g[c] / denom;
            if (keep) g_w[u * D + c] = w[c];
        }
    }
    if (lane == 0) {
        momentum[row] = m;
        if (keep) {
            g_rows[u] = row;
            g_m[u] = m;
        }
    }
}

// Later calls: write the cached rows back (warp per cached row); nothing else runs.
extern "C" __global__ void __launch_bounds__(256)
exploit_memo_replay(float* __restrict__ weight, float* __restrict__ momentum, long long D)
{
    if (!replaying()) return;
    const int lane = (int)(threadIdx.x & 31u);
    const long long warps = (long long)gridDim.x * (blockDim.x >> 5);
    for (long long u = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); u < (long long)g_count; u += warps) {
        const long long row = g_rows[u];
        for (long long c = lane; c < D; c += 32) weight[row * D + c] = g_w[u * D + c];
        if (lane == 0) momentum[row] = g_m[u];
    }
}

// Last launch: the first call marks the cache full (launches run in order, so every kernel of
// one call sees the same flag).
extern "C" __global__ void exploit_memo_commit(const unsigned* __restrict__ counter, long long D)
{
    if (blockIdx.x == 0 && threadIdx.x == 0 && !replaying()) {
        long long n = (long long)*counter;
        const long long fit = CACHE_FLOATS / (D > 0 ? D : 1);
        if (n > CACHE_ROWS) n = CACHE_ROWS;
        if (n > fit) n = fit;
        g_count = (unsigned int)n;
        *(volatile unsigned int*)&g_filled = 1u;
    }
}
