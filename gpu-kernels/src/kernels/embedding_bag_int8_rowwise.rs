//! Problem 4, `embedding_bag_int8_rowwise`: each row of `weight` (uint8 [E, D + 8]) is D
//! quantized bytes q followed by an fp32 scale and an fp32 bias (PyTorch's "byte rowwise"
//! layout); out[b, d] = Σ_{j in bag b} (q[idx_j, d]·scale[idx_j] + bias[idx_j]), fp32 [B, D].
//!
//! [`embedding_bag_int8_rowwise_reference`] is what eager PyTorch runs for
//! `torch.ops.quantized.embedding_bag_byte_rowwise_offsets` on CUDA: a port of
//! `embedding_bag_nbits_rowwise_offsets_kernel<int64_t, 8>` (aten/src/ATen/native/quantized/
//! cuda/EmbeddingBag.cu), launched with one block of ONE thread per bag. The thread walks the
//! row in 4-column steps; for each step it re-reads every lookup of the bag (index, scale,
//! bias, 4 bytes), dequantizes the 4 bytes with `fmaf(q, scale, bias)` and adds them to four
//! fp32 accumulators, then stores the 4 sums with one 16-byte store. An empty bag writes zeros.
//!
//! The project's tuned kernel, `embedding_bag_int8_rowwise_lane_groups` on the
//! [`bag_pool`](super::bag_pool) engine, is in [`super::embedding_bag_int8_rowwise_tuned`].
//!
//! # Prediction at `full` (H200; written before the measurement below)
//! B = 65536, D = 128, N ≈ 1.97M lookups of 136-byte rows, 317.7 MB of logical bytes: the
//! physical floor is 317.7 MB over the measured 11.05 TB/s of L2 = 0.0288 ms; eager takes 6.927
//! ms, the reference 5.405, the CUDA example `warp_per_bag_u8x4` 0.2481 ms (11.6%).
//! * The example, in the dependent-latency model of problem 2's module doc (offsets → indices →
//!   row tails → rounds of 4 rows, per warp): 432–625 latencies, the 1000-lookup bag's warp
//!   alone 1 + 32·(2 + 8) = 321 in a row; L ≈ 0.40–0.57 µs.
//! * This kernel: 12 rows per warp per round (6 loads in flight per lane, two rows each), the
//!   row tails fetched with the indices a chunk ahead, bags over 192 lookups split over the
//!   block; at 24 resident warps per SM the model gives 151 latencies: 0.060–0.087 ms (the
//!   launch bounds now keep 16, below). Issue:
//!   ≈ 15 warp-instructions per row (3 shuffles, a 64-bit add, an 8-byte load, 8 × (PRMT, FADD,
//!   FFMA), over two rows) ≈ 30M, plus ≈ 5M per chunk and bag, over 132 SMs × 4 per clock ≈ 33
//!   µs: the floor's order, so ≈ 50% of issue would be needed for the goal.
//! * **Predicted ≈ 0.07 ms (0.060–0.087): ≈ 41% of the floor (33–48%), ≈ 100x eager, ≈ 77x the
//!   reference, ≈ 3.5x the example** — short of the 50% goal. The model's lever is rows in
//!   flight: at U = 8 (16 rows a round) it gives 116 latencies, 0.046–0.067 ms (43–62%), but
//!   ptxas then spills 96 bytes at 80 registers (U = 6: 32 bytes; U = 4: none, 182 latencies).
//!   U = 6 at 2 blocks per SM (119 registers, no spill) is what runs; which U and occupancy win
//!   wants a GPU A/B.
//!
//! # Measured (H200, `full`)
//! U = 6 at 2 blocks per SM: 0.248 ms, 11.6% of the floor, 18% of the warps active, no unit
//! above 24% busy (20261203T083330Z-gpu-full and its Nsight metrics). The A/B: U = 8 at 2
//! blocks 0.228 ms; **U = 4 at 3 blocks (80 registers) 0.172 ms, 16.7%**, which runs now. The
//! model still misses by 2.5x (0.07 predicted), in its latency per round, not its rows in flight.
use crate::dev::*;

kernel! {
    /// Launch: grid (B, 1, 1), block (1, 1, 1) — PyTorch's `<<<output_size, dim3(1, 1, 1)>>>`.
    /// Needs D % 4 == 0 (PyTorch checks it) and a 16-byte aligned `out`.
    pub unsafe fn embedding_bag_int8_rowwise_reference(
        weight: *const u8,
        indices: *const i64,
        offsets: *const i64,
        out: *mut f32,
        num_bags: i64,
        dim: i64,
        row_bytes: i64,
        indices_stride: i64,
    ) {
        let b_t = (block_idx_x() * block_dim_y() + thread_idx_y()) as i64;
        if b_t >= num_bags * dim {
            return;
        }
        let t = b_t / num_bags;
        let b = b_t % num_bags;
        let start = *offsets.add((t * num_bags + b) as usize);
        let end = *offsets.add((t * num_bags + b + 1) as usize);
        let out_row = out.add((b * dim) as usize);
        if end == start {
            let mut d = 0;
            while d < dim {
                store_f32x4(out_row.add(d as usize), [0.0; 4]);
                d += 4;
            }
            return;
        }
        let mut d = 0i64;
        let mut byte_offset = 0i64;
        while d < dim {
            let mut acc = [0.0f32; 4];
            // As nvcc compiles eager's loop: an int32 counter (`int32_t l`) against the int64
            // end, the indices read through an accessor's stride, and the loop unswitched on
            // `use_per_sample` (false: no per-sample weights, each weight 1, so `acc += res`).
            let mut l = start as i32;
            while (l as i64) < end {
                let idx = *indices.add((l as i64 * indices_stride) as usize);
                let row = weight.add((idx * row_bytes) as usize);
                let scale = *(row.add((row_bytes - 8) as usize) as *const f32);
                let bias = *(row.add((row_bytes - 4) as usize) as *const f32);
                let packed = *(row.add(byte_offset as usize) as *const u32);
                for (k, a) in acc.iter_mut().enumerate() {
                    // `dequantize_intx`: ATen's `bfe` (inline `bfe.u32`), converted to float,
                    // then `fmaf(q, scale, bias)`.
                    let q = bfe_u32(packed, 8 * k as u32, 8) as f32;
                    *a += fma_f32(q, scale, bias);
                }
                l += 1;
            }
            store_f32x4(out_row.add(d as usize), acc);
            d += 4;
            byte_offset += 4;
        }
    }
}
