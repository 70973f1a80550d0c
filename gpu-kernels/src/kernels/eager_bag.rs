//! The loop of PyTorch eager's `EmbeddingBag_updateOutputKernel_sum_mean` (sum mode,
//! aten/src/ATen/native/cuda/EmbeddingBag.cu), written once ([`eager_bag_sum!`]) for the
//! reference kernels of problem 1
//! ([`embedding_bag_sum_reference`](fn@super::embedding_bag_sum::embedding_bag_sum_reference):
//! f32, no weights) and problem 2
//! ([`embedding_bag_weighted_sum_bf16_reference`](fn@super::embedding_bag_weighted_sum_bf16::embedding_bag_weighted_sum_bf16_reference):
//! bf16, per-sample bf16 weights). What differs between them is a [`BagElem`] (how a table
//! value is widened to f32 and a sum narrowed back) and a [`BagWeights`] (how a lookup is
//! added).
use crate::dev::{bf16_to_f32, f32_to_bf16_rn, fma_f32};

/// A table and output element as the eager loop reads and writes it; sums are f32.
pub(crate) trait BagElem: Copy {
    /// The value as f32 (exactly).
    fn widen(self) -> f32;
    /// A bag's f32 sum as this element.
    fn narrow(sum: f32) -> Self;
}

/// f32 tables (problem 1): loads and stores as they are.
impl BagElem for f32 {
    #[inline(always)]
    fn widen(self) -> f32 {
        self
    }
    #[inline(always)]
    fn narrow(sum: f32) -> f32 {
        sum
    }
}

/// bf16 tables (problem 2), as their bit patterns: widened exactly, sums rounded to nearest even.
impl BagElem for u16 {
    #[inline(always)]
    fn widen(self) -> f32 {
        bf16_to_f32(self)
    }
    #[inline(always)]
    fn narrow(sum: f32) -> u16 {
        f32_to_bf16_rn(sum)
    }
}

/// How lookup `emb`'s value (0 for a padding index) is added to a bag's running sum.
pub(crate) trait BagWeights: Copy {
    /// The sum after lookup `emb` of value `value`.
    unsafe fn add(self, sum: f32, value: f32, emb: i64) -> f32;
}

/// No per-sample weights: `sum + value`.
#[derive(Clone, Copy)]
pub(crate) struct Unweighted;

impl BagWeights for Unweighted {
    #[inline(always)]
    unsafe fn add(self, sum: f32, value: f32, _emb: i64) -> f32 {
        sum + value
    }
}

/// Per-sample bf16 weights (bit patterns, one per lookup): `fma(w[emb], value, sum)`, the one
/// fused multiply-add nvcc contracts eager's `acc += w * x` to.
#[derive(Clone, Copy)]
pub(crate) struct PerSampleBf16(pub(crate) *const u16);

impl BagWeights for PerSampleBf16 {
    #[inline(always)]
    unsafe fn add(self, sum: f32, value: f32, emb: i64) -> f32 {
        let scale = bf16_to_f32(*self.0.add(emb as usize));
        fma_f32(scale, value, sum)
    }
}

/// The whole body of an eager-port bag kernel:
/// `eager_bag_sum!(indices, offsets, weight, out, offset2bag, num_indices, num_bags,
/// feature_size, bag_size, weights, padding_idx, num_rows)`, with `weight` and `out` pointers to
/// a [`BagElem`] and `weights` a [`BagWeights`]. Launch: block (32, 8, 1), a grid-stride loop
/// over (bag, 32-column chunk); one thread per (bag, column) sums its column over the bag's
/// lookups in f32 and writes `out`, plus eager's side outputs `offset2bag` [N] and `bag_size`
/// [B]. `padding_idx` lookups add 0 and do not count in `bag_size`; an index at or past
/// `num_rows` traps (`CUDA_KERNEL_ASSERT(input[emb] < numRows)`).
///
/// A macro, not an `#[inline(always)]` generic function: rustc's MIR inliner leaves a body this
/// large to LLVM, which then optimises the loop once on its own and again inside the kernel, and
/// the kernels' PTX changed (the padding select became a branch around the row load in one
/// kernel and the reverse in the other). Expanded in each kernel's body, the PTX is the same as
/// when the loop was written out twice.
macro_rules! eager_bag_sum {
    (
        $indices:expr,
        $offsets:expr,
        $weight:expr,
        $out:expr,
        $offset2bag:expr,
        $num_indices:expr,
        $num_bags:expr,
        $feature_size:expr,
        $bag_size:expr,
        $weights:expr,
        $padding_idx:expr,
        $num_rows:expr $(,)?
    ) => {{
        use $crate::dev::*;
        use $crate::kernels::eager_bag::{BagElem, BagWeights};
        let indices: *const i64 = $indices;
        let offsets: *const i64 = $offsets;
        let weight = $weight;
        let out = $out;
        let offset2bag: *mut i64 = $offset2bag;
        let num_indices: i64 = $num_indices;
        let num_bags: i64 = $num_bags;
        let feature_size: i64 = $feature_size;
        let bag_size: *mut i64 = $bag_size;
        let weights = $weights;
        let padding_idx: i64 = $padding_idx;
        let num_rows: i64 = $num_rows;
        let chunks_per_bag = (feature_size + block_dim_x() as i64 - 1) / block_dim_x() as i64;
        let num_chunks = num_bags * chunks_per_bag;
        let mut chunk = (block_idx_x() * block_dim_y() + thread_idx_y()) as i64;
        let stride = (grid_dim_x() * block_dim_y()) as i64;
        while chunk < num_chunks {
            let feature = (chunk % chunks_per_bag) * block_dim_x() as i64 + thread_idx_x() as i64;
            if feature < feature_size {
                let bag = chunk / chunks_per_bag;
                let column = weight.add(feature as usize);
                let begin = if bag == 0 {
                    0
                } else {
                    *offsets.add(bag as usize)
                };
                let end = if bag < num_bags - 1 {
                    *offsets.add(bag as usize + 1)
                } else {
                    num_indices
                };
                let mut sum = 0.0f32;
                let mut size = 0i64;
                let mut emb = begin;
                while emb < end {
                    let pad = *indices.add(emb as usize) == padding_idx;
                    // CUDA_KERNEL_ASSERT(input[emb] < numRows). Eager's SASS reads the index
                    // again after its assert (one more load per lookup in Nsight Compute);
                    // forcing that reload here made this kernel 15–27% slower than eager's on an
                    // H200 (20261203T082349Z-gpu-full), so the check alone is ported.
                    device_assert(*indices.add(emb as usize) < num_rows);
                    let row = *indices.add(emb as usize) * feature_size;
                    let loaded = BagElem::widen(*column.add(row as usize));
                    let value = if pad { 0.0 } else { loaded };
                    sum = BagWeights::add(weights, sum, value, emb);
                    size += if pad { 0 } else { 1 };
                    if feature == 0 {
                        *offset2bag.add(emb as usize) = bag;
                    }
                    emb += 1;
                }
                *bag_size.add(bag as usize) = size;
                *out.add((bag * feature_size + feature) as usize) = BagElem::narrow(sum);
            }
            chunk += stride;
        }
    }};
}
pub(crate) use eager_bag_sum;
