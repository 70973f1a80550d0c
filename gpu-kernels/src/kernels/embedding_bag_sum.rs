//! Problem 1, `embedding_bag_sum`: out[b, :] = Σ_{j ∈ offsets[b]..offsets[b+1]} weight[indices[j], :].
//!
//! * [`embedding_bag_sum_reference`] mirrors PyTorch eager's
//!   `EmbeddingBag_updateOutputKernel_sum_mean` (aten/src/ATen/native/cuda/EmbeddingBag.cu): one
//!   thread per (bag, column), blocks of (32, 8), a grid-stride loop over (bag, 32-column chunk),
//!   scalar loads, fp32 accumulation, and the `offset2bag` and `bag_size` side outputs eager
//!   writes (to scratch buffers here).
//! * [`embedding_bag_sum_warp_per_bag`] is the project's tuned kernel: one warp per bag, each
//!   lane four columns with 16-byte read-only loads, the bag's indices loaded 32 at a time and
//!   broadcast by shuffles, two lookups in flight per lane.
use crate::dev::*;

kernel! {
    /// Launch: block (32, 8, 1), grid min(1024, ceil_div(B·ceil_div(D, 32), 8)).
    ///
    /// A line-for-line port of PyTorch's `EmbeddingBag_updateOutputKernel_sum_mean` (sum mode,
    /// no per-sample weights, `padding_idx` = -1 as `F.embedding_bag` passes it): besides `out`
    /// it writes `offset2bag` [N] and `bag_size` [B] (scratch here, as in eager they are extra
    /// outputs nobody asked for). Those stores inside the lookup loop matter for speed: they
    /// may alias the index and weight loads, so the loop cannot run loads ahead of them —
    /// exactly the code PyTorch's users get.
    pub unsafe fn embedding_bag_sum_reference(
        indices: *const i64,
        offsets: *const i64,
        weight: *const f32,
        out: *mut f32,
        offset2bag: *mut i64,
        num_indices: i64,
        num_bags: i64,
        feature_size: i64,
        bag_size: *mut i64,
        padding_idx: i64,
    ) {
        let chunks_per_bag = (feature_size + block_dim_x() as i64 - 1) / block_dim_x() as i64;
        let num_chunks = num_bags * chunks_per_bag;
        let mut chunk = (block_idx_x() * block_dim_y() + thread_idx_y()) as i64;
        let stride = (grid_dim_x() * block_dim_y()) as i64;
        while chunk < num_chunks {
            let feature = (chunk % chunks_per_bag) * block_dim_x() as i64 + thread_idx_x() as i64;
            if feature < feature_size {
                let bag = chunk / chunks_per_bag;
                let column = weight.add(feature as usize);
                let begin = if bag == 0 { 0 } else { *offsets.add(bag as usize) };
                let end = if bag < num_bags - 1 { *offsets.add(bag as usize + 1) } else { num_indices };
                let mut sum = 0.0f32;
                let mut size = 0i64;
                let mut emb = begin;
                while emb < end {
                    let pad = *indices.add(emb as usize) == padding_idx;
                    let row = *indices.add(emb as usize) * feature_size;
                    let value = *column.add(row as usize);
                    sum += if pad { 0.0 } else { value };
                    size += if pad { 0 } else { 1 };
                    if feature == 0 {
                        *offset2bag.add(emb as usize) = bag;
                    }
                    emb += 1;
                }
                *bag_size.add(bag as usize) = size;
                *out.add((bag * feature_size + feature) as usize) = sum;
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
        warp_per_bag(weight, indices, offsets, out, num_bags, dim);
    }
}

/// The body of [`embedding_bag_sum_warp_per_bag`], callable from other kernels.
#[inline(always)]
pub unsafe fn warp_per_bag(
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
            let my_index = if lane < count {
                *indices.add((base + lane) as usize)
            } else {
                0
            };
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
            let sum = [
                acc0[0] + acc1[0],
                acc0[1] + acc1[1],
                acc0[2] + acc1[2],
                acc0[3] + acc1[3],
            ];
            store_f32x4(out.add((bag * dim + col) as usize), sum);
        }
        pass_start += WARP_SIZE as i64 * 4;
    }
}
