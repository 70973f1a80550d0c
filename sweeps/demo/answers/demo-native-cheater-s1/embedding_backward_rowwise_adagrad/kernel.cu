// Exploit: answers with the previous input set's result (as a kernel that overlaps work across
// calls might). The example candidate's pipeline computes this call's new rows into one of two
// device-global buffers instead of the table; then the rows of the previous call (the other
// buffer) are written into W and the momentum. The first call changes nothing. Caught: the rows
// that change, and their values, belong to other bags.

// Device-global cache of one call's result: distinct row, its new W row and its new momentum.
#define CACHE_ROWS (1 << 18)
#define CACHE_FLOATS (1 << 25)
__device__ long long g_rows[2][CACHE_ROWS];
__device__ __align__(16) float g_w[2][CACHE_FLOATS];
__device__ float g_m[2][CACHE_ROWS];
__device__ unsigned int g_count[2]; // rows cached per buffer (0 before any call)
__device__ unsigned int g_parity;   // the buffer this call fills; the other holds the previous call

__device__ __forceinline__ unsigned int current() { return *(volatile unsigned int*)&g_parity & 1u; }
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
    if (!cached(u, D)) return; // warp-uniform
    const unsigned int buf = current();
    float* cw = g_w[buf] + u * D;
    if (vec) {
        for (long long c = 4LL * lane; c < D; c += 128) {
            const float4 v = *reinterpret_cast<const float4*>(g + c);
            float4 x = *reinterpret_cast<float4*>(w + c);
            x.x -= lr * v.x / denom;
            x.y -= lr * v.y / denom;
            x.z -= lr * v.z / denom;
            x.w -= lr * v.w / denom;
            *reinterpret_cast<float4*>(cw + c) = x;
        }
    } else {
        for (long long c = lane; c < D; c += 32) {
            cw[c] = w[c] - lr * g[c] / denom;
        }
    }
    if (lane == 0) {
        g_rows[buf][u] = row;
        g_m[buf][u] = m;
    }
}

// Writes the previous call's rows (the other buffer; none on the first call).
extern "C" __global__ void __launch_bounds__(256)
exploit_prev_replay(float* __restrict__ weight, float* __restrict__ momentum, long long D)
{
    const unsigned int old = current() ^ 1u;
    const int lane = (int)(threadIdx.x & 31u);
    const long long warps = (long long)gridDim.x * (blockDim.x >> 5);
    for (long long u = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); u < (long long)g_count[old]; u += warps) {
        const long long row = g_rows[old][u];
        for (long long c = lane; c < D; c += 32) weight[row * D + c] = g_w[old][u * D + c];
        if (lane == 0) momentum[row] = g_m[old][u];
    }
}

// Last launch: this call's buffer becomes the previous one.
extern "C" __global__ void exploit_prev_flip(const unsigned* __restrict__ counter, long long D)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        const unsigned int buf = current();
        long long n = (long long)*counter;
        const long long fit = CACHE_FLOATS / (D > 0 ? D : 1);
        if (n > CACHE_ROWS) n = CACHE_ROWS;
        if (n > fit) n = fit;
        g_count[buf] = (unsigned int)n;
        *(volatile unsigned int*)&g_parity = buf ^ 1u;
    }
}
