//! Ports of the generic ATen CUDA kernels that eager PyTorch launches for the sparse-lookup
//! problems' `Model`s (elementwise arithmetic, casts, `arange`, `where`, `masked_fill_`,
//! advanced-indexing gathers, `scatter_`, the vectorized row gather behind `index_select` /
//! `F.embedding`), so that a reference plan is the eager op sequence launch for launch.
//!
//! Launch shapes follow ATen:
//! * TensorIterator kernels (`gpu_kernel`, the `index` kernel, `scatter_`/`gather`'s
//!   elementwise kernel): block [`EW_THREADS`] (128), each thread [`EW_ITEMS`] (4) elements at
//!   a stride of 128 inside the block's [`EW_BLOCK_ITEMS`] (512), all loads before the stores;
//!   grid `max(ceil_div(n, 512), 1)`.
//! * [`aten_gather_rows16`]: ATen's `vectorized_gather_kernel<16>` (what `index_select` on
//!   dim 0, hence `F.embedding`, runs for more than 16 indices when rows are 16-byte aligned):
//!   one block per selected row, 16 bytes per thread.
//! * Grid-stride kernels (`CUDA_KERNEL_LOOP`) take any grid; the plans use ATen's.
//!
//! Booleans are bytes (0 or 1), as `torch.bool` is.
use crate::dev::*;

/// Threads per block of the TensorIterator-style kernels (`num_threads()`).
pub const EW_THREADS: usize = 128;
/// Elements per thread (`thread_work_size()`).
pub const EW_ITEMS: usize = 4;
/// Elements per block.
pub const EW_BLOCK_ITEMS: usize = EW_THREADS * EW_ITEMS;

/// Repeats `$body` with `$i` bound to each literal: an unrolled loop (the per-thread arrays
/// stay in registers).
macro_rules! unrolled4 {
    ($i:ident $body:block) => {{
        let $i: usize = 0;
        $body
    }
    {
        let $i: usize = 1;
        $body
    }
    {
        let $i: usize = 2;
        $body
    }
    {
        let $i: usize = 3;
        $body
    }};
}

/// The TensorIterator loop: each thread loads its (up to) 4 elements, then computes and stores
/// them. `load(i)` and `op(i, loaded)` see only `i < n`.
#[inline(always)]
pub(crate) unsafe fn ew4<T: Copy + Default, U>(
    n: i64,
    load: impl Fn(usize) -> T,
    op: impl Fn(usize, T) -> U,
    store: impl Fn(usize, U),
) {
    ew4_block(block_idx_x() as usize, n, load, op, store);
}

/// [`ew4`] as block `block` of its launch runs it (for [`for_each_block`]).
#[inline(always)]
pub(crate) unsafe fn ew4_block<T: Copy + Default, U>(
    block: usize,
    n: i64,
    load: impl Fn(usize) -> T,
    op: impl Fn(usize, T) -> U,
    store: impl Fn(usize, U),
) {
    let base = block * EW_BLOCK_ITEMS + thread_idx_x() as usize;
    let mut v = [T::default(); EW_ITEMS];
    unrolled4!(k {
        let i = base + k * EW_THREADS;
        if (i as i64) < n {
            v[k] = load(i);
        }
    });
    unrolled4!(k {
        let i = base + k * EW_THREADS;
        if (i as i64) < n {
            store(i, op(i, v[k]));
        }
    });
}

/// Runs `body(b)` for every block `b` of a launch of `ceil_div(n, per_block)` blocks on
/// whatever grid this launch has: this block's index, then every `gridDim.x` after it. The
/// kernels whose size is known only on the device (problem 5's U-sized tail) run on a grid the
/// plan caps, so that no block starts only to find nothing to do; with a grid of at least
/// `ceil_div(n, per_block)` blocks it is the launch itself. `n ≤ 0` runs nothing.
#[inline(always)]
pub(crate) fn for_each_block(n: i64, per_block: usize, mut body: impl FnMut(usize)) {
    let blocks = if n > 0 {
        (n as usize).div_ceil(per_block)
    } else {
        0
    };
    let mut b = block_idx_x() as usize;
    while b < blocks {
        body(b);
        b += grid_dim_x() as usize;
    }
}

/// Python's floor division of integers (`c10::div_floor_integer`).
#[inline(always)]
pub fn div_floor_i64(a: i64, b: i64) -> i64 {
    let q = a / b;
    if (a < 0) != (b < 0) && q * b != a {
        q - 1
    } else {
        q
    }
}

/// Python's remainder of integers (the sign of the divisor), as `torch.remainder`.
#[inline(always)]
pub fn remainder_i64(a: i64, b: i64) -> i64 {
    let r = a % b;
    if r != 0 && ((r < 0) != (b < 0)) {
        r + b
    } else {
        r
    }
}

/// ATen's `launch_legacy_kernel` loop (`elementwise_kernel<NT, VT>`, `index_elementwise_kernel<NT,
/// VT>`, `_scatter_gather_elementwise_kernel<NT, VT>`): thread `t` of block `b` runs `f` on
/// elements `b·NT·VT + t + k·NT`, k < VT, one after the other — each element's loads, then its
/// store, before the next element's loads (the data go through `char*` pointers, so the
/// compiler cannot hoist a later element's loads above an earlier store). Launch: block NT,
/// grid `ceil_div(n, NT·VT)`.
#[inline(always)]
pub(crate) unsafe fn legacy_loop<const NT: usize, const VT: usize>(n: i64, f: impl Fn(usize)) {
    legacy_loop_block::<NT, VT>(block_idx_x() as usize, n, f);
}

/// [`legacy_loop`] as block `block` of its launch runs it (for [`for_each_block`]).
#[inline(always)]
pub(crate) unsafe fn legacy_loop_block<const NT: usize, const VT: usize>(
    block: usize,
    n: i64,
    f: impl Fn(usize),
) {
    let mut idx = block * NT * VT + thread_idx_x() as usize;
    let mut k = 0;
    while k < VT {
        if (idx as i64) < n {
            f(idx);
            idx += NT;
        }
        k += 1;
    }
}

/// ATen's `IntDivider<uint32_t>`: `n / d` for `n < 2^31` as `(mulhi(n, m1) + n) >> shift`.
#[derive(Clone, Copy)]
pub struct IntDivider {
    pub(crate) m1: u32,
    pub(crate) shift: u32,
    pub(crate) divisor: u32,
}

impl IntDivider {
    /// The divider of `d` (1 ≤ d < 2^31).
    #[inline(always)]
    pub fn new(d: u32) -> Self {
        let mut shift = 0;
        while shift < 32 && (1u64 << shift) < d as u64 {
            shift += 1;
        }
        let magic = ((1u64 << 32) * ((1u64 << shift) - d as u64)) / d as u64 + 1;
        IntDivider {
            m1: magic as u32,
            shift,
            divisor: d,
        }
    }

    /// `n / d` for `n < 2^31`.
    #[inline(always)]
    pub fn divide(self, n: u32) -> u32 {
        let t = ((n as u64 * self.m1 as u64) >> 32) as u32;
        t.wrapping_add(n) >> self.shift
    }

    /// `(n / d, n % d)` (`IntDivider::divmod`: the remainder as `n - q·d`).
    #[inline(always)]
    pub fn divmod(self, n: u32) -> (u32, u32) {
        let q = self.divide(n);
        (q, n.wrapping_sub(q.wrapping_mul(self.divisor)))
    }
}

/// The dividers of `d0` and `d1`, built by thread 0 and shared through the block (ends with a
/// barrier). ATen builds an `OffsetCalculator`'s dividers on the host and passes them as kernel
/// parameters; a plan can pass only sizes, so thread 0 of each block builds them here.
#[inline(always)]
pub(crate) unsafe fn block_dividers(d0: u32, d1: u32) -> (IntDivider, IntDivider) {
    let shared = crate::static_shared!(ATEN_OFFSET_DIVIDERS: [u32; 4]);
    if thread_idx_x() == 0 {
        let (a, b) = (IntDivider::new(d0), IntDivider::new(d1));
        *shared = a.m1;
        *shared.add(1) = a.shift;
        *shared.add(2) = b.m1;
        *shared.add(3) = b.shift;
    }
    sync_threads();
    (
        IntDivider {
            m1: *shared,
            shift: *shared.add(1),
            divisor: d0,
        },
        IntDivider {
            m1: *shared.add(2),
            shift: *shared.add(3),
            divisor: d1,
        },
    )
}

/// ATen's 2-D `OffsetCalculator` over sizes `(d0, d1)` (dim 0 fastest): the coordinates of
/// linear element `i`, `(i % d0, (i / d0) % d1)`, two `divmod`s.
#[inline(always)]
pub(crate) fn offsets_2d(div: (IntDivider, IntDivider), i: u32) -> (u32, u32) {
    let (q0, r0) = div.0.divmod(i);
    let (_, r1) = div.1.divmod(q0);
    (r0, r1)
}

kernel! {
    /// `torch.arange(start, n·step, step)` on int64 as ATen runs it (`elementwise_kernel_with_index`
    /// of RangeFactories.cu): 64 threads per block, one element per thread, `out[i] = start +
    /// step·i` in the accumulate type (int64), an `int` index. Launch: grid `ceil_div(n, 64)`,
    /// block 64 (`n < 2^31`).
    pub unsafe fn aten_arange_with_index_i64(out: *mut i64, start: i64, step: i64, n: i64) {
        let idx = (64 * block_idx_x() + thread_idx_x()) as i32;
        if (idx as i64) < n {
            *out.add(idx as usize) = start.wrapping_add(step.wrapping_mul(idx as i64));
        }
    }
}

/// `src[idx]` element `i` as ATen's `gpu_index_kernel` does it: the int64 index read, checked
/// against the indexed dimension's `size` (`CUDA_KERNEL_ASSERT(index >= -size && index <
/// size)`; an index outside leaves the element unwritten here instead of trapping), wrapped when
/// negative, scaled by the byte stride, then the opaque element copy.
#[inline(always)]
unsafe fn index_element<T: Copy>(out: *mut T, src: *const T, idx: *const i64, size: i64, i: usize) {
    let mut j = *idx.add(i);
    if j >= -size && j < size {
        if j < 0 {
            j += size;
        }
        let offset = j * core::mem::size_of::<T>() as i64;
        *out.add(i) = *((src as *const u8).offset(offset as isize) as *const T);
    }
}

kernel! {
    /// `src[idx]` on 1-D int64 data with an int64 index as ATen runs it:
    /// `index_elementwise_kernel<128, 4>` of `gpu_index_kernel` (`index_kernel_impl<OpaqueType<8>>`),
    /// one element after the other per thread ([`legacy_loop`]); `size` is `src`'s length.
    /// Launch: grid `ceil_div(n, 512)`, block 128.
    pub unsafe fn aten_index_elementwise_i64(out: *mut i64, src: *const i64, idx: *const i64, n: i64, size: i64) {
        legacy_loop::<128, 4>(n, |i| index_element(out, src, idx, size, i));
    }
}

kernel! {
    /// [`aten_index_elementwise_i64`] on f32 data (`index_kernel_impl<OpaqueType<4>>`).
    pub unsafe fn aten_index_elementwise_f32(out: *mut f32, src: *const f32, idx: *const i64, n: i64, size: i64) {
        legacy_loop::<128, 4>(n, |i| index_element(out, src, idx, size, i));
    }
}

kernel! {
    /// `src.index_select(0, idx)` on 1-D int64 data with an int32 index as ATen runs it for
    /// `repeat_interleave`: `_scatter_gather_elementwise_kernel<128, 8>` of
    /// `_cuda_scatter_gather_internal_kernel<false, OpaqueType<8>, int>` — per element, one after
    /// the other, the index read and checked (`CUDA_KERNEL_ASSERT(idx >= 0 && idx < size)`; an
    /// index outside leaves the element unwritten here), then the copy `out[i] =
    /// src[idx[i]]`. Launch: grid `ceil_div(n, 1024)`, block 128.
    pub unsafe fn aten_gather_elementwise_i64_by_i32(out: *mut i64, src: *const i64, idx: *const i32, n: i64, size: i64) {
        legacy_loop::<128, 8>(n, |i| {
            let j = *idx.add(i) as i64;
            if j >= 0 && j < size {
                *out.add(i) = *((src as *const u8).offset((j * 8) as isize) as *const i64);
            }
        });
    }
}

kernel! {
    /// `torch.arange(n)` (int64): `out[i] = i`.
    pub unsafe fn aten_arange_i64(out: *mut i64, n: i64) {
        ew4(n, |_| (), |i, ()| i as i64, |i, v| *out.add(i) = v);
    }
}

kernel! {
    /// `a.to(torch.int64)` from int32 (the copy `cumsum` makes of an int32 input).
    pub unsafe fn aten_cast_i32_to_i64(out: *mut i64, a: *const i32, n: i64) {
        ew4(n, |i| *a.add(i), |_, x| x as i64, |i, v| *out.add(i) = v);
    }
}

kernel! {
    /// `a.to(torch.int32)` from int64 (wrapping, as a C cast).
    pub unsafe fn aten_cast_i64_to_i32(out: *mut i32, a: *const i64, n: i64) {
        ew4(n, |i| *a.add(i), |_, x| x as i32, |i, v| *out.add(i) = v);
    }
}

/// A binary elementwise kernel `out[i] = f(a[i], b[i])`.
macro_rules! binary_kernel {
    ($(#[$m:meta])* $name:ident($a:ty, $b:ty) -> $out:ty, |$x:ident, $y:ident| $e:expr) => {
        kernel! {
            $(#[$m])*
            pub unsafe fn $name(out: *mut $out, a: *const $a, b: *const $b, n: i64) {
                ew4(n, |i| (*a.add(i), *b.add(i)), |_, ($x, $y): ($a, $b)| -> $out { $e },
                    |i, v| *out.add(i) = v);
            }
        }
    };
}

/// An elementwise kernel with a scalar operand `out[i] = f(a[i], s)`.
macro_rules! scalar_kernel {
    ($(#[$m:meta])* $name:ident($a:ty, $s:ty) -> $out:ty, |$x:ident, $y:ident| $e:expr) => {
        kernel! {
            $(#[$m])*
            pub unsafe fn $name(out: *mut $out, a: *const $a, s: $s, n: i64) {
                ew4(n, |i| *a.add(i), |_, $x: $a| -> $out { let $y = s; $e },
                    |i, v| *out.add(i) = v);
            }
        }
    };
}

binary_kernel! {
    /// `a - b` (int64).
    aten_sub_i64(i64, i64) -> i64, |x, y| x.wrapping_sub(y)
}
binary_kernel! {
    /// `a - b` with `a` int64 and `b` int32 (promoted to int64).
    aten_sub_i64_i32(i64, i32) -> i64, |x, y| x.wrapping_sub(y as i64)
}
binary_kernel! {
    /// `a + b` (int64); `out` may be `a` (`a += b`).
    aten_add_i64(i64, i64) -> i64, |x, y| x.wrapping_add(y)
}
binary_kernel! {
    /// `a + b` with `a` int64 and `b` int32 (promoted to int64).
    aten_add_i64_i32(i64, i32) -> i64, |x, y| x.wrapping_add(y as i64)
}
binary_kernel! {
    /// `a * b` (int64).
    aten_mul_i64(i64, i64) -> i64, |x, y| x.wrapping_mul(y)
}
binary_kernel! {
    /// `a // b` (int64, Python floor division; `b` must not be 0).
    aten_floor_divide_i64(i64, i64) -> i64, |x, y| div_floor_i64(x, y)
}
scalar_kernel! {
    /// `a * s` (int64 tensor, Python int).
    aten_mul_scalar_i64(i64, i64) -> i64, |x, s| x.wrapping_mul(s)
}
scalar_kernel! {
    /// `a // s` (int64 tensor, Python int `s != 0`).
    aten_floor_divide_scalar_i64(i64, i64) -> i64, |x, s| div_floor_i64(x, s)
}
scalar_kernel! {
    /// `a // s` (int32 tensor, Python int `s != 0`; the result stays int32).
    aten_floor_divide_scalar_i32(i32, i32) -> i32, |x, s| div_floor_i64(x as i64, s as i64) as i32
}
scalar_kernel! {
    /// `a % s` (int64 tensor, Python int `s != 0`: `torch.remainder`).
    aten_remainder_scalar_i64(i64, i64) -> i64, |x, s| remainder_i64(x, s)
}
scalar_kernel! {
    /// `a < s` (int64 tensor, Python int) to bool.
    aten_lt_scalar_i64(i64, i64) -> u8, |x, s| (x < s) as u8
}

kernel! {
    /// `torch.where(cond, a, b)` (bool, int64, int64).
    pub unsafe fn aten_where_i64(out: *mut i64, cond: *const u8, a: *const i64, b: *const i64, n: i64) {
        ew4(n, |i| (*cond.add(i), *a.add(i), *b.add(i)),
            |_, (c, x, y): (u8, i64, i64)| if c != 0 { x } else { y }, |i, v| *out.add(i) = v);
    }
}

kernel! {
    /// `self.masked_fill_(mask, value)` on int64 with a same-shape bool mask.
    pub unsafe fn aten_masked_fill_i64(self_: *mut i64, mask: *const u8, value: i64, n: i64) {
        ew4(n, |i| (*self_.add(i), *mask.add(i)),
            |_, (x, m): (i64, u8)| if m != 0 { value } else { x }, |i, v| *self_.add(i) = v);
    }
}

kernel! {
    /// `src[idx]` on a 1-D int64 tensor with an int64 index tensor (ATen's `index` kernel):
    /// `out[i] = src[idx[i]]`.
    pub unsafe fn aten_index_i64(out: *mut i64, src: *const i64, idx: *const i64, n: i64) {
        ew4(n, |i| *idx.add(i), |_, j: i64| *src.add(j as usize), |i, v| *out.add(i) = v);
    }
}

kernel! {
    /// `src[idx]` on a 1-D f32 tensor with an int64 index tensor.
    pub unsafe fn aten_index_f32(out: *mut f32, src: *const f32, idx: *const i64, n: i64) {
        ew4(n, |i| *idx.add(i), |_, j: i64| *src.add(j as usize), |i, v| *out.add(i) = v);
    }
}

kernel! {
    /// `src[idx]` (or `src.index_select(0, idx)` through ATen's elementwise `gather` kernel,
    /// which has the same shape) on 1-D int64 data with an int32 index tensor.
    pub unsafe fn aten_index_i64_by_i32(out: *mut i64, src: *const i64, idx: *const i32, n: i64) {
        ew4(n, |i| *idx.add(i), |_, j: i32| *src.add(j as usize), |i, v| *out.add(i) = v);
    }
}

kernel! {
    /// `self.scatter_(0, idx, src)` on 1-D int64: `self[idx[i]] = src[i]` (ATen's elementwise
    /// scatter kernel). Grid-stride, so it also serves as `torch.unique`'s `scatter_kernel`
    /// (block 512, one element per thread).
    pub unsafe fn aten_scatter_i64(self_: *mut i64, idx: *const i64, src: *const i64, n: i64) {
        let stride = (grid_dim_x() * block_dim_x()) as usize;
        let mut i = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
        while (i as i64) < n {
            *self_.add(*idx.add(i) as usize) = *src.add(i);
            i += stride;
        }
    }
}

kernel! {
    /// `torch.zeros(n)` / `fill_(value)` on int64.
    pub unsafe fn aten_fill_i64(out: *mut i64, value: i64, n: i64) {
        ew4(n, |_| (), |_, ()| value, |i, v| *out.add(i) = v);
    }
}

kernel! {
    /// ATen's `vectorized_gather_kernel<16>` (`index_select(0, idx)` / `F.embedding` on rows
    /// of `slice_bytes`, a multiple of 16, with 16-byte-aligned rows): block `x` copies row
    /// `idx[x]` of `inp` to row `x` of `out`, 16 bytes per thread, the row split over
    /// `gridDim.y` blocks. Launch: grid (number of indices, min(ceil_div(slice_bytes, 4096),
    /// 65535)), block min(256, ceil_div(ceil_div(slice_bytes, 16), 32)·32).
    pub unsafe fn aten_gather_rows16(
        out: *mut u8,
        inp: *const u8,
        idx: *const i64,
        slice_bytes: i64,
        inp_stride_bytes: i64,
        out_stride_bytes: i64,
    ) {
        let row = block_idx_x() as usize;
        let ind = *idx.add(row);
        let src = inp.offset((ind * inp_stride_bytes) as isize);
        let dst = out.add(row * out_stride_bytes as usize);
        let step = (block_dim_x() * grid_dim_y()) as i64 * 16;
        let mut off = (block_dim_x() * block_idx_y() + thread_idx_x()) as i64 * 16;
        while off < slice_bytes {
            let v = load_f32x4(src.add(off as usize) as *const f32);
            store_f32x4(dst.add(off as usize) as *mut f32, v);
            off += step;
        }
    }
}

/// `op` 0: min, 1: max.
#[inline(always)]
fn min_or_max(op: u32, a: i64, b: i64) -> i64 {
    if op == 0 {
        a.min(b)
    } else {
        a.max(b)
    }
}

/// Reduction of one i64 per thread over the block (block of a multiple of 32 threads, at most
/// 1024); the result is valid in thread 0.
#[inline(always)]
unsafe fn block_min_max_i64(v: i64, op: u32) -> i64 {
    let partials = crate::static_shared!(ATEN_REDUCE_PARTIALS: [i64; 32]);
    let mut v = v;
    let mut off = WARP_SIZE / 2;
    while off > 0 {
        let lo = shfl_xor_u32(v as u64 as u32, off);
        let hi = shfl_xor_u32((v as u64 >> 32) as u32, off);
        v = min_or_max(op, v, ((hi as u64) << 32 | lo as u64) as i64);
        off /= 2;
    }
    if lane_id() == 0 {
        *partials.add(warp_id() as usize) = v;
    }
    sync_threads();
    let warps = block_threads().div_ceil(WARP_SIZE) as usize;
    if thread_idx_x() == 0 {
        for w in 1..warps {
            v = min_or_max(op, v, *partials.add(w));
        }
    }
    v
}

kernel! {
    /// First stage of `a.min()` (`op` 0) or `a.max()` (`op` 1) over int64: block `b` writes the
    /// reduction of its grid-stride share to `partials[b]`. Launch: grid
    /// `min(ceil_div(n, 2048), 1056)`, block 512 (`n >= 1`).
    pub unsafe fn aten_reduce_partial_i64(partials: *mut i64, a: *const i64, n: i64, op: u32) {
        let stride = (grid_dim_x() * block_dim_x()) as usize;
        let mut i = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
        let mut acc = if op == 0 { i64::MAX } else { i64::MIN };
        while (i as i64) < n {
            acc = min_or_max(op, acc, *a.add(i));
            i += stride;
        }
        let r = block_min_max_i64(acc, op);
        if thread_idx_x() == 0 {
            *partials.add(block_idx_x() as usize) = r;
        }
    }
}

kernel! {
    /// Second stage: reduces `count` partials into `out[0]`. Launch: grid 1, block 512.
    pub unsafe fn aten_reduce_final_i64(out: *mut i64, partials: *const i64, count: i64, op: u32) {
        let mut i = thread_idx_x() as i64;
        let mut acc = if op == 0 { i64::MAX } else { i64::MIN };
        while i < count {
            acc = min_or_max(op, acc, *partials.add(i as usize));
            i += block_dim_x() as i64;
        }
        let r = block_min_max_i64(acc, op);
        if thread_idx_x() == 0 {
            *out = r;
        }
    }
}

kernel! {
    /// `torch.bincount`'s histogram with global-memory atomics (ATen's `kernelHistogram1D`,
    /// `GLOBAL` memory type, used above 1000 bins): for each `v = a[i]` in `[minvalue,
    /// maxvalue]`, bin `(v - minvalue)·nbins / (maxvalue - minvalue)` (the last bin closed) gets
    /// +1 (int64 counts). Grid-stride; launch: grid `ceil_div(n, 512)`, block 512.
    pub unsafe fn aten_histogram_i64(counts: *mut u64, a: *const i64, n: i64, nbins: i64, minvalue: i64, maxvalue: i64) {
        let stride = (grid_dim_x() * block_dim_x()) as usize;
        let mut i = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
        while (i as i64) < n {
            let v = *a.add(i);
            if v >= minvalue && v <= maxvalue {
                let mut bin = ((v - minvalue).wrapping_mul(nbins) / (maxvalue - minvalue)) as i32 as i64;
                if bin == nbins {
                    bin -= 1;
                }
                atomic_add_u64(counts.add(bin as usize), 1);
            }
            i += stride;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::emu::EmuLaunch;

    /// A launch of a TensorIterator-style kernel over `n` elements (arguments still to add).
    pub(crate) fn ew(n: usize) -> EmuLaunch {
        EmuLaunch::new(n.div_ceil(EW_BLOCK_ITEMS).max(1) as u32, EW_THREADS as u32)
    }

    #[test]
    fn python_integer_division_semantics() {
        for (a, b, q, r) in [
            (7i64, 2i64, 3i64, 1i64),
            (-7, 2, -4, 1),
            (7, -2, -4, -1),
            (-7, -2, 3, -1),
            (6, 3, 2, 0),
            (-6, 3, -2, 0),
        ] {
            assert_eq!(
                (div_floor_i64(a, b), remainder_i64(a, b)),
                (q, r),
                "{a} {b}"
            );
        }
    }

    #[test]
    fn elementwise_kernels_cover_every_element_once() {
        let n = 1300; // 3 blocks, the last partial
        let a: Vec<i64> = (0..n as i64).map(|i| i * 37 - 20000).collect();
        let b: Vec<i64> = (0..n as i64).map(|i| (i % 13) + 1).collect();
        let b32: Vec<i32> = b.iter().map(|&x| x as i32).collect();
        let mut out = vec![i64::MIN; n];
        unsafe {
            ew(n)
                .ptr_mut(&mut out)
                .ptr(&a)
                .ptr(&b)
                .arg(n)
                .run(&aten_floor_divide_i64::EMU)
        };
        assert!(out
            .iter()
            .zip(a.iter().zip(&b))
            .all(|(&o, (&x, &y))| o == div_floor_i64(x, y)));
        unsafe {
            ew(n)
                .ptr_mut(&mut out)
                .ptr(&a)
                .ptr(&b32)
                .arg(n)
                .run(&aten_sub_i64_i32::EMU)
        };
        assert!(out
            .iter()
            .zip(a.iter().zip(&b))
            .all(|(&o, (&x, &y))| o == x - y));
        unsafe {
            ew(n)
                .ptr_mut(&mut out)
                .ptr(&a)
                .arg(7)
                .arg(n)
                .run(&aten_remainder_scalar_i64::EMU)
        };
        assert!(out.iter().zip(&a).all(|(&o, &x)| o == x.rem_euclid(7)));
        let mut flags = vec![9u8; n];
        unsafe {
            ew(n)
                .ptr_mut(&mut flags)
                .ptr(&a)
                .arg(0)
                .arg(n)
                .run(&aten_lt_scalar_i64::EMU)
        };
        assert!(flags.iter().zip(&a).all(|(&f, &x)| f == (x < 0) as u8));
        unsafe {
            ew(n)
                .ptr_mut(&mut out)
                .ptr(&flags)
                .ptr(&a)
                .ptr(&b)
                .arg(n)
                .run(&aten_where_i64::EMU)
        };
        assert!((0..n).all(|i| out[i] == if a[i] < 0 { a[i] } else { b[i] }));
        unsafe { ew(n).ptr_mut(&mut out).arg(n).run(&aten_arange_i64::EMU) };
        assert!(out.iter().enumerate().all(|(i, &o)| o == i as i64));
        let mut gathered = vec![0i64; n];
        let idx: Vec<i64> = (0..n as i64).map(|i| (i * 7) % n as i64).collect();
        unsafe {
            ew(n)
                .ptr_mut(&mut gathered)
                .ptr(&a)
                .ptr(&idx)
                .arg(n)
                .run(&aten_index_i64::EMU)
        };
        assert!((0..n).all(|i| gathered[i] == a[idx[i] as usize]));
        let mut scattered = vec![0i64; n];
        unsafe {
            ew(n)
                .ptr_mut(&mut scattered)
                .ptr(&idx)
                .ptr(&a)
                .arg(n)
                .run(&aten_scatter_i64::EMU)
        };
        assert!((0..n).all(|i| scattered[idx[i] as usize] == a[i]));
    }

    /// A launch of a `legacy_loop::<128, VT>` kernel over `n` elements (arguments still to add).
    fn legacy(n: usize, vt: usize) -> EmuLaunch {
        EmuLaunch::new(n.div_ceil(128 * vt).max(1) as u32, 128)
    }

    #[test]
    fn aten_shaped_arange_and_gathers_match_their_definitions() {
        let n = 2500; // not a multiple of 64, 512 or 1024
        let mut out = vec![0i64; n];
        unsafe {
            EmuLaunch::new(n.div_ceil(64) as u32, 64)
                .ptr_mut(&mut out)
                .arg(-7i64)
                .arg(3)
                .arg(n)
                .run(&aten_arange_with_index_i64::EMU);
        }
        assert!(out.iter().enumerate().all(|(i, &o)| o == -7 + 3 * i as i64));
        let size = 777usize;
        let src: Vec<i64> = (0..size as i64).map(|i| i * 1_000_003 - 5).collect();
        let srcf: Vec<f32> = (0..size).map(|i| i as f32 * 0.25 - 3.0).collect();
        // Indices in range, negative (counted from the end), and two outside (left unwritten).
        let mut idx: Vec<i64> = (0..n as i64)
            .map(|i| (i * 13) % (2 * size as i64) - size as i64)
            .collect();
        idx[5] = size as i64;
        idx[n - 1] = -(size as i64) - 1;
        let wrap = |j: i64| if j < 0 { j + size as i64 } else { j } as usize;
        let mut gathered = vec![i64::MIN; n];
        unsafe {
            legacy(n, 4)
                .ptr_mut(&mut gathered)
                .ptr(&src)
                .ptr(&idx)
                .arg(n)
                .arg(size)
                .run(&aten_index_elementwise_i64::EMU)
        };
        let mut gf = vec![f32::NAN; n];
        unsafe {
            legacy(n, 4)
                .ptr_mut(&mut gf)
                .ptr(&srcf)
                .ptr(&idx)
                .arg(n)
                .arg(size)
                .run(&aten_index_elementwise_f32::EMU)
        };
        for i in 0..n {
            if i == 5 || i == n - 1 {
                assert_eq!(gathered[i], i64::MIN, "{i}: out of range, unwritten");
                assert!(gf[i].is_nan());
            } else {
                assert_eq!(gathered[i], src[wrap(idx[i])], "{i}");
                assert_eq!(gf[i], srcf[wrap(idx[i])], "{i}");
            }
        }
        let mut idx32: Vec<i32> = (0..n as i32).map(|i| (i * 29) % size as i32).collect();
        idx32[7] = -1;
        idx32[8] = size as i32;
        let mut g = vec![i64::MIN; n];
        unsafe {
            legacy(n, 8)
                .ptr_mut(&mut g)
                .ptr(&src)
                .ptr(&idx32)
                .arg(n)
                .arg(size)
                .run(&aten_gather_elementwise_i64_by_i32::EMU)
        };
        for i in 0..n {
            let want = if i == 7 || i == 8 {
                i64::MIN
            } else {
                src[idx32[i] as usize]
            };
            assert_eq!(g[i], want, "{i}");
        }
    }

    #[test]
    fn min_max_reduction_and_bincount_histogram() {
        let n = 5000usize;
        let a: Vec<i64> = (0..n as i64).map(|i| (i * 7919) % 3001 - 1000).collect();
        for (op, expect) in [
            (0u32, *a.iter().min().unwrap()),
            (1, *a.iter().max().unwrap()),
        ] {
            let grid = n.div_ceil(2048);
            let mut partials = vec![0i64; grid];
            let mut out = [0i64];
            unsafe {
                EmuLaunch::new(grid as u32, 512)
                    .ptr_mut(&mut partials)
                    .ptr(&a)
                    .arg(n)
                    .arg(op)
                    .run(&aten_reduce_partial_i64::EMU);
                EmuLaunch::new(1, 512)
                    .ptr_mut(&mut out)
                    .ptr(&partials)
                    .arg(grid)
                    .arg(op)
                    .run(&aten_reduce_final_i64::EMU);
            }
            assert_eq!(out[0], expect, "op {op}");
        }
        // bincount of non-negative keys: minvalue 0, maxvalue = nbins.
        let keys: Vec<i64> = (0..n as i64).map(|i| (i * i) % 1500).collect();
        let nbins = 1600i64;
        let mut counts = vec![0u64; nbins as usize];
        unsafe {
            EmuLaunch::new(n.div_ceil(512) as u32, 512)
                .ptr_mut(&mut counts)
                .ptr(&keys)
                .arg(n)
                .arg(nbins)
                .arg(0)
                .arg(nbins)
                .run(&aten_histogram_i64::EMU);
        }
        let mut expect = vec![0u64; nbins as usize];
        for &k in &keys {
            expect[k as usize] += 1;
        }
        assert_eq!(counts, expect);
    }

    #[test]
    fn gather_rows16_copies_whole_rows_bit_for_bit() {
        // 48-byte rows (3 vectors: one block of 32 threads, 29 idle), bf16 bit patterns that
        // include NaN payloads: a copy must not touch them.
        let rows = 9usize;
        let row_bytes = 48usize;
        // u128 storage: 16-byte aligned like device memory.
        let mut table = vec![0u128; rows * row_bytes / 16];
        let bits = |v: &mut [u128]| unsafe {
            std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u16, v.len() * 8)
        };
        for (i, h) in bits(&mut table).iter_mut().enumerate() {
            *h = (i as u16).wrapping_mul(40503) | 0x7f81;
        }
        let idx: Vec<i64> = vec![3, 3, 0, 8, 5];
        let mut out = vec![0u128; idx.len() * row_bytes / 16];
        unsafe {
            EmuLaunch::new(idx.len() as u32, 32)
                .ptr_mut(&mut out)
                .ptr(&table)
                .ptr(&idx)
                .arg(row_bytes)
                .arg(row_bytes)
                .arg(row_bytes)
                .run(&aten_gather_rows16::EMU);
        }
        let w = row_bytes / 2;
        let (out, table) = (bits(&mut out).to_vec(), bits(&mut table).to_vec());
        for (r, &i) in idx.iter().enumerate() {
            assert_eq!(
                &out[r * w..(r + 1) * w],
                &table[i as usize * w..(i as usize + 1) * w]
            );
        }
    }
}
