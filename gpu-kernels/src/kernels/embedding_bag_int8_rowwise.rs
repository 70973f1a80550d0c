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
            let mut l = start;
            while l < end {
                let idx = *indices.add(l as usize);
                let row = weight.add((idx * row_bytes) as usize);
                let scale = *(row.add((row_bytes - 8) as usize) as *const f32);
                let bias = *(row.add((row_bytes - 4) as usize) as *const f32);
                let packed = *(row.add(byte_offset as usize) as *const u32);
                for (k, a) in acc.iter_mut().enumerate() {
                    let q = ((packed >> (8 * k)) & 0xff) as f32;
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
