// dot_interaction candidate: one warp per sample, the whole interaction fused.
//
// Problem (DESIGN.md section 3, problem 10):
//   x    [B, D]      f32
//   emb  [B, F, D]   f32
//   out  [B, D + P]  f32, P = F(F+1)/2: out[b, :D] = x[b]; out[b, D + p] = T_i . T_j for pair
//        p = i(i-1)/2 + j (i > j) of T = [x[b]; emb[b]] (F+1 rows of D), DLRM's row-major order.
// fp32 FFMA throughout (no tensor cores, so no TF32).
//
// Mapping (eager needs four kernels and round trips T and Z through memory; this reads x and
// emb once and writes out once):
//   * warp w of the grid handles samples b = w, w + all warps, ...; block = 2 warps;
//   * load: T's M = F+1 rows go to this warp's shared tile ts[R][S] (R = 4*ceil(M/4) rows,
//     zero rows past M and zero columns D..D4-1, D4 = D rounded up to 4) with 16-byte loads
//     (8 per lane in flight) when D % 4 == 0 and the pointers are 16-byte aligned, else
//     scalar loads; row 0 (x) is also copied to out[b, :D] on the way;
//   * compute: with T = R/4 row groups, "tile" (ti, tj), ti >= tj, covers rows
//     {ti, ti+T, ti+2T, ti+3T} x {tj, tj+T, tj+2T, tj+3T} (interleaved so that the rows one
//     LDS.128 touches across lanes are consecutive, and with S/4 odd they hit different
//     banks); lane l takes tiles l, l+32, ... of the T(T+1)/2 lower tiles (28 of them for
//     F = 26, one per lane) and accumulates a 4x4 block of dot products over k with 16-byte
//     shared loads, k in order (x, y, z, w of each float4);
//   * every pair (a, b), a > b, lies in exactly one lower tile (the tile of its residues mod
//     T; in a diagonal tile only i > j is kept), and goes to zs[a(a-1)/2 + b] in shared
//     memory; then the warp writes zs to out[b, D:] with coalesced stores.
// __syncwarp orders the phases; warps never share shared memory, so no block barrier.
//
// Compiled by NVRTC: device code only, no includes.

__device__ __forceinline__ bool dic_aligned16(const void* p)
{
    return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0;
}

extern "C" __global__ void __launch_bounds__(64)
dot_interaction_warp_tiles(const float* __restrict__ x,
                           const float* __restrict__ emb,
                           float* __restrict__ out,
                           int B, int F, int D)
{
    extern __shared__ float4 dic_smem4[];
    float* smem = reinterpret_cast<float*>(dic_smem4);

    const int M = F + 1;
    const int T = (M + 3) / 4;
    const int R = 4 * T;
    const int D4 = (D + 3) & ~3;
    const int S = 4 * (D4 / 4 + 1 - (D4 / 4) % 2); // row stride in floats, S/4 odd
    const int P = F * (F + 1) / 2;
    const long long width = (long long)D + P;
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int warps_per_block = blockDim.x >> 5;

    const int P4 = (P + 3) & ~3;                    // keeps every warp's slice 16-byte aligned
    float* ts = smem + (long long)warp * (R * S + P4);
    float* zs = ts + R * S;
    const int ntiles = T * (T + 1) / 2;
    const bool vec = (D % 4 == 0) && dic_aligned16(x) && dic_aligned16(emb);

    for (long long b = (long long)blockIdx.x * warps_per_block + warp; b < B;
         b += (long long)gridDim.x * warps_per_block) {
        const float* xb = x + b * D;
        const float* eb = emb + b * (long long)F * D;
        float* ob = out + b * width;

        // ---- load T into shared, copy x to out[b, :D] ----
        if (vec) {
            const int q = D / 4;            // float4 per row
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
                        *reinterpret_cast<float4*>(ts + r * S + 4 * c) = v[u];
                        if (r == 0) {
                            ob[4 * c] = v[u].x;
                            ob[4 * c + 1] = v[u].y;
                            ob[4 * c + 2] = v[u].z;
                            ob[4 * c + 3] = v[u].w;
                        }
                    }
                }
            }
        } else {
            for (int idx = lane; idx < M * D; idx += 32) {
                const int r = idx / D;
                const int c = idx - r * D;
                const float v = r == 0 ? __ldg(xb + c) : __ldg(eb + (long long)(r - 1) * D + c);
                ts[r * S + c] = v;
                if (r == 0) {
                    ob[c] = v;
                }
            }
        }
        // Zero padding: columns D..D4-1 of the real rows, and rows M..R-1.
        for (int idx = lane; idx < M * (D4 - D); idx += 32) {
            const int r = idx / (D4 - D);
            ts[r * S + D + (idx - r * (D4 - D))] = 0.f;
        }
        for (int idx = lane; idx < (R - M) * D4; idx += 32) {
            ts[M * S + (idx / D4) * S + idx % D4] = 0.f;
        }
        __syncwarp();

        // ---- 4x4 tiles of dot products ----
        for (int t = lane; t < ntiles; t += 32) {
            int ti = 0;
            while ((ti + 1) * (ti + 2) / 2 <= t) {
                ++ti;
            }
            const int tj = t - ti * (ti + 1) / 2;
            float acc[4][4];
#pragma unroll
            for (int r = 0; r < 4; ++r) {
#pragma unroll
                for (int c = 0; c < 4; ++c) {
                    acc[r][c] = 0.f;
                }
            }
            const float* pa = ts + ti * S;
            const float* pb = ts + tj * S;
            for (int k = 0; k < D4; k += 4) {
                float4 a[4], bv[4];
#pragma unroll
                for (int r = 0; r < 4; ++r) {
                    a[r] = *reinterpret_cast<const float4*>(pa + r * T * S + k);
                    bv[r] = *reinterpret_cast<const float4*>(pb + r * T * S + k);
                }
#pragma unroll
                for (int r = 0; r < 4; ++r) {
#pragma unroll
                    for (int c = 0; c < 4; ++c) {
                        float s = acc[r][c];
                        s = fmaf(a[r].x, bv[c].x, s);
                        s = fmaf(a[r].y, bv[c].y, s);
                        s = fmaf(a[r].z, bv[c].z, s);
                        s = fmaf(a[r].w, bv[c].w, s);
                        acc[r][c] = s;
                    }
                }
            }
#pragma unroll
            for (int r = 0; r < 4; ++r) {
#pragma unroll
                for (int c = 0; c < 4; ++c) {
                    const int i = ti + r * T;
                    const int j = tj + c * T;
                    if (i < M && j < M && (ti != tj || i > j)) {
                        const int hi = i > j ? i : j;
                        const int lo = i > j ? j : i;
                        zs[hi * (hi - 1) / 2 + lo] = acc[r][c];
                    }
                }
            }
        }
        __syncwarp();

        // ---- pairs to out[b, D:], coalesced ----
        for (int p = lane; p < P; p += 32) {
            ob[D + p] = zs[p];
        }
        __syncwarp();
    }
}
