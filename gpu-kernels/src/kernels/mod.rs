//! All kernels: references (what a speedup is measured against), tuned kernels (the project's
//! own fast versions, run as candidates), device self-tests and the ceiling probes.
//!
//! Adding a kernel: write it with `kernel!` in a module here and list its `EMU` handle in
//! [`EMU_KERNELS`].

pub mod ceilings;
pub mod embedding_bag_sum;
pub mod faults;
pub mod fingerprint;
pub mod selftest;

/// Emulator handles of every kernel, by PTX entry name.
#[cfg(not(target_arch = "nvptx64"))]
pub static EMU_KERNELS: &[crate::emu::EmuKernel] = &[
    selftest::block_reduce_sum_f32::EMU,
    selftest::warp_reduce_sum_f32::EMU,
    selftest::static_shared_reverse_u32::EMU,
    ceilings::ceiling_fma_f32::EMU,
    ceilings::ceiling_l2_read_f32::EMU,
    embedding_bag_sum::embedding_bag_sum_reference::EMU,
    embedding_bag_sum::embedding_bag_sum_warp_per_bag::EMU,
    faults::fault_spin_forever::EMU,
    faults::fault_write_address::EMU,
    faults::exploit_first_call_only::EMU,
    faults::exploit_zero_first_index::EMU,
    fingerprint::fingerprint_words::EMU,
];
