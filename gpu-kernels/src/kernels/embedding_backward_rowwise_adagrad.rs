//! Problem 5, `embedding_backward_rowwise_adagrad`: one training step of one table. For each
//! distinct row r looked up by the bags: g = Σ grad_output[b] over every lookup of r (bag b),
//! m[r] += mean(g²), W[r] -= lr·g / (sqrt(m[r]) + eps). Rows not looked up are left untouched.
//!
//! The reference is the eager `Model`'s launch sequence (35 launches, see the plan in
//! `bench-problems` `problems::embedding_backward_rowwise_adagrad`). This module holds the ATen
//! kernels that no other problem ports:
//! * `torch.repeat_interleave(arange(B), offsets[1:] - offsets[:-1])`: [`aten_offsets_diff_i64`]
//!   (`unrolled_elementwise_kernel<CUDAFunctor_add<long>>` of the two offset views),
//!   [`aten_repeat_interleave_i64`] (Repeat.cu's `compute_cuda_kernel<long>`) and
//!   [`aten_gather_elementwise_i64_by_i64`] (the `index_select` of the arange,
//!   `_scatter_gather_elementwise_kernel<128, 8>`);
//! * `grad.index_add_(0, inverse, src)` and `weight.index_add_(0, rows, src, alpha)`:
//!   [`aten_index_add_large_index_f32`] and [`aten_index_add_large_index_f32_counted`]
//!   (`indexFuncLargeIndex<float, long, unsigned, 2, 2, -2, true, ReduceAdd>`);
//! * the U-sized tail (`zeros`, `index_select`, `square`, `mean(1)`, `+`, `index_copy_`,
//!   `sqrt`, `+ eps`, the broadcast `/`): the `*_counted` kernels.
//!
//! The distinct count U is data-dependent. Eager reads it back (`torch.unique`'s `.item()`
//! sync) and sizes every later tensor and grid by it; a plan cannot sync, so U stays on the
//! device (`num_unique`, written by `unique_run_ends`), the buffers are sized by N, and every
//! `*_counted` kernel reads U from `count` and computes exactly the elements eager's kernel
//! computes, each of eager's blocks in turn ([`for_each_block`]) on a grid the plan caps at
//! one wave (an N-sized grid measured 0.8 ms of empty blocks at `full` on an H200: U ≈ N/15).
//! The grid-stride kernels (`index_add_`'s 8·SMs blocks) have eager's grid unchanged, and add
//! with `red.add.f32` as nvcc compiles ATen's `atomicAdd` whose result is unused.
//!
//! [`EMPTY`], [`home_slot`] and [`insert_key`] are the hash table of the earlier, hash-based
//! reference; the tuned candidate (`embedding_backward_rowwise_adagrad_tuned`) uses them.
use super::torch_ops::{
    block_dividers, ew4, ew4_block, for_each_block, legacy_loop, legacy_loop_block, offsets_2d,
    EW_BLOCK_ITEMS,
};
use crate::dev::*;

/// An empty hash-table slot (no row id is 2^64 − 1).
pub const EMPTY: u64 = u64::MAX;

/// Home slot of `key` in a table of `capacity` (< 2^32) slots: a multiplicative hash mapped to
/// the range by a multiply-shift.
#[inline(always)]
pub fn home_slot(key: u64, capacity: u64) -> u64 {
    let h = key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
    (h * capacity) >> 32
}

/// Puts `key` into the open-addressing table `keys` of `capacity` slots unless it is there
/// (linear probing from [`home_slot`], a 64-bit CAS per empty slot tried) and returns its slot.
/// `capacity` must exceed the distinct keys.
#[inline(always)]
pub unsafe fn insert_key(keys: *mut u64, key: u64, capacity: u64) -> u64 {
    let mut pos = home_slot(key, capacity);
    loop {
        let slot = keys.add(pos as usize);
        let seen = load_volatile_u64(slot);
        if seen == key {
            return pos;
        }
        if seen == EMPTY {
            let before = atomic_cas_u64(slot, EMPTY, key);
            if before == EMPTY || before == key {
                return pos;
            }
        }
        pos += 1;
        if pos == capacity {
            pos = 0;
        }
    }
}

kernel! {
    /// `offsets[1:] - offsets[:-1]` on int64 (`CUDAFunctor_add<long>` with alpha −1 through
    /// `unrolled_elementwise_kernel`: the views start 8 bytes apart, so not vectorized):
    /// `out[i] = offsets[i + 1] - offsets[i]`, 4 elements per thread, loads before stores.
    /// Launch: grid `max(ceil_div(n, 512), 1)`, block 128.
    pub unsafe fn aten_offsets_diff_i64(out: *mut i64, offsets: *const i64, n: i64) {
        ew4(n, |i| (*offsets.add(i + 1), *offsets.add(i)), |_, (a, b): (i64, i64)| a.wrapping_sub(b),
            |i, v| *out.add(i) = v);
    }
}

kernel! {
    /// `torch.repeat_interleave(repeats)` for int64 `repeats` of `size` entries whose inclusive
    /// sum is `cumsum` (Repeat.cu's `compute_cuda_kernel<long>`): `result[j] = i` for every `j`
    /// in `[cumsum[i] - repeats[i], cumsum[i])`, one warp per entry, grid-stride over entries.
    /// Launch: grid `min(ceil_div(size, 16), 2048)`, block 512.
    pub unsafe fn aten_repeat_interleave_i64(
        repeats: *const i64,
        cumsum: *const i64,
        result: *mut i64,
        size: i64,
        result_size: i64,
    ) {
        let _ = result_size; // ATen asserts it equals cumsum[size - 1]
        let idx = block_idx_x() as i64 * block_dim_x() as i64 + thread_idx_x() as i64;
        let stride = (block_dim_x() * grid_dim_x() / WARP_SIZE) as i64;
        let lane = idx % WARP_SIZE as i64;
        let mut i = idx / WARP_SIZE as i64;
        while i < size {
            let end = *cumsum.add(i as usize);
            let mut j = end - *repeats.add(i as usize) + lane;
            while j < end {
                *result.add(j as usize) = i;
                j += WARP_SIZE as i64;
            }
            i += stride;
        }
    }
}

kernel! {
    /// `src.index_select(0, idx)` on 1-D int64 data with an int64 index, as `repeat_interleave`
    /// runs it: `_scatter_gather_elementwise_kernel<128, 8>` of
    /// `_cuda_scatter_gather_internal_kernel<false, OpaqueType<8>, long>`, per element the index
    /// read and checked (`0 <= idx < size`; one outside leaves the element unwritten), then
    /// `out[i] = src[idx[i]]`. Launch: grid `max(ceil_div(n, 1024), 1)`, block 128. With `n = 0`
    /// thread 0 writes `out[0] = 0` (`out` holds at least one element): the N×D row gather that
    /// follows has a grid of max(N, 1) blocks and so reads a valid row (eager launches neither).
    pub unsafe fn aten_gather_elementwise_i64_by_i64(out: *mut i64, src: *const i64, idx: *const i64, n: i64, size: i64) {
        if n == 0 && block_idx_x() == 0 && thread_idx_x() == 0 {
            *out = 0;
        }
        legacy_loop::<128, 8>(n, |i| {
            let j = *idx.add(i);
            if j >= 0 && j < size {
                *out.add(i) = *((src as *const u8).offset((j * 8) as isize) as *const i64);
            }
        });
    }
}

/// The loop of ATen's `indexFuncLargeIndex<float, long, unsigned, 2, 2, -2, IndexIsMajor =
/// true, ReduceAdd>` over `num_indices` source rows of `slice` elements: grid-stride over the
/// source's elements with an `unsigned` index, per element `src_row = i / slice`, `col = i %
/// slice`, the destination row `idx[src_row]` (int64; one outside `0..dst_rows` is skipped where
/// ATen asserts), then `fastAtomicAdd(dst[row·slice + col], src[i]·alpha)` (a RED: its result is unused).
#[inline(always)]
unsafe fn index_add_large_index(
    dst: *mut f32,
    src: *const f32,
    idx: *const i64,
    num_indices: u32,
    slice: u32,
    dst_rows: i64,
    alpha: f32,
) {
    let total = num_indices.wrapping_mul(slice);
    let stride = grid_dim_x() * block_dim_x();
    let mut i = block_idx_x() * block_dim_x() + thread_idx_x();
    while i < total {
        let src_row = i / slice;
        let col = i % slice;
        let row = *idx.add(src_row as usize);
        if row >= 0 && row < dst_rows {
            let val = *src.add(i as usize) * alpha;
            red_add_f32(
                dst.add((row as u64 * slice as u64 + col as u64) as usize),
                val,
            );
        }
        i += stride;
    }
}

kernel! {
    /// `dst.index_add_(0, idx, src, alpha)` for `src` of `num_indices` rows of `slice` f32
    /// (ATen's `indexFuncLargeIndex<float, long, unsigned int, 2, 2, -2, true, ReduceAdd>`, the
    /// kernel `index_add_cuda_impl` picks when the source is large: one fp32 atomic add per
    /// source element). Launch: grid `min(ceil_div(num_indices·slice, 128), 8·SMs)` (1056 on
    /// the H200's 132 SMs), block `min(num_indices·slice, 128)`.
    pub unsafe fn aten_index_add_large_index_f32(
        dst: *mut f32,
        src: *const f32,
        idx: *const i64,
        num_indices: i64,
        slice: i64,
        dst_rows: i64,
        alpha: f32,
    ) {
        index_add_large_index(dst, src, idx, num_indices as u32, slice as u32, dst_rows, alpha);
    }
}

kernel! {
    /// [`aten_index_add_large_index_f32`] with the number of source rows read from `count`
    /// (U on the device). Launch: as eager's for U·slice ≥ 1056·128 elements, grid 1056, block
    /// 128.
    pub unsafe fn aten_index_add_large_index_f32_counted(
        dst: *mut f32,
        src: *const f32,
        idx: *const i64,
        count: *const i64,
        slice: i64,
        dst_rows: i64,
        alpha: f32,
    ) {
        index_add_large_index(dst, src, idx, *count as u32, slice as u32, dst_rows, alpha);
    }
}

kernel! {
    /// `torch.zeros(U, width)` (f32): `vectorized_elementwise_kernel<4, FillFunctor<float>>`
    /// over the `count·width` elements. Launch: grid `COUNTED_GRID` (capped), block 128 (eager's
    /// grid covers U·width; each of its blocks runs here in turn).
    pub unsafe fn aten_fill_f32_counted(out: *mut f32, value: f32, count: *const i64, width: i64) {
        let n = *count * width;
        for_each_block(n, EW_BLOCK_ITEMS, |b| {
            ew4_block(b, n, |_| (), |_, ()| value, |i, v| *out.add(i) = v)
        });
    }
}

kernel! {
    /// `src.index_select(0, idx)` on 1-D f32 data with an int64 index of `count` entries:
    /// `_scatter_gather_elementwise_kernel<128, 8>` of `_cuda_scatter_gather_internal_kernel<
    /// false, OpaqueType<4>, long>` (index read and checked, `0 <= idx < size`, then the copy).
    /// Launch: grid capped (`COUNTED_GRID`), block 128 (eager's covers U).
    pub unsafe fn aten_gather_elementwise_f32_counted(out: *mut f32, src: *const f32, idx: *const i64, count: *const i64, size: i64) {
        let n = *count;
        for_each_block(n, 1024, |b| {
            legacy_loop_block::<128, 8>(b, n, |i| {
                let j = *idx.add(i);
                if j >= 0 && j < size {
                    *out.add(i) = *((src as *const u8).offset((j * 4) as isize) as *const f32);
                }
            })
        });
    }
}

kernel! {
    /// `a.square()` (f32): `pow_tensor_scalar_kernel_impl` with exponent 2 (`x * x`) through
    /// `vectorized_elementwise_kernel<4>`, over `count·width` elements. Launch: grid capped
    /// (`COUNTED_GRID`), block 128.
    pub unsafe fn aten_square_f32_counted(out: *mut f32, a: *const f32, count: *const i64, width: i64) {
        let n = *count * width;
        for_each_block(n, EW_BLOCK_ITEMS, |b| {
            ew4_block(b, n, |i| *a.add(i), |_, x: f32| x * x, |i, v| *out.add(i) = v)
        });
    }
}

kernel! {
    /// `a.mean(dim=1)` of `count` contiguous f32 rows of `width`: ATen's `reduce_kernel<512, 1,
    /// ReduceOp<float, MeanOps<float, float, float, float>, unsigned, float, 4, 4>>`, block
    /// (32, 16): thread (x, y) of block b reduces row 16·b + y (one warp per row), its 4
    /// vector lanes accumulating elements 4x + k + 128j (`input_vectorized_thread_reduce_impl`),
    /// combined lane 0 to 3, then the warp's `shfl_down` tree (offsets 1, 2, 4, 8, 16), and lane
    /// 0 writes `sum · factor` (`MeanOps::project`, factor = U / (U·width) in float).
    /// Launch: grid capped (`COUNTED_GRID`), block (32, 16) (eager's grid covers U: each of
    /// its blocks runs here in turn).
    pub unsafe fn aten_mean_rows_f32_counted(out: *mut f32, a: *const f32, count: *const i64, width: i64) {
        let rows = *count;
        for_each_block(rows, block_dim_y() as usize, |b| mean_row(out, a, rows, width, b));
    }
}

/// Row `b·blockDim.y + threadIdx.y` of [`aten_mean_rows_f32_counted`], by one warp.
#[inline(always)]
unsafe fn mean_row(out: *mut f32, a: *const f32, rows: i64, width: i64, block: usize) {
    let row = (block as u32 * block_dim_y() + thread_idx_y()) as i64;
    if row >= rows {
        return; // warp-uniform: a warp is one row
    }
    let x = thread_idx_x() as i64;
    let base = a.add((row * width) as usize);
    let mut acc = [0.0f32; 4];
    let mut j = x * 4;
    while j + 3 < width {
        acc[0] += *base.add(j as usize);
        acc[1] += *base.add(j as usize + 1);
        acc[2] += *base.add(j as usize + 2);
        acc[3] += *base.add(j as usize + 3);
        j += 4 * WARP_SIZE as i64;
    }
    // The tail past the last whole vector goes to lane 0's accumulator 0.
    let tail = (width / 4) * 4 + x;
    if tail < width {
        acc[0] += *base.add(tail as usize);
    }
    let mut v = ((acc[0] + acc[1]) + acc[2]) + acc[3];
    let mut offset = 1;
    while offset < WARP_SIZE {
        v += shfl_down_f32(v, offset);
        offset <<= 1;
    }
    if x == 0 {
        let factor = rows as f32 / (rows * width) as f32;
        *out.add(row as usize) = v * factor;
    }
}

kernel! {
    /// `a + b` (f32, same shape, `count` elements): `vectorized_elementwise_kernel<4,
    /// CUDAFunctor_add<float>>`. Launch: grid capped (`COUNTED_GRID`), block 128.
    pub unsafe fn aten_add_f32_counted(out: *mut f32, a: *const f32, b: *const f32, count: *const i64) {
        let n = *count;
        for_each_block(n, EW_BLOCK_ITEMS, |k| {
            ew4_block(k, n, |i| (*a.add(i), *b.add(i)), |_, (x, y): (f32, f32)| x + y, |i, v| *out.add(i) = v)
        });
    }
}

kernel! {
    /// `self.index_copy_(0, idx, src)` on 1-D f32 with an int64 index of `count` entries:
    /// `index_elementwise_kernel<128, 4>` of `index_copy_kernel_impl<OpaqueType<4>>`, per
    /// element the index read and checked (`0 <= idx < size`; one outside is skipped where ATen
    /// asserts), then `self[idx[i]] = src[i]`. Launch: grid capped (`COUNTED_GRID`), block 128
    /// (eager's covers U).
    pub unsafe fn aten_index_copy_f32_counted(self_: *mut f32, idx: *const i64, src: *const f32, count: *const i64, size: i64) {
        let n = *count;
        for_each_block(n, 512, |b| {
            legacy_loop_block::<128, 4>(b, n, |i| {
                let j = *idx.add(i);
                if j >= 0 && j < size {
                    *self_.add(j as usize) = *src.add(i);
                }
            })
        });
    }
}

kernel! {
    /// `a.sqrt()` (f32, `count` elements, correctly rounded): `vectorized_elementwise_kernel<4,
    /// sqrt_kernel_cuda>`. Launch: grid capped (`COUNTED_GRID`), block 128.
    pub unsafe fn aten_sqrt_f32_counted(out: *mut f32, a: *const f32, count: *const i64) {
        let n = *count;
        for_each_block(n, EW_BLOCK_ITEMS, |b| {
            ew4_block(b, n, |i| *a.add(i), |_, x: f32| sqrt_f32(x), |i, v| *out.add(i) = v)
        });
    }
}

kernel! {
    /// `a + s` (f32 tensor, Python float, `count` elements): `vectorized_elementwise_kernel<4,
    /// CUDAFunctorOnSelf_add<float>>`. Launch: grid capped (`COUNTED_GRID`), block 128.
    pub unsafe fn aten_add_scalar_f32_counted(out: *mut f32, a: *const f32, s: f32, count: *const i64) {
        let n = *count;
        for_each_block(n, EW_BLOCK_ITEMS, |b| {
            ew4_block(b, n, |i| *a.add(i), |_, x: f32| x + s, |i, v| *out.add(i) = v)
        });
    }
}

kernel! {
    /// `a / b.unsqueeze(1)` for `a` [count, width] and `b` [count] (f32): the broadcast is not
    /// vectorizable, so ATen runs `elementwise_kernel<128, 2>` of `gpu_kernel_impl_nocast<
    /// BinaryFunctor<DivFunctor<float>>>`, per element one after the other the 2-D
    /// `OffsetCalculator`'s divmods (`(col, row)` of element i), the loads of `a[i]` and
    /// `b[row]`, the IEEE division and the store. Launch: grid capped (`COUNTED_GRID`), block
    /// 128 (eager's covers U·width; each of its blocks runs here in turn, the dividers built
    /// once per block, and a block with none of them leaves before that). Block 128 only: a
    /// block covers 256 elements.
    pub unsafe fn aten_div_rows_f32_counted(out: *mut f32, a: *const f32, b: *const f32, count: *const i64, width: i64) {
        let rows = *count;
        let n = rows * width;
        if block_idx_x() as i64 * 256 >= n {
            return; // block-uniform: a block past U·width leaves before the barrier
        }
        // The dividers end with a barrier, which every thread of the block reaches.
        let div = block_dividers(width as u32, rows as u32);
        for_each_block(n, 256, |k| {
            legacy_loop_block::<128, 2>(k, n, |i| {
                let (_, row) = offsets_2d(div, i as u32);
                *out.add(i) = *a.add(i) / *b.add(row as usize);
            })
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emu::EmuLaunch;

    fn cfg(grid: usize, block: [u32; 3]) -> EmuLaunch {
        EmuLaunch::new(grid.max(1) as u32, block)
    }

    #[test]
    fn repeat_interleave_of_the_offsets_gives_each_lookup_its_bag() {
        let offsets: Vec<i64> = vec![0, 0, 3, 4, 4, 9, 40];
        let b = offsets.len() - 1;
        let n = *offsets.last().unwrap() as usize;
        let mut repeats = vec![-1i64; b];
        unsafe {
            cfg(1, [128, 1, 1])
                .ptr_mut(&mut repeats)
                .ptr(&offsets)
                .arg(b)
                .run(&aten_offsets_diff_i64::EMU);
        }
        assert_eq!(repeats, vec![0, 3, 1, 0, 5, 31]);
        let cumsum: Vec<i64> = offsets[1..].to_vec();
        let mut rep = vec![-1i64; n];
        let range: Vec<i64> = (0..b as i64).map(|x| x * 10).collect();
        let mut bag = vec![-1i64; n];
        unsafe {
            cfg(1, [512, 1, 1])
                .ptr(&repeats)
                .ptr(&cumsum)
                .ptr_mut(&mut rep)
                .arg(b)
                .arg(n)
                .run(&aten_repeat_interleave_i64::EMU);
            cfg(1, [128, 1, 1])
                .ptr_mut(&mut bag)
                .ptr(&range)
                .ptr(&rep)
                .arg(n)
                .arg(b)
                .run(&aten_gather_elementwise_i64_by_i64::EMU);
        }
        let want: Vec<i64> = (0..b)
            .flat_map(|i| std::iter::repeat_n(i as i64, repeats[i] as usize))
            .collect();
        assert_eq!(rep, want);
        assert_eq!(bag, want.iter().map(|x| x * 10).collect::<Vec<_>>());
    }

    #[test]
    fn index_add_sums_every_source_row_into_its_destination() {
        // 7 source rows of D = 40 into 3 rows; a grid smaller than the elements (grid-stride).
        let d = 40usize;
        let idx: Vec<i64> = vec![2, 0, 2, 2, 1, 0, 2];
        let src: Vec<f32> = (0..idx.len() * d).map(|i| (i % 13) as f32 - 6.0).collect();
        let mut dst = vec![0.5f32; 3 * d];
        let count = [idx.len() as i64];
        unsafe {
            cfg(2, [128, 1, 1])
                .ptr_mut(&mut dst)
                .ptr(&src)
                .ptr(&idx)
                .ptr(&count)
                .arg(d)
                .arg(3)
                .arg(-0.25f32)
                .run(&aten_index_add_large_index_f32_counted::EMU);
        }
        for r in 0..3 {
            for c in 0..d {
                let sum: f32 = (0..idx.len())
                    .filter(|&s| idx[s] == r as i64)
                    .map(|s| src[s * d + c])
                    .sum();
                assert_eq!(dst[r * d + c], 0.5 - 0.25 * sum, "row {r} col {c}");
            }
        }
    }

    #[test]
    fn the_counted_tail_computes_the_first_count_rows_only() {
        // count = 23 rows of D = 40 in buffers of 40 rows (N-sized), grids sized by the 40, and
        // capped grids of one and two blocks (each block then runs several of eager's).
        for cap in [usize::MAX, 1, 2] {
            counted_tail_with_grid_cap(cap);
        }
    }

    fn counted_tail_with_grid_cap(cap: usize) {
        let grid = |blocks: usize| blocks.min(cap);
        let (d, n, u) = (40usize, 40usize, 23usize);
        let count = [u as i64];
        let g: Vec<f32> = (0..n * d)
            .map(|i| ((i * 7) % 19) as f32 / 8.0 - 1.0)
            .collect();
        let mut sq = vec![f32::NAN; n * d];
        let mut mean = vec![f32::NAN; n];
        let mut out = vec![f32::NAN; n * d];
        unsafe {
            let c = count.as_ptr() as u64;
            cfg(grid((n * d).div_ceil(512)), [128, 1, 1])
                .ptr_mut(&mut sq)
                .ptr(&g)
                .arg(c)
                .arg(d)
                .run(&aten_square_f32_counted::EMU);
            cfg(grid(n.div_ceil(16)), [32, 16, 1])
                .ptr_mut(&mut mean)
                .ptr(&sq)
                .arg(c)
                .arg(d)
                .run(&aten_mean_rows_f32_counted::EMU);
            cfg(grid((n * d).div_ceil(256)), [128, 1, 1])
                .ptr_mut(&mut out)
                .ptr(&g)
                .ptr(&mean)
                .arg(c)
                .arg(d)
                .run(&aten_div_rows_f32_counted::EMU);
        }
        for r in 0..n {
            let row = &g[r * d..(r + 1) * d];
            if r < u {
                let want = row.iter().map(|&x| (x as f64).powi(2)).sum::<f64>() / d as f64;
                assert!(
                    (mean[r] as f64 - want).abs() < 1e-6 * want,
                    "row {r}, cap {cap}"
                );
                for c in 0..d {
                    assert_eq!(out[r * d + c], row[c] / mean[r]);
                }
            } else {
                assert!(mean[r].is_nan() && out[r * d..(r + 1) * d].iter().all(|x| x.is_nan()));
                assert!(sq[r * d..(r + 1) * d].iter().all(|x| x.is_nan()));
            }
        }
    }
}
