//! All kernels: references (what a speedup is measured against), tuned kernels (the project's
//! own fast versions, run as candidates), device self-tests and the ceiling probes.
//!
//! Adding a kernel: write it with `kernel!` in a module declared here; it registers itself in
//! [`EMU_KERNELS`] for the emulator.

pub mod bag_chunk;
pub mod bag_pool;
pub mod block_bucketize_sparse_features;
pub mod block_bucketize_sparse_features_tuned;
pub mod ceilings;
pub mod compare;
pub mod dot_interaction;
pub mod dot_interaction_backward;
pub mod dot_interaction_backward_tuned;
pub mod dot_interaction_tuned;
pub(crate) mod eager_bag;
pub mod embedding_backward_rowwise_adagrad;
pub mod embedding_backward_rowwise_adagrad_tuned;
pub mod embedding_bag_int8_rowwise;
pub mod embedding_bag_int8_rowwise_tuned;
pub mod embedding_bag_sum;
pub mod embedding_bag_sum_tuned;
pub mod embedding_bag_weighted_sum_bf16;
pub mod embedding_bag_weighted_sum_bf16_tuned;
pub mod faults;
pub mod fingerprint;
pub mod fm_interaction;
pub mod fm_interaction_tuned;
pub mod gather_rows;
pub mod kjt_permute;
pub mod kjt_permute_tuned;
pub mod radix_sort;
pub mod relabel;
pub mod scan;
pub mod selftest;
pub mod sequence_gather_padded_bf16;
pub mod sequence_gather_padded_bf16_tuned;
pub mod tbe_forward_fp16;
pub mod tbe_forward_fp16_tuned;
pub mod torch_ops;
pub mod unique_indices;
pub mod unique_indices_tuned;

/// Emulator handles of every kernel, by PTX entry name: each [`kernel!`] adds its own.
#[cfg(not(target_arch = "nvptx64"))]
#[linkme::distributed_slice]
pub static EMU_KERNELS: [crate::emu::EmuKernel];
