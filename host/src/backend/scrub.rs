//! Per-thread and per-block device memory that outlives a launch, overwritten before every
//! execution of a candidate. Measured on an H200 (`tools/probes/state_survival.cu`,
//! `results/20261204T212026Z-gpu-full/state_survival.txt`): every thread slot's local memory
//! (its stack frame) still held what the last kernel on that slot wrote, through memsets and
//! other kernels in between; some shared memory did too. A candidate could keep a memo there
//! that no check looks at, so the CUDA backend runs two kernels of its own first:
//!
//! - [`local_ptx`]: a frame of `bytes` per thread written through, launched on every thread slot
//!   of every SM (two waves of the device's resident-thread capacity);
//! - [`SHARED_PTX`]: all the dynamic shared memory a block may take, written through, by
//!   blocks of 1024 threads, two per SM.
//!
//! Nothing is optimised away: the local kernel reads one word back at an index known only at
//! run time (to a sink that is null), and the shared one stores with `st.volatile`. The frame
//! covers the largest local frame of any candidate kernel bound so far (each asked when its plan
//! is bound, before it runs; a frame past [`MAX_LOCAL_BYTES`] is refused) plus the context's
//! stack limit as it opened.

/// Kernel of [`local_ptx`]'s module.
pub(crate) const LOCAL_KERNEL: &str = "dlrm_scrub_local";
/// Kernel of [`SHARED_PTX`].
pub(crate) const SHARED_KERNEL: &str = "dlrm_scrub_shared";
/// Threads per block of both kernels' local scrub.
pub(crate) const LOCAL_BLOCK: u32 = 256;
/// Threads per block of the shared scrub.
pub(crate) const SHARED_BLOCK: u32 = 1024;
/// The value written (not a finite float a stale read could pass for an answer: a NaN).
pub(crate) const PATTERN: u32 = 0x7FC0_5C2B;

/// The largest local frame a candidate kernel may have, per thread (16 KiB): clearing it on
/// every one of an H200's 270k thread slots, twice, writes about 9 GB (some 2 ms) before each
/// execution, and the driver reserves 4.4 GB for it.
pub(crate) const MAX_LOCAL_BYTES: usize = 16 << 10;

/// Frame sizes are rounded up to this, so few modules are built.
const GRANULE: usize = 1024;

/// The frame the local scrub writes for a frame need of `bytes`.
pub fn frame_bytes(bytes: usize) -> usize {
    bytes.max(1).div_ceil(GRANULE) * GRANULE
}

/// PTX of a kernel writing a `frame` byte local array (a multiple of 16) in full, 16 bytes a
/// store, with its parameter `pattern`; `pick` and `sink` (null) keep the stores alive.
pub fn local_ptx(frame: usize) -> String {
    format!(
        r#".version 7.0
.target sm_70
.address_size 64
.visible .entry {LOCAL_KERNEL}(.param .u32 pattern, .param .u32 pick, .param .u64 sink)
{{
	.local .align 16 .b8 frame[{frame}];
	.reg .b32 %r<4>;
	.reg .b64 %rd<6>;
	.reg .pred %p<2>;
	ld.param.u32 %r1, [pattern];
	mov.u64 %rd1, frame;
	add.u64 %rd2, %rd1, {frame};
	mov.u64 %rd5, %rd1;
LOOP:
	st.local.v4.u32 [%rd1], {{%r1, %r1, %r1, %r1}};
	add.u64 %rd1, %rd1, 16;
	setp.lt.u64 %p1, %rd1, %rd2;
	@%p1 bra LOOP;
	// One word read back at an index known only at run time keeps every store alive.
	ld.param.u32 %r2, [pick];
	rem.u32 %r2, %r2, {words};
	mul.wide.u32 %rd3, %r2, 4;
	add.u64 %rd3, %rd5, %rd3;
	ld.local.u32 %r3, [%rd3];
	ld.param.u64 %rd4, [sink];
	setp.ne.u64 %p1, %rd4, 0;
	@%p1 st.global.u32 [%rd4], %r3;
	ret;
}}
"#,
        words = frame / 4
    )
}

/// PTX of a kernel writing `words` 4-byte words of its dynamic shared memory, the block's
/// threads striding over them.
pub const SHARED_PTX: &str = r#".version 7.0
.target sm_70
.address_size 64
.extern .shared .align 16 .b8 dyn_smem[];
.visible .entry dlrm_scrub_shared(.param .u32 pattern, .param .u32 words)
{
	.reg .b32 %r<7>;
	.reg .pred %p<2>;
	ld.param.u32 %r1, [pattern];
	ld.param.u32 %r2, [words];
	mov.u32 %r3, %tid.x;
	mov.u32 %r4, %ntid.x;
	setp.ge.u32 %p1, %r3, %r2;
	@%p1 bra DONE;
LOOP:
	shl.b32 %r5, %r3, 2;
	mov.u32 %r6, dyn_smem;
	add.u32 %r5, %r5, %r6;
	st.volatile.shared.u32 [%r5], %r1;
	add.u32 %r3, %r3, %r4;
	setp.lt.u32 %p1, %r3, %r2;
	@%p1 bra LOOP;
DONE:
	ret;
}
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_up_to_the_granule_and_never_to_zero() {
        assert_eq!(frame_bytes(0), 1024);
        assert_eq!(frame_bytes(1024), 1024);
        assert_eq!(frame_bytes(1025), 2048);
        let ptx = local_ptx(frame_bytes(3000));
        assert!(ptx.contains(".local .align 16 .b8 frame[3072];"));
        assert!(ptx.contains("add.u64 %rd2, %rd1, 3072;"));
    }
}
