// embedding_bag_weighted_sum_bf16 candidate: one warp per bag, 8-byte bf16x4 row loads.
//
// Problem (DESIGN.md section 3, problem 2):
//   weight             [E, D] bf16, row-major
//   indices            [N]    int64
//   offsets            [B+1]  int64, CSR: offsets[0] = 0, offsets[B] = N; bags may be empty
//   per_sample_weights [N]    bf16
//   out                [B, D] bf16: out[b, :] = bf16(sum_j psw[j] * weight[indices[j], :])
// Accumulation is fp32; the sum is rounded once to bf16, to nearest even.
//
// Mapping:
//   * warp w handles bag b = w; the whole warp leaves together when b >= B, so every
//     __shfl_sync below runs with all 32 lanes present;
//   * vector path (D % 4 == 0, weight and out 8-byte aligned): lane l owns columns
//     c0 + 4l .. c0 + 4l + 3, read as one 8-byte __ldg (uint2 = 4 bf16); c0 steps by 128;
//   * scalar path (anything else): lane l owns column c0 + l, c0 steps by 32;
//   * a chunk of up to 32 lookups: lane l reads indices[base + l] and psw[base + l] (only
//     inside the bag), then both are broadcast with __shfl_sync;
//   * lookups unrolled by 4 with 4 independent fp32 accumulators (4 loads in flight).
//
// bf16 <-> f32 by bit operations (no headers): widening is exact (bits << 16); narrowing is
// round to nearest even, NaN kept quiet. Compiled by NVRTC: device code only, no includes.

#define EBW_UNROLL 4

__device__ __forceinline__ float ebw_bf16(unsigned short h)
{
    return __uint_as_float(((unsigned)h) << 16);
}

__device__ __forceinline__ unsigned short ebw_to_bf16(float x)
{
    unsigned u = __float_as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (unsigned short)((u >> 16) | 0x40u);
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}

__device__ __forceinline__ void ebw_fma4(float4& acc, float s, uint2 v)
{
    acc.x = fmaf(s, __uint_as_float(v.x << 16), acc.x);
    acc.y = fmaf(s, __uint_as_float(v.x & 0xffff0000u), acc.y);
    acc.z = fmaf(s, __uint_as_float(v.y << 16), acc.z);
    acc.w = fmaf(s, __uint_as_float(v.y & 0xffff0000u), acc.w);
}

extern "C" __global__ void __launch_bounds__(256)
ebw_warp_per_bag(const unsigned short* __restrict__ weight,
                 const long long* __restrict__ indices,
                 const long long* __restrict__ offsets,
                 const unsigned short* __restrict__ psw,
                 unsigned short* __restrict__ out,
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
    unsigned short* __restrict__ out_row = out + b * D;

    const bool vec = ((D & 3LL) == 0)
        && ((reinterpret_cast<unsigned long long>(weight) & 7ull) == 0)
        && ((reinterpret_cast<unsigned long long>(out) & 7ull) == 0);

    if (vec) {
        for (long long c0 = 0; c0 < D; c0 += 128) {
            const long long col = c0 + 4LL * lane;
            const bool active = col < D;
            float4 acc[EBW_UNROLL];
#pragma unroll
            for (int u = 0; u < EBW_UNROLL; ++u) {
                acc[u] = make_float4(0.f, 0.f, 0.f, 0.f);
            }
            for (long long base = start; base < end; base += 32) {
                const long long left = end - base;
                const int n = left < 32 ? (int)left : 32; // warp-uniform
                const long long my_idx = lane < n ? __ldg(indices + base + lane) : 0LL;
                const float my_w = lane < n ? ebw_bf16(__ldg(psw + base + lane)) : 0.f;
                int j = 0;
                for (; j + EBW_UNROLL <= n; j += EBW_UNROLL) {
                    long long r[EBW_UNROLL];
                    float s[EBW_UNROLL];
#pragma unroll
                    for (int u = 0; u < EBW_UNROLL; ++u) {
                        r[u] = __shfl_sync(FULL, my_idx, j + u);
                        s[u] = __shfl_sync(FULL, my_w, j + u);
                    }
                    if (active) {
                        uint2 v[EBW_UNROLL];
#pragma unroll
                        for (int u = 0; u < EBW_UNROLL; ++u) {
                            v[u] = __ldg(reinterpret_cast<const uint2*>(weight + r[u] * D + col));
                        }
#pragma unroll
                        for (int u = 0; u < EBW_UNROLL; ++u) {
                            ebw_fma4(acc[u], s[u], v[u]);
                        }
                    }
                }
                for (; j < n; ++j) {
                    const long long r = __shfl_sync(FULL, my_idx, j);
                    const float s = __shfl_sync(FULL, my_w, j);
                    if (active) {
                        ebw_fma4(acc[0], s,
                                 __ldg(reinterpret_cast<const uint2*>(weight + r * D + col)));
                    }
                }
            }
            if (active) {
                const float x = (acc[0].x + acc[1].x) + (acc[2].x + acc[3].x);
                const float y = (acc[0].y + acc[1].y) + (acc[2].y + acc[3].y);
                const float z = (acc[0].z + acc[1].z) + (acc[2].z + acc[3].z);
                const float w = (acc[0].w + acc[1].w) + (acc[2].w + acc[3].w);
                uint2 packed;
                packed.x = (unsigned)ebw_to_bf16(x) | ((unsigned)ebw_to_bf16(y) << 16);
                packed.y = (unsigned)ebw_to_bf16(z) | ((unsigned)ebw_to_bf16(w) << 16);
                *reinterpret_cast<uint2*>(out_row + col) = packed;
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
                const float my_w = lane < n ? ebw_bf16(__ldg(psw + base + lane)) : 0.f;
                for (int j = 0; j < n; ++j) {
                    const long long r = __shfl_sync(FULL, my_idx, j);
                    const float s = __shfl_sync(FULL, my_w, j);
                    if (active) {
                        acc = fmaf(s, ebw_bf16(__ldg(weight + r * D + col)), acc);
                    }
                }
            }
            if (active) {
                out_row[col] = ebw_to_bf16(acc);
            }
        }
    }
}
