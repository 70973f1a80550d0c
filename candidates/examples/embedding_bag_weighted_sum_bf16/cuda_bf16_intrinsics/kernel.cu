// embedding_bag_weighted_sum_bf16 candidate written with <cuda_bf16.h>.
//
// Problem (DESIGN.md section 3, problem 2):
//   weight             [E, D] bf16, row-major
//   indices            [N]    int64
//   offsets            [B+1]  int64, CSR: offsets[0] = 0, offsets[B] = N; bags may be empty
//   per_sample_weights [N]    bf16
//   out                [B, D] bf16: out[b, :] = bf16(sum_j psw[j] * weight[indices[j], :])
// Accumulation is fp32; the sum is rounded once to bf16, to nearest even.
//
// Mapping: warp w handles bag b = w (the whole warp leaves together when b >= B, so every
// __shfl_sync runs with all 32 lanes). Vector path (D % 4 == 0): lane l owns columns
// c0 + 4l .. c0 + 4l + 3, read as two __nv_bfloat162 (one 8-byte load); c0 steps by 128.
// Scalar path (D % 4 != 0): lane l owns column c0 + l, c0 steps by 32. A bag's indices and
// weights are read 32 at a time, one per lane, then broadcast. Empty bags write zeros.
#include <cuda_bf16.h>

struct __align__(8) ebw_bf16x4 {
    __nv_bfloat162 lo, hi;
};

extern "C" __global__ void __launch_bounds__(256)
ebw_bf16_warp_per_bag(const __nv_bfloat16* __restrict__ weight,
                      const long long* __restrict__ indices,
                      const long long* __restrict__ offsets,
                      const __nv_bfloat16* __restrict__ psw,
                      __nv_bfloat16* __restrict__ out,
                      long long B,
                      long long D)
{
    const unsigned FULL = 0xffffffffu;
    const int lane = (int)(threadIdx.x & 31u);
    const long long b = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (b >= B) {
        return; // warp-uniform
    }
    const long long start = offsets[b];
    const long long end = offsets[b + 1];
    __nv_bfloat16* __restrict__ out_row = out + b * D;

    if ((D & 3LL) == 0) {
        for (long long c0 = 0; c0 < D; c0 += 128) {
            const long long col = c0 + 4LL * lane;
            const bool active = col < D;
            float2 lo = make_float2(0.f, 0.f), hi = make_float2(0.f, 0.f);
            for (long long base = start; base < end; base += 32) {
                const long long left = end - base;
                const int n = left < 32 ? (int)left : 32; // warp-uniform
                const long long my_idx = lane < n ? indices[base + lane] : 0LL;
                const float my_w = lane < n ? __bfloat162float(psw[base + lane]) : 0.f;
                for (int j = 0; j < n; ++j) {
                    const long long r = __shfl_sync(FULL, my_idx, j);
                    const float s = __shfl_sync(FULL, my_w, j);
                    if (active) {
                        // 8-byte aligned: D % 4 == 0 and the buffers are 16-byte aligned.
                        const ebw_bf16x4 v =
                            *reinterpret_cast<const ebw_bf16x4*>(weight + r * D + col);
                        const float2 a = __bfloat1622float2(v.lo);
                        const float2 c = __bfloat1622float2(v.hi);
                        lo.x = fmaf(s, a.x, lo.x);
                        lo.y = fmaf(s, a.y, lo.y);
                        hi.x = fmaf(s, c.x, hi.x);
                        hi.y = fmaf(s, c.y, hi.y);
                    }
                }
            }
            if (active) {
                ebw_bf16x4 packed;
                packed.lo = __floats2bfloat162_rn(lo.x, lo.y);
                packed.hi = __floats2bfloat162_rn(hi.x, hi.y);
                *reinterpret_cast<ebw_bf16x4*>(out_row + col) = packed;
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
                const long long my_idx = lane < n ? indices[base + lane] : 0LL;
                const float my_w = lane < n ? __bfloat162float(psw[base + lane]) : 0.f;
                for (int j = 0; j < n; ++j) {
                    const long long r = __shfl_sync(FULL, my_idx, j);
                    const float s = __shfl_sync(FULL, my_w, j);
                    if (active) {
                        acc = fmaf(s, __bfloat162float(weight[r * D + col]), acc);
                    }
                }
            }
            if (active) {
                out_row[col] = __float2bfloat16_rn(acc);
            }
        }
    }
}
