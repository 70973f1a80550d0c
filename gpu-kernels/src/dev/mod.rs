//! The device layer every kernel uses: thread and block indices, the block barrier, shared
//! memory, warp shuffles, atomics, vector loads and stores (16 and 8 bytes) and byte permutes.
//!
//! Two implementations with one interface: [`nvptx`](self) lowers each call to PTX (inline
//! assembly); on the host the same names call into the CPU emulator ([`crate::emu`]). Kernels
//! only ever `use crate::dev::*`.

#[cfg(target_arch = "nvptx64")]
mod nvptx;
#[cfg(target_arch = "nvptx64")]
pub use nvptx::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host;
#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

/// Threads in a warp.
pub const WARP_SIZE: u32 = 32;

/// Linear thread index inside the block (x fastest).
#[inline(always)]
pub fn thread_linear() -> u32 {
    thread_idx_x() + block_dim_x() * (thread_idx_y() + block_dim_y() * thread_idx_z())
}

/// Threads in the block.
#[inline(always)]
pub fn block_threads() -> u32 {
    block_dim_x() * block_dim_y() * block_dim_z()
}

/// Lane of this thread in its warp.
#[inline(always)]
pub fn lane_id() -> u32 {
    thread_linear() % WARP_SIZE
}

/// Warp of this thread in its block.
#[inline(always)]
pub fn warp_id() -> u32 {
    thread_linear() / WARP_SIZE
}

/// Declares a statically sized shared-memory array and evaluates to a `*mut T` to its first
/// element, the same pointer for every thread of a block: `static_shared!(PARTIALS: [f32; 256])`.
/// The name must be unique in the crate (it becomes a PTX symbol).
#[macro_export]
macro_rules! static_shared {
    ($name:ident : [$ty:ty; $len:expr]) => {{
        #[cfg(target_arch = "nvptx64")]
        {
            #[allow(non_snake_case)]
            mod $name {
                ::core::arch::global_asm!(
                    concat!(".shared .align 16 .b8 ", stringify!($name), "[{bytes}];"),
                    bytes = const ::core::mem::size_of::<[$ty; $len]>(),
                );
            }
            let p: u64;
            unsafe {
                ::core::arch::asm!(
                    concat!("cvta.shared.u64 {0}, ", stringify!($name), ";"),
                    out(reg64) p,
                    options(pure, nomem, nostack),
                );
            }
            p as *mut $ty
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            static $name: u8 = 0;
            $crate::emu::block_static_shared(
                ::core::ptr::addr_of!($name) as usize,
                ::core::mem::size_of::<[$ty; $len]>(),
            ) as *mut $ty
        }
    }};
}

/// `__shfl_xor_sync` on f32.
#[inline(always)]
pub fn shfl_xor_f32(v: f32, lane_mask: u32) -> f32 {
    f32::from_bits(shfl_xor_u32(v.to_bits(), lane_mask))
}

/// `__shfl_down_sync` on f32.
#[inline(always)]
pub fn shfl_down_f32(v: f32, delta: u32) -> f32 {
    f32::from_bits(shfl_down_u32(v.to_bits(), delta))
}

/// `__shfl_sync` (broadcast from `src_lane`) on f32.
#[inline(always)]
pub fn shfl_idx_f32(v: f32, src_lane: u32) -> f32 {
    f32::from_bits(shfl_idx_u32(v.to_bits(), src_lane))
}

/// `__shfl_sync` on i64, as two 32-bit shuffles.
#[inline(always)]
pub fn shfl_idx_i64(v: i64, src_lane: u32) -> i64 {
    let lo = shfl_idx_u32(v as u64 as u32, src_lane);
    let hi = shfl_idx_u32((v as u64 >> 32) as u32, src_lane);
    ((hi as u64) << 32 | lo as u64) as i64
}

/// Sum of i64 over the 32 lanes of a warp (butterfly shuffles); every lane gets the total.
#[inline(always)]
pub fn warp_sum_i64(mut v: i64) -> i64 {
    let mut mask = WARP_SIZE / 2;
    while mask > 0 {
        let lo = shfl_xor_u32(v as u64 as u32, mask);
        let hi = shfl_xor_u32((v as u64 >> 32) as u32, mask);
        v = v.wrapping_add(((hi as u64) << 32 | lo as u64) as i64);
        mask /= 2;
    }
    v
}

/// Sum over the 32 lanes of a warp by butterfly shuffles; every lane gets the total.
#[inline(always)]
pub fn warp_sum_f32(mut v: f32) -> f32 {
    let mut mask = WARP_SIZE / 2;
    while mask > 0 {
        v += shfl_xor_f32(v, mask);
        mask /= 2;
    }
    v
}

/// bfloat16 (its bits) to f32, exactly (`__bfloat162float`: the bits shifted up).
#[inline(always)]
pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

/// f32 to bfloat16 bits, rounded to nearest even (`__float2bfloat16`, `cvt.rn.bf16.f32`); a NaN
/// stays a (quiet) NaN.
#[inline(always)]
pub fn f32_to_bf16_rn(x: f32) -> u16 {
    let bits = x.to_bits();
    if (bits & 0x7fff_ffff) > 0x7f80_0000 {
        return ((bits >> 16) | 0x0040) as u16;
    }
    let rounding = 0x7fff + ((bits >> 16) & 1);
    (bits.wrapping_add(rounding) >> 16) as u16
}
