//! `kernel!`: one kernel body, a PTX entry on the GPU and an emulator entry on the host.

/// Declares a kernel.
///
/// ```ignore
/// kernel! {
///     /// Doc.
///     pub unsafe fn my_kernel(x: *const f32, out: *mut f32, n: u32) { ... }
/// }
/// ```
/// On nvptx64 this is `#[no_mangle] pub unsafe extern "ptx-kernel" fn my_kernel(..)`. On the host
/// it is a plain `unsafe fn` plus a module of the same name holding `EMU`, an
/// [`emu::EmuKernel`](crate::emu::EmuKernel) that unpacks 64-bit argument words and calls it,
/// registered in [`EMU_KERNELS`](crate::kernels::EMU_KERNELS) (no list to edit).
macro_rules! kernel {
    (
        $(#[$meta:meta])*
        pub unsafe fn $name:ident ( $( $arg:ident : $ty:ty ),* $(,)? ) $body:block
    ) => {
        #[cfg(target_arch = "nvptx64")]
        $(#[$meta])*
        #[allow(clippy::too_many_arguments)]
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name( $( $arg : $ty ),* ) $body

        #[cfg(not(target_arch = "nvptx64"))]
        $(#[$meta])*
        #[allow(clippy::too_many_arguments)]
        pub unsafe fn $name( $( $arg : $ty ),* ) $body

        #[cfg(not(target_arch = "nvptx64"))]
        #[allow(non_snake_case)]
        pub mod $name {
            /// The emulator's handle on this kernel.
            pub const EMU: $crate::emu::EmuKernel = $crate::emu::EmuKernel {
                name: stringify!($name),
                param_sizes: &[ $( ::core::mem::size_of::<$ty>() ),* ],
                call: |words: &[u64]| {
                    let mut it = words.iter().copied();
                    // The launcher checked the count against `param_sizes` first.
                    unsafe {
                        super::$name( $( <$ty as $crate::emu::FromArgWord>::from_word(
                            it.next().expect(concat!("missing argument ", stringify!($arg)))
                        ) ),* )
                    }
                },
            };

            /// Registers [`EMU`] with the emulator ([`EMU_KERNELS`](crate::kernels::EMU_KERNELS)).
            #[::linkme::distributed_slice($crate::kernels::EMU_KERNELS)]
            #[linkme(crate = ::linkme)]
            static REGISTERED: $crate::emu::EmuKernel = EMU;
        }
    };
}

/// `__launch_bounds__(threads, min_blocks)` for a kernel: at most `threads` threads per block,
/// and ptxas keeps registers low enough for `min_blocks` resident blocks per SM (`.maxntid` and
/// `.minnctapersm` on the PTX entry). Rust cannot attach these to an entry, so this emits a
/// marker comment into the PTX that the host's build script turns into the two directives
/// (`host/src/launch_bounds.rs`).
macro_rules! launch_bounds {
    ($name:ident, $threads:literal, $min_blocks:literal) => {
        #[cfg(target_arch = "nvptx64")]
        ::core::arch::global_asm!(concat!(
            "// dlrm-bench launch_bounds ",
            stringify!($name),
            " ",
            $threads,
            " ",
            $min_blocks
        ));
    };
}
