// tbe_forward_fp16 candidate: every table in one launch, one warp per bag, f16x4 row loads.
//
// Problem (DESIGN.md section 3, problem 3):
//   weight        [E, D]    fp16, all T tables stacked; table t is rows
//                           table_offsets[t] .. table_offsets[t+1]
//   table_offsets [T+1]     int64
//   indices       [N]       int64, local to their table
//   offsets       [T*B+1]   int64, table-major CSR: bag b of table t is
//                           indices[offsets[t*B+b] .. offsets[t*B+b+1]]
//   out           [B, T*D]  fp32: out[b, t*D + d] = sum over the bag of weight[base_t + idx, d]
// Accumulation is fp32.
//
// Mapping:
//   * warp w handles bag k = w (table t = k / B, sample b = k % B): consecutive warps walk the
//     samples of one table, so that table's hot rows are shared in L2 while it is being read;
//     the whole warp leaves together when k >= T*B, so every __shfl_sync has all 32 lanes;
//   * vector path (D % 4 == 0, weight 8-byte and out 16-byte aligned): lane l owns columns
//     c0 + 4l .. c0 + 4l + 3 (one 8-byte __ldg of 4 halves, one 16-byte store); c0 steps by 128;
//   * scalar path otherwise: lane l owns column c0 + l, c0 steps by 32;
//   * a chunk of up to 32 lookups: lane l reads indices[base + l], then it is broadcast;
//   * lookups unrolled by 4 with independent accumulators.
//
// fp16 -> f32 with one cvt.f32.f16 (exact). Compiled by NVRTC: device code only, no includes.

#define TBE_UNROLL 4

__device__ __forceinline__ float tbe_h2f(unsigned short h)
{
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ void tbe_add4(float4& acc, uint2 v)
{
    acc.x += tbe_h2f((unsigned short)(v.x & 0xffffu));
    acc.y += tbe_h2f((unsigned short)(v.x >> 16));
    acc.z += tbe_h2f((unsigned short)(v.y & 0xffffu));
    acc.w += tbe_h2f((unsigned short)(v.y >> 16));
}

extern "C" __global__ void __launch_bounds__(256)
tbe_warp_per_bag(const unsigned short* __restrict__ weight,
                 const long long* __restrict__ table_offsets,
                 const long long* __restrict__ indices,
                 const long long* __restrict__ offsets,
                 float* __restrict__ out,
                 long long T,
                 long long B,
                 long long D)
{
    const unsigned FULL = 0xffffffffu;
    const int lane = (int)(threadIdx.x & 31u);
    const long long k = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (k >= T * B) {
        return; // warp-uniform
    }
    const long long t = k / B;
    const long long b = k - t * B;
    const long long start = __ldg(offsets + k);
    const long long end = __ldg(offsets + k + 1);
    const unsigned short* __restrict__ table = weight + __ldg(table_offsets + t) * D;
    float* __restrict__ out_slice = out + b * (T * D) + t * D;

    const bool vec = ((D & 3LL) == 0)
        && ((reinterpret_cast<unsigned long long>(weight) & 7ull) == 0)
        && ((reinterpret_cast<unsigned long long>(out) & 15ull) == 0);

    if (vec) {
        for (long long c0 = 0; c0 < D; c0 += 128) {
            const long long col = c0 + 4LL * lane;
            const bool active = col < D;
            float4 acc[TBE_UNROLL];
#pragma unroll
            for (int u = 0; u < TBE_UNROLL; ++u) {
                acc[u] = make_float4(0.f, 0.f, 0.f, 0.f);
            }
            for (long long base = start; base < end; base += 32) {
                const long long left = end - base;
                const int n = left < 32 ? (int)left : 32; // warp-uniform
                const long long my_idx = lane < n ? __ldg(indices + base + lane) : 0LL;
                int j = 0;
                for (; j + TBE_UNROLL <= n; j += TBE_UNROLL) {
                    long long r[TBE_UNROLL];
#pragma unroll
                    for (int u = 0; u < TBE_UNROLL; ++u) {
                        r[u] = __shfl_sync(FULL, my_idx, j + u);
                    }
                    if (active) {
                        uint2 v[TBE_UNROLL];
#pragma unroll
                        for (int u = 0; u < TBE_UNROLL; ++u) {
                            v[u] = __ldg(reinterpret_cast<const uint2*>(table + r[u] * D + col));
                        }
#pragma unroll
                        for (int u = 0; u < TBE_UNROLL; ++u) {
                            tbe_add4(acc[u], v[u]);
                        }
                    }
                }
                for (; j < n; ++j) {
                    const long long r = __shfl_sync(FULL, my_idx, j);
                    if (active) {
                        tbe_add4(acc[0], __ldg(reinterpret_cast<const uint2*>(table + r * D + col)));
                    }
                }
            }
            if (active) {
                float4 s;
                s.x = (acc[0].x + acc[1].x) + (acc[2].x + acc[3].x);
                s.y = (acc[0].y + acc[1].y) + (acc[2].y + acc[3].y);
                s.z = (acc[0].z + acc[1].z) + (acc[2].z + acc[3].z);
                s.w = (acc[0].w + acc[1].w) + (acc[2].w + acc[3].w);
                *reinterpret_cast<float4*>(out_slice + col) = s;
            }
        }
    } else {
        for (long long c0 = 0; c0 < D; c0 += 32) {
            const long long col = c0 + lane;
            const bool active = col < D;
            float acc = 0.f;
            for (long long base = start; base < end; base += 32) {
                const long long left = end - base;
                const int n = left < 32 ? (int)left : 32;
                const long long my_idx = lane < n ? __ldg(indices + base + lane) : 0LL;
                for (int j = 0; j < n; ++j) {
                    const long long r = __shfl_sync(FULL, my_idx, j);
                    if (active) {
                        acc += tbe_h2f(__ldg(table + r * D + col));
                    }
                }
            }
            if (active) {
                out_slice[col] = acc;
            }
        }
    }
}
