//! The device layer on NVPTX: each call is one or a few PTX instructions.
use core::arch::asm;

macro_rules! special_register {
    ($($fn_name:ident => $reg:literal),* $(,)?) => {$(
        #[inline(always)]
        pub fn $fn_name() -> u32 {
            let r: u32;
            unsafe { asm!(concat!("mov.u32 {0}, ", $reg, ";"), out(reg32) r, options(pure, nomem, nostack)) };
            r
        }
    )*};
}

special_register! {
    thread_idx_x => "%tid.x", thread_idx_y => "%tid.y", thread_idx_z => "%tid.z",
    block_idx_x => "%ctaid.x", block_idx_y => "%ctaid.y", block_idx_z => "%ctaid.z",
    block_dim_x => "%ntid.x", block_dim_y => "%ntid.y", block_dim_z => "%ntid.z",
    grid_dim_x => "%nctaid.x", grid_dim_y => "%nctaid.y", grid_dim_z => "%nctaid.z",
}

/// Block-wide barrier (`__syncthreads`): every thread of the block waits here, and shared and
/// global memory written before it is visible to the block after it.
#[inline(always)]
pub fn sync_threads() {
    unsafe { asm!("bar.sync 0;", options(nostack)) };
}

/// Warp-wide barrier over all 32 lanes (`__syncwarp()`).
#[inline(always)]
pub fn sync_warp() {
    unsafe { asm!("bar.warp.sync 0xffffffff;", options(nostack)) };
}

core::arch::global_asm!(".extern .shared .align 16 .b8 dlrm_dynamic_shared[];");

/// Dynamic shared memory of the block (the launch's `shared_bytes`), as `*mut T`.
#[inline(always)]
pub fn dynamic_shared<T>() -> *mut T {
    let p: u64;
    unsafe {
        asm!("cvta.shared.u64 {0}, dlrm_dynamic_shared;", out(reg64) p, options(pure, nomem, nostack))
    };
    p as *mut T
}

/// `__shfl_xor_sync(0xffffffff, v, mask)` on 32-bit values.
#[inline(always)]
pub fn shfl_xor_u32(v: u32, lane_mask: u32) -> u32 {
    let r: u32;
    unsafe {
        asm!("shfl.sync.bfly.b32 {0}, {1}, {2}, 0x1f, 0xffffffff;",
             out(reg32) r, in(reg32) v, in(reg32) lane_mask, options(nostack))
    };
    r
}

/// `__shfl_down_sync(0xffffffff, v, delta)`: lanes past the end keep their own value.
#[inline(always)]
pub fn shfl_down_u32(v: u32, delta: u32) -> u32 {
    let r: u32;
    unsafe {
        asm!("shfl.sync.down.b32 {0}, {1}, {2}, 0x1f, 0xffffffff;",
             out(reg32) r, in(reg32) v, in(reg32) delta, options(nostack))
    };
    r
}

/// `__shfl_sync(0xffffffff, v, src_lane)`.
#[inline(always)]
pub fn shfl_idx_u32(v: u32, src_lane: u32) -> u32 {
    let r: u32;
    unsafe {
        asm!("shfl.sync.idx.b32 {0}, {1}, {2}, 0x1f, 0xffffffff;",
             out(reg32) r, in(reg32) v, in(reg32) src_lane, options(nostack))
    };
    r
}

/// `__match_any_sync(0xffffffff, v)` (sm_70+): the mask of the lanes of this warp whose `v`
/// equals this lane's. Every lane of the warp must take part.
#[inline(always)]
pub fn match_any_u32(v: u32) -> u32 {
    let r: u32;
    unsafe {
        asm!("match.any.sync.b32 {0}, {1}, 0xffffffff;", out(reg32) r, in(reg32) v,
             options(nostack))
    };
    r
}

/// Called in each round of a spin-wait on another block (a look-back): nothing on the GPU.
#[inline(always)]
pub fn spin_pause() {}

/// `__ballot_sync(0xffffffff, pred)`: bit `l` set when lane `l`'s `pred` holds. Every lane of
/// the warp must take part.
#[inline(always)]
pub fn ballot(pred: bool) -> u32 {
    let r: u32;
    unsafe {
        asm!("{{ .reg .pred p; setp.ne.u32 p, {1}, 0; vote.sync.ballot.b32 {0}, p, 0xffffffff; }}",
             out(reg32) r, in(reg32) pred as u32, options(nostack))
    };
    r
}

/// Atomic `*p += v` on f32 (global or shared, generic address); returns the old value.
#[inline(always)]
pub unsafe fn atomic_add_f32(p: *mut f32, v: f32) -> f32 {
    let r: f32;
    asm!("atom.add.f32 {0}, [{1}], {2};", out(reg32) r, in(reg64) p, in(reg32) v, options(nostack));
    r
}

/// Atomic `*p += v` on f32 in global memory, no result: `red.global.add.f32` (RED in SASS,
/// what nvcc makes of an `atomicAdd` on a global pointer whose result is unused).
#[inline(always)]
pub unsafe fn red_add_f32(p: *mut f32, v: f32) {
    // `.global` (the address converted first): for a generic `red.add.f32` ptxas emits an ATOM
    // that waits for the old value and a run-time test for shared memory with a CAS loop;
    // `red.global` is one REDG.
    asm!("{{ .reg .u64 %g; cvta.to.global.u64 %g, {0}; red.global.add.f32 [%g], {1}; }}",
         in(reg64) p, in(reg32) v, options(nostack));
}

/// `CUDA_KERNEL_ASSERT(ok)`: a failed check traps (the compare and a predicated trap; values
/// read before it may be reused after it, as ptxas does with a plain trap).
#[inline(always)]
pub fn device_assert(ok: bool) {
    unsafe {
        asm!("{{ .reg .pred %bad; setp.eq.u32 %bad, {0}, 0; @%bad trap; }}", in(reg32) ok as u32, options(nostack));
    }
}

/// Atomic `*p += v` on u32; returns the old value.
#[inline(always)]
pub unsafe fn atomic_add_u32(p: *mut u32, v: u32) -> u32 {
    let r: u32;
    asm!("atom.add.u32 {0}, [{1}], {2};", out(reg32) r, in(reg64) p, in(reg32) v, options(nostack));
    r
}

/// Atomic `*p |= v` on u32 in global memory, no result (`red.global.or.b32`: one REDG, where
/// ptxas made the generic `red.or.b32` an ATOM.E.OR that waits for the old value).
#[inline(always)]
pub unsafe fn red_or_u32(p: *mut u32, v: u32) {
    asm!("{{ .reg .u64 %g; cvta.to.global.u64 %g, {0}; red.global.or.b32 [%g], {1}; }}",
         in(reg64) p, in(reg32) v, options(nostack));
}

/// Atomic `*p += v` on u64; returns the old value.
#[inline(always)]
pub unsafe fn atomic_add_u64(p: *mut u64, v: u64) -> u64 {
    let r: u64;
    asm!("atom.add.u64 {0}, [{1}], {2};", out(reg64) r, in(reg64) p, in(reg64) v, options(nostack));
    r
}

/// Atomic compare-and-swap on u32; returns the old value.
#[inline(always)]
pub unsafe fn atomic_cas_u32(p: *mut u32, expected: u32, new: u32) -> u32 {
    let r: u32;
    asm!("atom.cas.b32 {0}, [{1}], {2}, {3};",
         out(reg32) r, in(reg64) p, in(reg32) expected, in(reg32) new, options(nostack));
    r
}

/// Atomic compare-and-swap on u64; returns the old value.
#[inline(always)]
pub unsafe fn atomic_cas_u64(p: *mut u64, expected: u64, new: u64) -> u64 {
    let r: u64;
    asm!("atom.cas.b64 {0}, [{1}], {2}, {3};",
         out(reg64) r, in(reg64) p, in(reg64) expected, in(reg64) new, options(nostack));
    r
}

/// A volatile load of a u64 (never served from a stale L1 line): for slots other threads may
/// be filling with atomics during the kernel.
#[inline(always)]
pub unsafe fn load_volatile_u64(p: *const u64) -> u64 {
    let r: u64;
    asm!("ld.volatile.u64 {0}, [{1}];", out(reg64) r, in(reg64) p, options(readonly, nostack));
    r
}

/// IEEE half (its bits) to f32, exactly (`__half2float`: one `cvt.f32.f16`).
#[inline(always)]
pub fn f16_to_f32(h: u16) -> f32 {
    let r: f32;
    unsafe {
        asm!("cvt.f32.f16 {0}, {1};", out(reg32) r, in(reg16) h, options(pure, nomem, nostack))
    };
    r
}

/// f32 to IEEE half bits, rounded to nearest even (`__float2half`: one `cvt.rn.f16.f32`).
#[inline(always)]
pub fn f32_to_f16_rn(x: f32) -> u16 {
    let r: u16;
    unsafe {
        asm!("cvt.rn.f16.f32 {0}, {1};", out(reg16) r, in(reg32) x, options(pure, nomem, nostack))
    };
    r
}

/// Square root, correctly rounded (`sqrtf` under nvcc's default `-prec-sqrt=true`).
#[inline(always)]
pub fn sqrt_f32(x: f32) -> f32 {
    let r: f32;
    unsafe {
        asm!("sqrt.rn.f32 {0}, {1};", out(reg32) r, in(reg32) x, options(pure, nomem, nostack))
    };
    r
}

/// One 16-byte load of four f32 through the read-only (non-coherent) path. `p` must be a
/// 16-byte-aligned global address of data no thread writes during the kernel.
#[inline(always)]
pub unsafe fn load_nc_f32x4(p: *const f32) -> [f32; 4] {
    let (a, b, c, d): (f32, f32, f32, f32);
    asm!("{{ .reg .u64 g; cvta.to.global.u64 g, {4}; ld.global.nc.v4.f32 {{{0}, {1}, {2}, {3}}}, [g]; }}",
         out(reg32) a, out(reg32) b, out(reg32) c, out(reg32) d, in(reg64) p,
         options(readonly, nostack));
    [a, b, c, d]
}

/// One 8-byte load of four u16 (fp16 bits) through the read-only (non-coherent) path. `p` must
/// be an 8-byte-aligned global address of data no thread writes during the kernel.
#[inline(always)]
pub unsafe fn load_nc_u16x4(p: *const u16) -> [u16; 4] {
    let (a, b, c, d): (u16, u16, u16, u16);
    asm!("{{ .reg .u64 g; cvta.to.global.u64 g, {4}; ld.global.nc.v4.u16 {{{0}, {1}, {2}, {3}}}, [g]; }}",
         out(reg16) a, out(reg16) b, out(reg16) c, out(reg16) d, in(reg64) p,
         options(readonly, nostack));
    [a, b, c, d]
}

/// One 16-byte load of four u32 (raw bits, e.g. eight bf16) through the read-only
/// (non-coherent) path. `p` must be a 16-byte-aligned global address of data no thread writes
/// during the kernel.
#[inline(always)]
pub unsafe fn load_nc_u32x4(p: *const u32) -> [u32; 4] {
    let (a, b, c, d): (u32, u32, u32, u32);
    asm!("{{ .reg .u64 g; cvta.to.global.u64 g, {4}; ld.global.nc.v4.u32 {{{0}, {1}, {2}, {3}}}, [g]; }}",
         out(reg32) a, out(reg32) b, out(reg32) c, out(reg32) d, in(reg64) p,
         options(readonly, nostack));
    [a, b, c, d]
}

/// An 8-byte load of an i64 through the read-only (non-coherent) path (`__ldg`). `p` must be
/// an 8-byte-aligned global address of data no thread writes during the kernel.
#[inline(always)]
pub unsafe fn load_nc_i64(p: *const i64) -> i64 {
    let r: i64;
    asm!("{{ .reg .u64 g; cvta.to.global.u64 g, {1}; ld.global.nc.s64 {0}, [g]; }}",
         out(reg64) r, in(reg64) p, options(readonly, nostack));
    r
}

/// One 16-byte streaming store of four u32 to global memory (`__stcs`, `st.global.cs`: the
/// line is marked evict-first in L2, for output written once and not read back by the
/// kernel). `p` must be a 16-byte-aligned global address.
#[inline(always)]
pub unsafe fn store_cs_u32x4(p: *mut u32, v: [u32; 4]) {
    asm!("{{ .reg .u64 g; cvta.to.global.u64 g, {0}; st.global.cs.v4.u32 [g], {{{1}, {2}, {3}, {4}}}; }}",
         in(reg64) p, in(reg32) v[0], in(reg32) v[1], in(reg32) v[2], in(reg32) v[3],
         options(nostack));
}

/// One 8-byte load of two u32 through the read-only (non-coherent) path (e.g. eight bytes, or
/// two f32 bit patterns). `p` must be an 8-byte-aligned global address of data no thread
/// writes during the kernel.
#[inline(always)]
pub unsafe fn load_nc_u32x2(p: *const u32) -> [u32; 2] {
    let (a, b): (u32, u32);
    asm!("{{ .reg .u64 g; cvta.to.global.u64 g, {2}; ld.global.nc.v2.u32 {{{0}, {1}}}, [g]; }}",
         out(reg32) a, out(reg32) b, in(reg64) p, options(readonly, nostack));
    [a, b]
}

/// One 16-byte load of four f32 (coherent). `p` must be 16-byte aligned.
#[inline(always)]
pub unsafe fn load_f32x4(p: *const f32) -> [f32; 4] {
    let (a, b, c, d): (f32, f32, f32, f32);
    asm!("ld.v4.f32 {{{0}, {1}, {2}, {3}}}, [{4}];",
         out(reg32) a, out(reg32) b, out(reg32) c, out(reg32) d, in(reg64) p,
         options(readonly, nostack));
    [a, b, c, d]
}

/// A byte address in the block's shared memory: 32 bits on the GPU (the `.shared` window, so
/// `base + constant` folds into LDS/STS immediates), the host address in the emulator. Kernels
/// do arithmetic on it in bytes and pass it to [`ld_shared_f32x4`] / [`st_shared_f32`].
pub type SharedAddr = u32;

/// The shared-memory address of a generic pointer into shared memory (from `static_shared!` or
/// `dynamic_shared`).
#[inline(always)]
pub fn shared_addr<T>(p: *const T) -> SharedAddr {
    let r: u32;
    unsafe {
        asm!("{{ .reg .u64 s; cvta.to.shared.u64 s, {1}; cvt.u32.u64 {0}, s; }}",
             out(reg32) r, in(reg64) p, options(pure, nomem, nostack))
    };
    r
}

/// One 16-byte load of four f32 from shared memory (`ld.shared.v4.f32`, an LDS.128); `a` must
/// be 16-byte aligned.
#[inline(always)]
pub unsafe fn ld_shared_f32x4(a: SharedAddr) -> [f32; 4] {
    let (x, y, z, w): (f32, f32, f32, f32);
    asm!("ld.shared.v4.f32 {{{0}, {1}, {2}, {3}}}, [{4}];",
         out(reg32) x, out(reg32) y, out(reg32) z, out(reg32) w, in(reg32) a,
         options(readonly, nostack));
    [x, y, z, w]
}

/// One 4-byte store of an f32 to shared memory (`st.shared.f32`, an STS).
#[inline(always)]
pub unsafe fn st_shared_f32(a: SharedAddr, v: f32) {
    asm!("st.shared.f32 [{0}], {1};", in(reg32) a, in(reg32) v, options(nostack));
}

/// A 4-byte load from shared memory (`ld.shared.u32`, an LDS).
#[inline(always)]
pub unsafe fn ld_shared_u32(a: SharedAddr) -> u32 {
    let r: u32;
    asm!("ld.shared.u32 {0}, [{1}];", out(reg32) r, in(reg32) a, options(readonly, nostack));
    r
}

/// An 8-byte load from shared memory (`ld.shared.u64`).
#[inline(always)]
pub unsafe fn ld_shared_u64(a: SharedAddr) -> u64 {
    let r: u64;
    asm!("ld.shared.u64 {0}, [{1}];", out(reg64) r, in(reg32) a, options(readonly, nostack));
    r
}

/// A 4-byte store to shared memory (`st.shared.u32`, an STS).
#[inline(always)]
pub unsafe fn st_shared_u32(a: SharedAddr, v: u32) {
    asm!("st.shared.u32 [{0}], {1};", in(reg32) a, in(reg32) v, options(nostack));
}

/// An 8-byte store to shared memory (`st.shared.u64`).
#[inline(always)]
pub unsafe fn st_shared_u64(a: SharedAddr, v: u64) {
    asm!("st.shared.u64 [{0}], {1};", in(reg32) a, in(reg64) v, options(nostack));
}

/// Atomic `+= v` on a shared-memory u32 (`atom.shared.add.u32`, an ATOMS); returns the old
/// value. (A generic-address atomic on shared memory is a much slower ATOM.)
#[inline(always)]
pub unsafe fn atomic_add_shared_u32(a: SharedAddr, v: u32) -> u32 {
    let r: u32;
    asm!("atom.shared.add.u32 {0}, [{1}], {2};", out(reg32) r, in(reg32) a, in(reg32) v,
         options(nostack));
    r
}

/// Atomic compare-and-swap on a shared-memory u32 (`atom.shared.cas.b32`); returns the old
/// value.
#[inline(always)]
pub unsafe fn atomic_cas_shared_u32(a: SharedAddr, expected: u32, new: u32) -> u32 {
    let r: u32;
    asm!("atom.shared.cas.b32 {0}, [{1}], {2}, {3};",
         out(reg32) r, in(reg32) a, in(reg32) expected, in(reg32) new, options(nostack));
    r
}

/// Atomic `+= v` on a shared-memory u32 without the old value (`red.shared.add.u32`).
#[inline(always)]
pub unsafe fn red_add_shared_u32(a: SharedAddr, v: u32) {
    asm!("red.shared.add.u32 [{0}], {1};", in(reg32) a, in(reg32) v, options(nostack));
}

/// One 16-byte store of four f32. `p` must be 16-byte aligned.
#[inline(always)]
pub unsafe fn store_f32x4(p: *mut f32, v: [f32; 4]) {
    asm!("st.v4.f32 [{0}], {{{1}, {2}, {3}, {4}}};",
         in(reg64) p, in(reg32) v[0], in(reg32) v[1], in(reg32) v[2], in(reg32) v[3],
         options(nostack));
}

/// One 16-byte store of four u32. `p` must be 16-byte aligned.
#[inline(always)]
pub unsafe fn store_u32x4(p: *mut u32, v: [u32; 4]) {
    asm!("st.v4.u32 [{0}], {{{1}, {2}, {3}, {4}}};",
         in(reg64) p, in(reg32) v[0], in(reg32) v[1], in(reg32) v[2], in(reg32) v[3],
         options(nostack));
}

/// A load through the read-only path (`__ldg`).
#[inline(always)]
pub unsafe fn load_nc_f32(p: *const f32) -> f32 {
    let r: f32;
    asm!("{{ .reg .u64 g; cvta.to.global.u64 g, {1}; ld.global.nc.f32 {0}, [g]; }}",
         out(reg32) r, in(reg64) p, options(readonly, nostack));
    r
}

/// A 4-byte load of a u32 through the read-only path (`__ldg`).
#[inline(always)]
pub unsafe fn load_nc_u32(p: *const u32) -> u32 {
    let r: u32;
    asm!("{{ .reg .u64 g; cvta.to.global.u64 g, {1}; ld.global.nc.u32 {0}, [g]; }}",
         out(reg32) r, in(reg64) p, options(readonly, nostack));
    r
}

/// `a * b + c` with one rounding.
#[inline(always)]
pub fn fma_f32(a: f32, b: f32, c: f32) -> f32 {
    let r: f32;
    unsafe {
        asm!("fma.rn.f32 {0}, {1}, {2}, {3};", out(reg32) r, in(reg32) a, in(reg32) b, in(reg32) c,
             options(pure, nomem, nostack))
    };
    r
}

/// `bfe.u32`: `len` bits of `val` from bit `pos`, as ATen's `bfe` helper (inline PTX with
/// register operands). With constant byte fields ptxas folds it and the float conversion into
/// one I2F.U8 with a byte select, as it does for nvcc's build of the helper.
#[inline(always)]
pub fn bfe_u32(val: u32, pos: u32, len: u32) -> u32 {
    let r: u32;
    unsafe {
        asm!("bfe.u32 {0}, {1}, {2}, {3};", out(reg32) r, in(reg32) val, in(reg32) pos,
             in(reg32) len, options(pure, nomem, nostack))
    };
    r
}

/// `__byte_perm(a, b, selector)` (`prmt.b32`, default mode): byte `i` of the result is byte
/// `selector` nibble `i` of the eight bytes `b:a` (0–3 from `a`, 4–7 from `b`; nibble bit 3 set
/// replicates that byte's sign bit instead). One PRMT.
#[inline(always)]
pub fn prmt_b32(a: u32, b: u32, selector: u32) -> u32 {
    let r: u32;
    unsafe {
        asm!("prmt.b32 {0}, {1}, {2}, {3};", out(reg32) r, in(reg32) a, in(reg32) b,
             in(reg32) selector, options(pure, nomem, nostack))
    };
    r
}
