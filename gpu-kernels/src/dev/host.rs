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
    current(|c| c.sync_threads());
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

/// `__match_any_sync(0xffffffff, v)`: the mask of the lanes of this warp whose `v` equals this
/// lane's. Every lane of the warp must take part: each publishes its value in the warp's
/// exchange area, waits at a warp barrier, then reads all of them (see [`crate::emu`]).
pub fn match_any_u32(v: u32) -> u32 {
    current(|c| c.match_any(v))
}

/// Called in each round of a spin-wait on another block (a look-back): the emulated thread
/// yields to the others, so that the block being waited for runs (see [`emu::spin_yield`]).
pub fn spin_pause() {
    emu::spin_yield();
}

/// `__ballot_sync(0xffffffff, pred)`: bit `l` set when lane `l`'s `pred` holds (built on
/// [`match_any_u32`]: the lanes that agree with this one, complemented where `pred` is false).
pub fn ballot(pred: bool) -> u32 {
    let agree = match_any_u32(pred as u32);
    if pred {
        return agree;
    }
    let warp = super::warp_id();
    let lanes = (super::block_threads() - warp * emu::WARP).min(emu::WARP);
    let present = if lanes == 32 {
        u32::MAX
    } else {
        (1u32 << lanes) - 1
    };
    present & !agree
}

/// `CUDA_KERNEL_ASSERT(ok)`: a failed check stops the kernel (a panic, which the emulator
/// reports as a kernel fault).
pub fn device_assert(ok: bool) {
    if !ok {
        panic!("device-side assertion failed");
    }
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

/// Atomic `*p += v` on f32, no result (`red.add.f32` on the GPU).
pub unsafe fn red_add_f32(p: *mut f32, v: f32) {
    atomic_add_f32(p, v);
}

/// Atomic `*p += v` on u32; returns the old value.
pub unsafe fn atomic_add_u32(p: *mut u32, v: u32) -> u32 {
    AtomicU32::from_ptr(p).fetch_add(v, Ordering::AcqRel)
}

/// Atomic `*p |= v` on u32, no result (`red.or.b32` on the GPU).
pub unsafe fn red_or_u32(p: *mut u32, v: u32) {
    AtomicU32::from_ptr(p).fetch_or(v, Ordering::AcqRel);
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

/// Atomic compare-and-swap on u64; returns the old value.
pub unsafe fn atomic_cas_u64(p: *mut u64, expected: u64, new: u64) -> u64 {
    match AtomicU64::from_ptr(p).compare_exchange(
        expected,
        new,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(v) | Err(v) => v,
    }
}

/// A volatile load of a u64 that other threads may be filling with atomics.
pub unsafe fn load_volatile_u64(p: *const u64) -> u64 {
    AtomicU64::from_ptr(p as *mut u64).load(Ordering::Acquire)
}

/// f32 to IEEE half bits, rounded to nearest even as `cvt.rn.f16.f32`: overflow to infinity,
/// half subnormals rounded at 2^-24, a NaN stays a (quiet) NaN.
pub fn f32_to_f16_rn(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32;
    let man = bits & 0x7f_ffff;
    if exp == 0xff {
        return sign
            | 0x7c00
            | if man != 0 {
                0x200 | (man >> 13) as u16
            } else {
                0
            };
    }
    // The half exponent field this value would have.
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    // Round `m` (with `shift` bits to drop) to nearest even; a carry may reach the exponent,
    // which is the right encoding (the next binade, or infinity).
    let round = |m: u32, shift: u32| -> u32 {
        let (r, rem, halfway) = (m >> shift, m & ((1 << shift) - 1), 1u32 << (shift - 1));
        if rem > halfway || (rem == halfway && r & 1 == 1) {
            r + 1
        } else {
            r
        }
    };
    if e <= 0 {
        if e < -10 {
            return sign; // below 2^-25: rounds to zero
        }
        return sign | round(man | 0x80_0000, (14 - e) as u32) as u16;
    }
    sign | round(((e as u32) << 23) | man, 13) as u16
}

/// IEEE half (its bits) to f32, exactly: normals, subnormals, zeros, infinities and NaNs.
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h as u32) & 0x8000) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, _) => {
            // Subnormal: value = man * 2^-24, exact in f32.
            let v = man as f32 * (1.0 / (1u32 << 24) as f32);
            return f32::from_bits(sign | v.to_bits());
        }
        (0x1f, _) => sign | 0x7f80_0000 | (man << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

/// Square root, correctly rounded.
pub fn sqrt_f32(x: f32) -> f32 {
    x.sqrt()
}

fn check_aligned_16(p: *const f32) {
    // A misaligned vector access is a fault on the GPU; make it one here too.
    assert!(
        (p as usize).is_multiple_of(16),
        "misaligned 16-byte access at {p:p}"
    );
}

/// 16-byte load of four f32 through the read-only path.
pub unsafe fn load_nc_f32x4(p: *const f32) -> [f32; 4] {
    check_aligned_16(p);
    [*p, *p.add(1), *p.add(2), *p.add(3)]
}

/// 8-byte load of four u16 (fp16 bits) through the read-only path.
pub unsafe fn load_nc_u16x4(p: *const u16) -> [u16; 4] {
    assert!(
        (p as usize).is_multiple_of(8),
        "misaligned 8-byte access at {p:p}"
    );
    [*p, *p.add(1), *p.add(2), *p.add(3)]
}

/// 16-byte load of four u32 (raw bits) through the read-only path.
pub unsafe fn load_nc_u32x4(p: *const u32) -> [u32; 4] {
    check_aligned_16(p as *const f32);
    [*p, *p.add(1), *p.add(2), *p.add(3)]
}

/// 8-byte load of an i64 through the read-only path.
pub unsafe fn load_nc_i64(p: *const i64) -> i64 {
    assert!(
        (p as usize).is_multiple_of(8),
        "misaligned 8-byte access at {p:p}"
    );
    *p
}

/// 8-byte load of two u32 through the read-only path.
pub unsafe fn load_nc_u32x2(p: *const u32) -> [u32; 2] {
    assert!(
        (p as usize).is_multiple_of(8),
        "misaligned 8-byte access at {p:p}"
    );
    [*p, *p.add(1)]
}

/// 16-byte streaming (evict-first) store of four u32.
pub unsafe fn store_cs_u32x4(p: *mut u32, v: [u32; 4]) {
    check_aligned_16(p as *const f32);
    for (i, x) in v.into_iter().enumerate() {
        *p.add(i) = x;
    }
}

/// 16-byte load of four f32.
pub unsafe fn load_f32x4(p: *const f32) -> [f32; 4] {
    check_aligned_16(p);
    [*p, *p.add(1), *p.add(2), *p.add(3)]
}

/// A byte address in the block's shared memory (on the GPU a 32-bit `.shared` address; here the
/// host address of the emulator's shared buffer).
pub type SharedAddr = usize;

/// The shared-memory address of a pointer into shared memory.
pub fn shared_addr<T>(p: *const T) -> SharedAddr {
    p as usize
}

/// 16-byte load of four f32 from shared memory (`ld.shared.v4.f32` on the GPU).
pub unsafe fn ld_shared_f32x4(a: SharedAddr) -> [f32; 4] {
    load_f32x4(a as *const f32)
}

/// 4-byte store of an f32 to shared memory (`st.shared.f32` on the GPU).
pub unsafe fn st_shared_f32(a: SharedAddr, v: f32) {
    assert!(
        a.is_multiple_of(4),
        "misaligned 4-byte shared store at {a:#x}"
    );
    *(a as *mut f32) = v;
}

/// 4-byte load from shared memory (`ld.shared.u32` on the GPU).
pub unsafe fn ld_shared_u32(a: SharedAddr) -> u32 {
    *aligned::<u32>(a)
}

/// 8-byte load from shared memory (`ld.shared.u64` on the GPU).
pub unsafe fn ld_shared_u64(a: SharedAddr) -> u64 {
    *aligned::<u64>(a)
}

/// 4-byte store to shared memory (`st.shared.u32` on the GPU).
pub unsafe fn st_shared_u32(a: SharedAddr, v: u32) {
    *aligned::<u32>(a) = v;
}

/// 8-byte store to shared memory (`st.shared.u64` on the GPU).
pub unsafe fn st_shared_u64(a: SharedAddr, v: u64) {
    *aligned::<u64>(a) = v;
}

/// Atomic `+= v` on a shared-memory u32 (`atom.shared.add.u32` on the GPU); the old value.
pub unsafe fn atomic_add_shared_u32(a: SharedAddr, v: u32) -> u32 {
    atomic_add_u32(aligned::<u32>(a), v)
}

/// Atomic compare-and-swap on a shared-memory u32 (`atom.shared.cas.b32` on the GPU); the old
/// value.
pub unsafe fn atomic_cas_shared_u32(a: SharedAddr, expected: u32, new: u32) -> u32 {
    atomic_cas_u32(aligned::<u32>(a), expected, new)
}

/// Atomic `+= v` on a shared-memory u32, no result (`red.shared.add.u32` on the GPU).
pub unsafe fn red_add_shared_u32(a: SharedAddr, v: u32) {
    atomic_add_u32(aligned::<u32>(a), v);
}

/// `a` as a pointer to `T`, which it must be aligned for (as the GPU requires).
fn aligned<T>(a: SharedAddr) -> *mut T {
    assert!(
        a.is_multiple_of(std::mem::align_of::<T>()),
        "misaligned {}-byte shared access at {a:#x}",
        std::mem::size_of::<T>()
    );
    a as *mut T
}

/// 16-byte store of four f32.
pub unsafe fn store_f32x4(p: *mut f32, v: [f32; 4]) {
    check_aligned_16(p);
    for (i, x) in v.into_iter().enumerate() {
        *p.add(i) = x;
    }
}

/// 16-byte store of four u32.
pub unsafe fn store_u32x4(p: *mut u32, v: [u32; 4]) {
    assert!(
        (p as usize).is_multiple_of(16),
        "misaligned 16-byte access at {p:p}"
    );
    for (i, x) in v.into_iter().enumerate() {
        *p.add(i) = x;
    }
}

/// Read-only-path scalar load.
pub unsafe fn load_nc_f32(p: *const f32) -> f32 {
    *p
}

/// Read-only-path 4-byte load of a u32.
pub unsafe fn load_nc_u32(p: *const u32) -> u32 {
    *p
}

/// `a * b + c` with one rounding.
pub fn fma_f32(a: f32, b: f32, c: f32) -> f32 {
    a.mul_add(b, c)
}

/// `bfe.u32`: `len` bits of `val` from bit `pos` (`pos`, `len` < 32 here; PTX clamps larger).
pub fn bfe_u32(val: u32, pos: u32, len: u32) -> u32 {
    let (pos, len) = (pos.min(32), len.min(32));
    if len == 0 || pos == 32 {
        return 0;
    }
    let shifted = val >> pos;
    if len >= 32 {
        shifted
    } else {
        shifted & ((1u32 << len) - 1)
    }
}

/// `prmt.b32` (default mode): byte `i` of the result is byte `selector` nibble `i` of the eight
/// bytes `b:a` (0–3 from `a`, 4–7 from `b`); nibble bit 3 set replicates that byte's sign bit.
pub fn prmt_b32(a: u32, b: u32, selector: u32) -> u32 {
    let bytes = (b as u64) << 32 | a as u64;
    (0..4).fold(0u32, |r, i| {
        let nibble = (selector >> (4 * i)) & 0xf;
        let byte = (bytes >> (8 * (nibble & 7))) as u8;
        let byte = if nibble & 8 != 0 {
            if byte & 0x80 != 0 {
                0xff
            } else {
                0
            }
        } else {
            byte
        };
        r | (byte as u32) << (8 * i)
    })
}
