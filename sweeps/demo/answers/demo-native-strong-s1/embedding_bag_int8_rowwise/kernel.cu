// embedding_bag_int8_rowwise candidate: one warp per bag, 4 quantized bytes per lane.
//
// Problem (DESIGN.md section 3, problem 4):
//   weight  [E, D+8] uint8: row r = D bytes q[r, :], fp32 scale, fp32 bias (little-endian)
//   indices [N]      int64
//   offsets [B+1]    int64, CSR: offsets[0] = 0, offsets[B] = N; bags may be empty
//   out     [B, D]   fp32: out[b, d] = sum_j q[idx_j, d] * scale[idx_j] + bias[idx_j]
//
// Mapping:
//   * warp w handles bag b = w; the whole warp leaves together when b >= B, so every
//     __shfl_sync below runs with all 32 lanes present;
//   * lane l owns columns c0 + 4l .. c0 + 4l + 3 and reads their 4 bytes with one 4-byte
//     __ldg (row stride D + 8 is a multiple of 4, so the load is aligned); c0 steps by 128;
//   * a chunk of up to 32 lookups: lane l reads indices[base + l] and that row's scale and
//     bias (two 4-byte loads: the row tail is only 4-byte aligned in general), then the three
//     are broadcast with __shfl_sync;
//   * lookups unrolled by 4 with independent accumulators; each element is dequantized as
//     fmaf(q, scale, bias) (what PyTorch's kernel does) and added in fp32;
//   * out rows are 16-byte aligned (D % 4 == 0): one float4 store per lane.
//
// Compiled by NVRTC: device code only, no includes.

#define I8_UNROLL 4

__device__ __forceinline__ void i8_acc4(float4& acc, unsigned q, float scale, float bias)
{
    acc.x += fmaf((float)(q & 0xffu), scale, bias);
    acc.y += fmaf((float)((q >> 8) & 0xffu), scale, bias);
    acc.z += fmaf((float)((q >> 16) & 0xffu), scale, bias);
    acc.w += fmaf((float)(q >> 24), scale, bias);
}

extern "C" __global__ void __launch_bounds__(256)
int8_warp_per_bag(const unsigned char* __restrict__ weight,
                  const long long* __restrict__ indices,
                  const long long* __restrict__ offsets,
                  float* __restrict__ out,
                  long long B,
                  long long D)
{
    const unsigned FULL = 0xffffffffu;
    const int lane = (int)(threadIdx.x & 31u);
    const long long b = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (b >= B) {
        return; // warp-uniform
    }
    const long long stride = D + 8;
    const long long start = __ldg(offsets + b);
    const long long end = __ldg(offsets + b + 1);
    float* __restrict__ out_row = out + b * D;

    for (long long c0 = 0; c0 < D; c0 += 128) {
        const long long col = c0 + 4LL * lane;
        const bool active = col < D;
        float4 acc[I8_UNROLL];
#pragma unroll
        for (int u = 0; u < I8_UNROLL; ++u) {
            acc[u] = make_float4(0.f, 0.f, 0.f, 0.f);
        }
        for (long long base = start; base < end; base += 32) {
            const long long left = end - base;
            const int n = left < 32 ? (int)left : 32; // warp-uniform
            long long my_row = 0;
            float my_scale = 0.f, my_bias = 0.f;
            if (lane < n) {
                my_row = __ldg(indices + base + lane) * stride;
                const float* tail = reinterpret_cast<const float*>(weight + my_row + D);
                my_scale = __ldg(tail);
                my_bias = __ldg(tail + 1);
            }
            int j = 0;
            for (; j + I8_UNROLL <= n; j += I8_UNROLL) {
                long long r[I8_UNROLL];
                float s[I8_UNROLL], z[I8_UNROLL];
#pragma unroll
                for (int u = 0; u < I8_UNROLL; ++u) {
                    r[u] = __shfl_sync(FULL, my_row, j + u);
                    s[u] = __shfl_sync(FULL, my_scale, j + u);
                    z[u] = __shfl_sync(FULL, my_bias, j + u);
                }
                if (active) {
                    unsigned q[I8_UNROLL];
#pragma unroll
                    for (int u = 0; u < I8_UNROLL; ++u) {
                        q[u] = __ldg(reinterpret_cast<const unsigned*>(weight + r[u] + col));
                    }
#pragma unroll
                    for (int u = 0; u < I8_UNROLL; ++u) {
                        i8_acc4(acc[u], q[u], s[u], z[u]);
                    }
                }
            }
            for (; j < n; ++j) {
                const long long r = __shfl_sync(FULL, my_row, j);
                const float s = __shfl_sync(FULL, my_scale, j);
                const float z = __shfl_sync(FULL, my_bias, j);
                if (active) {
                    i8_acc4(acc[0], __ldg(reinterpret_cast<const unsigned*>(weight + r + col)),
                            s, z);
                }
            }
        }
        if (active) {
            float4 sum;
            sum.x = (acc[0].x + acc[1].x) + (acc[2].x + acc[3].x);
            sum.y = (acc[0].y + acc[1].y) + (acc[2].y + acc[3].y);
            sum.z = (acc[0].z + acc[1].z) + (acc[2].z + acc[3].z);
            sum.w = (acc[0].w + acc[1].w) + (acc[2].w + acc[3].w);
            *reinterpret_cast<float4*>(out_row + col) = sum;
        }
    }
}
