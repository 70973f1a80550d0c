// dot_interaction_backward candidate: one warp per sample, the whole backward fused.
//
// Problem (DESIGN.md section 3, problem 11; the gradient of problem 10):
//   x         [B, D]      f32
//   emb       [B, F, D]   f32
//   grad_out  [B, D + P]  f32, P = F(F+1)/2, pair p = i(i-1)/2 + j (i > j) at column D + p
//   dx        [B, D]      f32: grad_out[b, :D] + dT[b, 0]
//   d_emb     [B, F, D]   f32: dT[b, 1:]
// with T = [x[b]; emb[b]] (M = F+1 rows of D) and dT = G.T, G the symmetric M x M matrix
// with G[i][j] = G[j][i] = grad_out[b, D + p(i, j)] and a zero diagonal. fp32 FFMA, no TF32.
//
// Mapping (eager needs six kernels and round trips T, dZ, dZ + dZ^T and dT through memory;
// this reads x, emb and grad_out once and writes dx and d_emb once):
//   * warp w of the grid handles samples b = w, w + all warps, ...; block = 2 warps;
//   * load: T into this warp's shared tile ts[M][D4] (D4 = D rounded up to 4, zero columns
//     past D) with 16-byte loads, 8 per lane in flight, when D % 4 == 0 and the pointers are
//     16-byte aligned (else scalar loads); G into gs[M][M4] (M4 = M rounded up to 4, zero
//     padding) straight from grad_out's pair columns (L1 serves the second read of each);
//   * compute: lane l owns columns 4l..4l+3 (then +128, ... for D > 128) and four rows
//     i = 4g..4g+3 at a time: acc[r] += G[j][4g + r] * T[j][cols] over j in order (G is
//     symmetric, so row j of gs holds column j; one broadcast LDS.128 gives four rows'
//     coefficients, one LDS.128 the four columns of T[j]);
//   * store: row 0 (plus grad_out[b, :D]) to dx, rows 1.. to d_emb, 16-byte stores when
//     aligned.
// __syncwarp orders the phases; warps never share shared memory, so no block barrier.
//
// Compiled by NVRTC: device code only, no includes.

__device__ __forceinline__ bool dib_aligned16(const void* p)
{
    return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0;
}

extern "C" __global__ void __launch_bounds__(64)
dot_interaction_backward_warp(const float* __restrict__ x,
                              const float* __restrict__ emb,
                              const float* __restrict__ grad_out,
                              float* __restrict__ dx,
                              float* __restrict__ d_emb,
                              int B, int F, int D)
{
    extern __shared__ float4 dib_smem4[];
    float* smem = reinterpret_cast<float*>(dib_smem4);

    const int M = F + 1;
    const int M4 = (M + 3) & ~3;
    const int D4 = (D + 3) & ~3;
    const int P = F * (F + 1) / 2;
    const long long width = (long long)D + P;
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int warps_per_block = blockDim.x >> 5;

    float* ts = smem + (long long)warp * (M * D4 + M * M4);
    float* gs = ts + M * D4;
    const bool vec = (D % 4 == 0) && dib_aligned16(x) && dib_aligned16(emb)
        && dib_aligned16(dx) && dib_aligned16(d_emb);

    for (long long b = (long long)blockIdx.x * warps_per_block + warp; b < B;
         b += (long long)gridDim.x * warps_per_block) {
        const float* xb = x + b * D;
        const float* eb = emb + b * (long long)F * D;
        const float* gb = grad_out + b * width;

        // ---- load T ----
        if (vec) {
            const int q = D / 4;
            const int n4 = M * q;
            for (int base = 0; base < n4; base += 32 * 8) {
                float4 v[8];
#pragma unroll
                for (int u = 0; u < 8; ++u) {
                    const int idx = base + u * 32 + lane;
                    if (idx < n4) {
                        const int r = idx / q;
                        const int c = idx - r * q;
                        const float4* src = r == 0
                            ? reinterpret_cast<const float4*>(xb) + c
                            : reinterpret_cast<const float4*>(eb + (long long)(r - 1) * D) + c;
                        v[u] = __ldg(src);
                    }
                }
#pragma unroll
                for (int u = 0; u < 8; ++u) {
                    const int idx = base + u * 32 + lane;
                    if (idx < n4) {
                        const int r = idx / q;
                        const int c = idx - r * q;
                        *reinterpret_cast<float4*>(ts + r * D4 + 4 * c) = v[u];
                    }
                }
            }
        } else {
            for (int idx = lane; idx < M * D; idx += 32) {
                const int r = idx / D;
                const int c = idx - r * D;
                ts[r * D4 + c] = r == 0 ? __ldg(xb + c) : __ldg(eb + (long long)(r - 1) * D + c);
            }
            for (int idx = lane; idx < M * (D4 - D); idx += 32) {
                const int r = idx / (D4 - D);
                ts[r * D4 + D + (idx - r * (D4 - D))] = 0.f;
            }
        }
        // ---- symmetric G from the pair columns ----
        for (int idx = lane; idx < M * M4; idx += 32) {
            const int i = idx / M4;
            const int j = idx - i * M4;
            float v = 0.f;
            if (j < M && i != j) {
                const int hi = i > j ? i : j;
                const int lo = i > j ? j : i;
                v = __ldg(gb + D + hi * (hi - 1) / 2 + lo);
            }
            gs[idx] = v;
        }
        __syncwarp();

        // ---- dT = G.T, four rows by four columns per lane ----
        for (int col = 4 * lane; col < D4; col += 128) {
            for (int g = 0; g < M; g += 4) {
                float4 acc[4];
#pragma unroll
                for (int r = 0; r < 4; ++r) {
                    acc[r] = make_float4(0.f, 0.f, 0.f, 0.f);
                }
                for (int j = 0; j < M; ++j) {
                    const float4 t = *reinterpret_cast<const float4*>(ts + j * D4 + col);
                    const float4 c = *reinterpret_cast<const float4*>(gs + j * M4 + g);
                    const float cr[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
                    for (int r = 0; r < 4; ++r) {
                        acc[r].x = fmaf(cr[r], t.x, acc[r].x);
                        acc[r].y = fmaf(cr[r], t.y, acc[r].y);
                        acc[r].z = fmaf(cr[r], t.z, acc[r].z);
                        acc[r].w = fmaf(cr[r], t.w, acc[r].w);
                    }
                }
#pragma unroll
                for (int r = 0; r < 4; ++r) {
                    const int i = g + r;
                    if (i >= M) {
                        break;
                    }
                    float4 v = acc[r];
                    float* dst;
                    if (i == 0) {
                        v.x += __ldg(gb + col);
                        if (col + 1 < D) v.y += __ldg(gb + col + 1);
                        if (col + 2 < D) v.z += __ldg(gb + col + 2);
                        if (col + 3 < D) v.w += __ldg(gb + col + 3);
                        dst = dx + b * D + col;
                    } else {
                        dst = d_emb + (b * (long long)F + (i - 1)) * D + col;
                    }
                    if (vec) {
                        *reinterpret_cast<float4*>(dst) = v;
                    } else {
                        dst[0] = v.x;
                        if (col + 1 < D) dst[1] = v.y;
                        if (col + 2 < D) dst[2] = v.z;
                        if (col + 3 < D) dst[3] = v.w;
                    }
                }
            }
        }
        __syncwarp();
    }
}
