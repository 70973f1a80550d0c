// embedding_bag_sum candidate: one warp per bag, float4 row loads.
//
// Problem (DESIGN.md section 3, problem 1):
//   weight  [E, D] f32, row-major
//   indices [N]    int64
//   offsets [B+1]  int64, CSR: offsets[0] = 0, offsets[B] = N; bags may be empty
//   out     [B, D] f32: out[b, :] = sum_{j in offsets[b]..offsets[b+1]} weight[indices[j], :]
// Accumulation is fp32.
//
// Mapping:
//   * warp w handles bag b = w; the whole warp leaves together when b >= B, so every
//     __shfl_sync below runs with all 32 lanes present (full mask is valid);
//   * vector path (D % 4 == 0 and weight/out 16-byte aligned): lane l owns columns
//     c0 + 4l .. c0 + 4l + 3 and reads them with one 16-byte non-coherent load (__ldg on
//     float4); c0 steps by 128, so any D that is a multiple of 4 works; lanes whose columns
//     lie past D still take part in the shuffles but issue no loads or stores;
//   * scalar path (anything else): lane l owns columns c0 + l, c0 steps by 32;
//   * the indices of a chunk of up to 32 lookups are read with one coalesced load (lane l
//     reads indices[base + l], only when base + l < end: no read past the bag, hence none
//     past N), then broadcast to the warp with __shfl_sync;
//   * the lookup loop is unrolled by 4 with 4 independent accumulators, so each lane keeps
//     4 row loads in flight; the accumulators are added at the end (fp32 throughout).
//
// Compiled by NVRTC: device code only, no includes.

#define EBS_UNROLL 4

__device__ __forceinline__ float4 ebs_add4(float4 a, float4 b)
{
    a.x += b.x;
    a.y += b.y;
    a.z += b.z;
    a.w += b.w;
    return a;
}

extern "C" __global__ void __launch_bounds__(256)
ebs_warp_per_bag(const float* __restrict__ weight,
                 const long long* __restrict__ indices,
                 const long long* __restrict__ offsets,
                 float* __restrict__ out,
                 long long B,
                 long long D)
{
    const unsigned FULL = 0xffffffffu;
    const int lane = (int)(threadIdx.x & 31u);
    const long long warps_per_block = (long long)(blockDim.x >> 5);
    const long long b = (long long)blockIdx.x * warps_per_block + (long long)(threadIdx.x >> 5);
    if (b >= B) {
        return; // warp-uniform: b depends only on the warp
    }

    const long long start = __ldg(offsets + b);
    const long long end = __ldg(offsets + b + 1);
    float* __restrict__ out_row = out + b * D;

    const bool vec = ((D & 3LL) == 0)
        && ((reinterpret_cast<unsigned long long>(weight) & 15ull) == 0)
        && ((reinterpret_cast<unsigned long long>(out) & 15ull) == 0);

    if (vec) {
        for (long long c0 = 0; c0 < D; c0 += 128) {
            const long long col = c0 + 4LL * lane;
            const bool active = col < D;
            float4 acc[EBS_UNROLL];
#pragma unroll
            for (int u = 0; u < EBS_UNROLL; ++u) {
                acc[u] = make_float4(0.f, 0.f, 0.f, 0.f);
            }

            for (long long base = start; base < end; base += 32) {
                const long long left = end - base;
                const int n = left < 32 ? (int)left : 32; // warp-uniform
                const long long my_idx = (lane < n) ? __ldg(indices + base + lane) : 0LL;

                int j = 0;
                for (; j + EBS_UNROLL <= n; j += EBS_UNROLL) {
                    long long r[EBS_UNROLL];
#pragma unroll
                    for (int u = 0; u < EBS_UNROLL; ++u) {
                        r[u] = __shfl_sync(FULL, my_idx, j + u);
                    }
                    if (active) {
                        float4 v[EBS_UNROLL];
#pragma unroll
                        for (int u = 0; u < EBS_UNROLL; ++u) {
                            v[u] = __ldg(reinterpret_cast<const float4*>(weight + r[u] * D + col));
                        }
#pragma unroll
                        for (int u = 0; u < EBS_UNROLL; ++u) {
                            acc[u] = ebs_add4(acc[u], v[u]);
                        }
                    }
                }
                for (; j < n; ++j) {
                    const long long r = __shfl_sync(FULL, my_idx, j);
                    if (active) {
                        acc[0] = ebs_add4(acc[0],
                            __ldg(reinterpret_cast<const float4*>(weight + r * D + col)));
                    }
                }
            }

            if (active) {
                float4 s = ebs_add4(ebs_add4(acc[0], acc[1]), ebs_add4(acc[2], acc[3]));
                *reinterpret_cast<float4*>(out_row + col) = s;
            }
        }
    } else {
        // Scalar fallback: D not a multiple of 4, or a pointer not 16-byte aligned.
        for (long long c0 = 0; c0 < D; c0 += 32) {
            const long long col = c0 + lane;
            const bool active = col < D;
            float acc[EBS_UNROLL];
#pragma unroll
            for (int u = 0; u < EBS_UNROLL; ++u) {
                acc[u] = 0.f;
            }

            for (long long base = start; base < end; base += 32) {
                const long long left = end - base;
                const int n = left < 32 ? (int)left : 32;
                const long long my_idx = (lane < n) ? __ldg(indices + base + lane) : 0LL;

                int j = 0;
                for (; j + EBS_UNROLL <= n; j += EBS_UNROLL) {
                    long long r[EBS_UNROLL];
#pragma unroll
                    for (int u = 0; u < EBS_UNROLL; ++u) {
                        r[u] = __shfl_sync(FULL, my_idx, j + u);
                    }
                    if (active) {
#pragma unroll
                        for (int u = 0; u < EBS_UNROLL; ++u) {
                            acc[u] += __ldg(weight + r[u] * D + col);
                        }
                    }
                }
                for (; j < n; ++j) {
                    const long long r = __shfl_sync(FULL, my_idx, j);
                    if (active) {
                        acc[0] += __ldg(weight + r * D + col);
                    }
                }
            }

            if (active) {
                out_row[col] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
            }
        }
    }
}
