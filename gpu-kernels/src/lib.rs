//! DLRM-Bench's kernels, written once in Rust and run two ways.
//!
//! * On `nvptx64-nvidia-cuda` this crate is `no_std`; each [`kernel!`] becomes a PTX entry point
//!   (`extern "ptx-kernel"`) and the device layer in [`dev`] lowers to PTX instructions.
//! * On the host, the same kernel bodies run inside the CPU emulator ([`emu`]): one OS thread per
//!   GPU thread of a block, real block barriers, per-block shared memory, warp shuffles through an
//!   exchange area. That is how tests without a GPU check every kernel.
//!
//! Kernel parameters are raw pointers and plain integers or floats only.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]
// Kernels are unsafe by nature: raw pointers from the launcher, indices from the data.
#![allow(clippy::missing_safety_doc)]

#[macro_use]
mod macros;
pub mod dev;
#[cfg(not(target_arch = "nvptx64"))]
pub mod emu;
pub mod kernels;

#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // Built with -Cpanic=immediate-abort: this is never reached, but no_std needs a handler.
    loop {}
}

/// Every kernel the emulator can run, by its PTX entry name.
#[cfg(not(target_arch = "nvptx64"))]
pub fn emu_kernels() -> &'static [emu::EmuKernel] {
    &kernels::EMU_KERNELS
}

/// Looks up one emulated kernel by its PTX entry name.
#[cfg(not(target_arch = "nvptx64"))]
pub fn emu_kernel(name: &str) -> Option<&'static emu::EmuKernel> {
    emu_kernels().iter().find(|k| k.name == name)
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    #[test]
    fn every_kernel_registers_once_under_its_entry_name() {
        let names: Vec<&str> = super::emu_kernels().iter().map(|k| k.name).collect();
        let unique: std::collections::BTreeSet<&str> = names.iter().copied().collect();
        assert_eq!(unique.len(), names.len(), "a kernel registered twice");
        for name in [
            "embedding_bag_sum_reference",
            "radix_sort_onesweep",
            "fingerprint_words",
            "gather_rows",
        ] {
            assert!(
                super::emu_kernel(name).is_some(),
                "{name} is not registered"
            );
        }
        // A module's handle and its registration are the same kernel.
        let k = super::emu_kernel("embedding_bag_sum_reference").unwrap();
        let direct = crate::kernels::embedding_bag_sum::embedding_bag_sum_reference::EMU;
        assert_eq!(k.param_sizes, direct.param_sizes);
    }
}
