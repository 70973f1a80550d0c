//! Problem 1, `embedding_bag_sum`: out[b, :] = Σ_{j ∈ offsets[b]..offsets[b+1]} weight[indices[j], :].
//!
//! * [`embedding_bag_sum_reference`] mirrors PyTorch eager's
//!   `EmbeddingBag_updateOutputKernel_sum_mean` (aten/src/ATen/native/cuda/EmbeddingBag.cu): one
//!   thread per (bag, column), blocks of (32, 8), a grid-stride loop over (bag, 32-column chunk),
//!   scalar loads, fp32 accumulation. (PyTorch also writes `offset2bag`; the problem asks only
//!   for `out`, so the reference does not.)
//! * [`embedding_bag_sum_warp_per_bag`] is the project's tuned kernel: one warp per bag, each
//!   lane four columns with 16-byte read-only loads, the bag's indices loaded 32 at a time and
//!   broadcast by shuffles, two lookups in flight per lane.
use crate::dev::*;

kernel! {
    /// Launch: block (32, 8, 1), grid min(1024, ceil_div(B·ceil_div(D, 32), 8)).
    pub unsafe fn embedding_bag_sum_reference(
        weight: *const f32,
        indices: *const i64,
        offsets: *const i64,
        out: *mut f32,
        num_bags: i64,
        dim: i64,
    ) {
        let chunks_per_bag = (dim + block_dim_x() as i64 - 1) / block_dim_x() as i64;
        let num_chunks = num_bags * chunks_per_bag;
        let mut chunk = (block_idx_x() * block_dim_y() + thread_idx_y()) as i64;
        let stride = (grid_dim_x() * block_dim_y()) as i64;
        while chunk < num_chunks {
            let feature = (chunk % chunks_per_bag) * block_dim_x() as i64 + thread_idx_x() as i64;
            if feature < dim {
                let bag = chunk / chunks_per_bag;
                let begin = *offsets.add(bag as usize);
                let end = *offsets.add(bag as usize + 1);
                let column = weight.add(feature as usize);
                let mut sum = 0.0f32;
                let mut j = begin;
                while j < end {
                    let row = *indices.add(j as usize);
                    sum += *column.add((row * dim) as usize);
                    j += 1;
                }
                *out.add((bag * dim + feature) as usize) = sum;
            }
            chunk += stride;
        }
    }
}

kernel! {
    /// Launch: block (256, 1, 1), grid ceil_div(B·32, 256). Needs D % 4 == 0 and a 16-byte
    /// aligned `weight` and `out`.
    pub unsafe fn embedding_bag_sum_warp_per_bag(
        weight: *const f32,
        indices: *const i64,
        offsets: *const i64,
        out: *mut f32,
        num_bags: i64,
        dim: i64,
    ) {
        let bag = ((block_idx_x() * block_dim_x() + thread_idx_x()) / WARP_SIZE) as i64;
        if bag >= num_bags {
            return; // whole warps leave together: `bag` is uniform across a warp
        }
        let lane = lane_id() as i64;
        let begin = *offsets.add(bag as usize);
        let end = *offsets.add(bag as usize + 1);
        // Column passes are uniform across the warp so every lane takes part in the shuffles.
        let mut pass_start = 0i64;
        while pass_start < dim {
            let col = pass_start + lane * 4;
            let active = col < dim;
            let mut acc0 = [0.0f32; 4];
            let mut acc1 = [0.0f32; 4];
            let mut base = begin;
            while base < end {
                let count = (end - base).min(WARP_SIZE as i64);
                let my_index = if lane < count { *indices.add((base + lane) as usize) } else { 0 };
                let mut k = 0;
                while k + 1 < count {
                    let r0 = shfl_idx_i64(my_index, k as u32);
                    let r1 = shfl_idx_i64(my_index, k as u32 + 1);
                    if active {
                        let v0 = load_nc_f32x4(weight.add((r0 * dim + col) as usize));
                        let v1 = load_nc_f32x4(weight.add((r1 * dim + col) as usize));
                        for c in 0..4 {
                            acc0[c] += v0[c];
                            acc1[c] += v1[c];
                        }
                    }
                    k += 2;
                }
                if k < count {
                    let r0 = shfl_idx_i64(my_index, k as u32);
                    if active {
                        let v0 = load_nc_f32x4(weight.add((r0 * dim + col) as usize));
                        for c in 0..4 {
                            acc0[c] += v0[c];
                        }
                    }
                }
                base += WARP_SIZE as i64;
            }
            if active {
                let sum = [acc0[0] + acc1[0], acc0[1] + acc1[1], acc0[2] + acc1[2], acc0[3] + acc1[3]];
                store_f32x4(out.add((bag * dim + col) as usize), sum);
            }
            pass_start += WARP_SIZE as i64 * 4;
        }
    }
}
