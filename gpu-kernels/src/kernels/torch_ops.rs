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
    let base = block_idx_x() as usize * EW_BLOCK_ITEMS + thread_idx_x() as usize;
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
    use crate::emu::{launch_kernel, EmuKernel, LaunchConfig};

    /// Launches a TensorIterator-style kernel over `n` elements.
    pub(crate) fn run_ew(kernel: &EmuKernel, n: usize, args: &[u64]) {
        let cfg = LaunchConfig {
            grid: [n.div_ceil(EW_BLOCK_ITEMS).max(1) as u32, 1, 1],
            block: [EW_THREADS as u32, 1, 1],
            shared_bytes: 0,
        };
        unsafe { launch_kernel(kernel, &cfg, args).unwrap() };
    }

    fn p<T>(v: &[T]) -> u64 {
        v.as_ptr() as u64
    }

    fn pm<T>(v: &mut [T]) -> u64 {
        v.as_mut_ptr() as u64
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
        run_ew(
            &aten_floor_divide_i64::EMU,
            n,
            &[pm(&mut out), p(&a), p(&b), n as u64],
        );
        assert!(out
            .iter()
            .zip(a.iter().zip(&b))
            .all(|(&o, (&x, &y))| o == div_floor_i64(x, y)));
        run_ew(
            &aten_sub_i64_i32::EMU,
            n,
            &[pm(&mut out), p(&a), p(&b32), n as u64],
        );
        assert!(out
            .iter()
            .zip(a.iter().zip(&b))
            .all(|(&o, (&x, &y))| o == x - y));
        run_ew(
            &aten_remainder_scalar_i64::EMU,
            n,
            &[pm(&mut out), p(&a), 7, n as u64],
        );
        assert!(out.iter().zip(&a).all(|(&o, &x)| o == x.rem_euclid(7)));
        let mut flags = vec![9u8; n];
        run_ew(
            &aten_lt_scalar_i64::EMU,
            n,
            &[pm(&mut flags), p(&a), 0, n as u64],
        );
        assert!(flags.iter().zip(&a).all(|(&f, &x)| f == (x < 0) as u8));
        run_ew(
            &aten_where_i64::EMU,
            n,
            &[pm(&mut out), p(&flags), p(&a), p(&b), n as u64],
        );
        assert!((0..n).all(|i| out[i] == if a[i] < 0 { a[i] } else { b[i] }));
        run_ew(&aten_arange_i64::EMU, n, &[pm(&mut out), n as u64]);
        assert!(out.iter().enumerate().all(|(i, &o)| o == i as i64));
        let mut gathered = vec![0i64; n];
        let idx: Vec<i64> = (0..n as i64).map(|i| (i * 7) % n as i64).collect();
        run_ew(
            &aten_index_i64::EMU,
            n,
            &[pm(&mut gathered), p(&a), p(&idx), n as u64],
        );
        assert!((0..n).all(|i| gathered[i] == a[idx[i] as usize]));
        let mut scattered = vec![0i64; n];
        run_ew(
            &aten_scatter_i64::EMU,
            n,
            &[pm(&mut scattered), p(&idx), p(&a), n as u64],
        );
        assert!((0..n).all(|i| scattered[idx[i] as usize] == a[i]));
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
                launch_kernel(
                    &aten_reduce_partial_i64::EMU,
                    &LaunchConfig {
                        grid: [grid as u32, 1, 1],
                        block: [512, 1, 1],
                        shared_bytes: 0,
                    },
                    &[pm(&mut partials), p(&a), n as u64, op as u64],
                )
                .unwrap();
                launch_kernel(
                    &aten_reduce_final_i64::EMU,
                    &LaunchConfig {
                        grid: [1, 1, 1],
                        block: [512, 1, 1],
                        shared_bytes: 0,
                    },
                    &[pm(&mut out), p(&partials), grid as u64, op as u64],
                )
                .unwrap();
            }
            assert_eq!(out[0], expect, "op {op}");
        }
        // bincount of non-negative keys: minvalue 0, maxvalue = nbins.
        let keys: Vec<i64> = (0..n as i64).map(|i| (i * i) % 1500).collect();
        let nbins = 1600i64;
        let mut counts = vec![0u64; nbins as usize];
        unsafe {
            launch_kernel(
                &aten_histogram_i64::EMU,
                &LaunchConfig {
                    grid: [n.div_ceil(512) as u32, 1, 1],
                    block: [512, 1, 1],
                    shared_bytes: 0,
                },
                &[
                    pm(&mut counts),
                    p(&keys),
                    n as u64,
                    nbins as u64,
                    0,
                    nbins as u64,
                ],
            )
            .unwrap();
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
        let cfg = LaunchConfig {
            grid: [idx.len() as u32, 1, 1],
            block: [32, 1, 1],
            shared_bytes: 0,
        };
        unsafe {
            launch_kernel(
                &aten_gather_rows16::EMU,
                &cfg,
                &[
                    pm(&mut out),
                    p(&table),
                    p(&idx),
                    row_bytes as u64,
                    row_bytes as u64,
                    row_bytes as u64,
                ],
            )
            .unwrap();
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
