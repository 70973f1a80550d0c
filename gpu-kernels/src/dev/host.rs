//! The device layer on the host: every call reads or drives the CPU emulator's state for the
//! calling (emulated GPU) thread. See [`crate::emu`].
use crate::emu::{self, current};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

macro_rules! index_fn {
    ($($fn_name:ident => |$c:ident| $e:expr),* $(,)?) => {$(
        #[inline]
        pub fn $fn_name() -> u32 {
            current(|$c| $e)
        }
    )*};
}

index_fn! {
    thread_idx_x => |c| c.thread_idx[0], thread_idx_y => |c| c.thread_idx[1], thread_idx_z => |c| c.thread_idx[2],
    block_idx_x => |c| c.block().block_idx(0), block_idx_y => |c| c.block().block_idx(1), block_idx_z => |c| c.block().block_idx(2),
    block_dim_x => |c| c.block().config.block[0], block_dim_y => |c| c.block().config.block[1], block_dim_z => |c| c.block().config.block[2],
    grid_dim_x => |c| c.block().config.grid[0], grid_dim_y => |c| c.block().config.grid[1], grid_dim_z => |c| c.block().config.grid[2],
}

/// Block-wide barrier: waits for every thread of the block (threads that already returned count
/// as arrived).
pub fn sync_threads() {
    current(|c| c.block().sync_threads());
}

/// Warp-wide barrier.
pub fn sync_warp() {
    current(|c| c.sync_warp());
}

/// Dynamic shared memory of the block (poisoned with 0xFF bytes at each block start).
pub fn dynamic_shared<T>() -> *mut T {
    current(|c| c.block().dynamic_shared_ptr() as *mut T)
}

/// `__shfl_xor_sync(0xffffffff, v, mask)`.
pub fn shfl_xor_u32(v: u32, lane_mask: u32) -> u32 {
    current(|c| c.shuffle(v, |lane| Some(lane ^ (lane_mask & 31))))
}

/// `__shfl_down_sync(0xffffffff, v, delta)`.
pub fn shfl_down_u32(v: u32, delta: u32) -> u32 {
    current(|c| c.shuffle(v, |lane| (lane + delta < emu::WARP).then_some(lane + delta)))
}

/// `__shfl_sync(0xffffffff, v, src)`.
pub fn shfl_idx_u32(v: u32, src_lane: u32) -> u32 {
    current(|c| c.shuffle(v, |_| Some(src_lane & 31)))
}

/// Atomic `*p += v` on f32; returns the old value.
pub unsafe fn atomic_add_f32(p: *mut f32, v: f32) -> f32 {
    let a = AtomicU32::from_ptr(p as *mut u32);
    let old = a
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |bits| {
            Some((f32::from_bits(bits) + v).to_bits())
        })
        .unwrap_or_else(|bits| bits);
    f32::from_bits(old)
}

/// Atomic `*p += v` on u32; returns the old value.
pub unsafe fn atomic_add_u32(p: *mut u32, v: u32) -> u32 {
    AtomicU32::from_ptr(p).fetch_add(v, Ordering::AcqRel)
}

/// Atomic `*p += v` on u64; returns the old value.
pub unsafe fn atomic_add_u64(p: *mut u64, v: u64) -> u64 {
    AtomicU64::from_ptr(p).fetch_add(v, Ordering::AcqRel)
}

/// Atomic compare-and-swap on u32; returns the old value.
pub unsafe fn atomic_cas_u32(p: *mut u32, expected: u32, new: u32) -> u32 {
    match AtomicU32::from_ptr(p).compare_exchange(
        expected,
        new,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(v) | Err(v) => v,
    }
}

fn check_aligned_16(p: *const f32) {
    // A misaligned vector access is a fault on the GPU; make it one here too.
    assert!(p as usize % 16 == 0, "misaligned 16-byte access at {p:p}");
}

/// 16-byte load of four f32 through the read-only path.
pub unsafe fn load_nc_f32x4(p: *const f32) -> [f32; 4] {
    check_aligned_16(p);
    [*p, *p.add(1), *p.add(2), *p.add(3)]
}

/// 16-byte load of four f32.
pub unsafe fn load_f32x4(p: *const f32) -> [f32; 4] {
    check_aligned_16(p);
    [*p, *p.add(1), *p.add(2), *p.add(3)]
}

/// 16-byte store of four f32.
pub unsafe fn store_f32x4(p: *mut f32, v: [f32; 4]) {
    check_aligned_16(p);
    for (i, x) in v.into_iter().enumerate() {
        *p.add(i) = x;
    }
}

/// Read-only-path scalar load.
pub unsafe fn load_nc_f32(p: *const f32) -> f32 {
    *p
}

/// `a * b + c` with one rounding.
pub fn fma_f32(a: f32, b: f32, c: f32) -> f32 {
    a.mul_add(b, c)
}
