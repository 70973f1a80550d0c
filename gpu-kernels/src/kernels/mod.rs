//! All kernels: references (what a speedup is measured against), tuned kernels (the project's
//! own fast versions, run as candidates), device self-tests and the ceiling probes.
//!
//! Adding a kernel: write it with `kernel!` in a module here and list its `EMU` handle in
//! [`EMU_KERNELS`].

pub mod block_bucketize_sparse_features;
pub mod ceilings;
pub mod dot_interaction;
pub mod dot_interaction_backward;
pub mod embedding_backward_rowwise_adagrad;
pub mod embedding_bag_int8_rowwise;
pub mod embedding_bag_sum;
pub mod embedding_bag_weighted_sum_bf16;
pub mod faults;
pub mod fingerprint;
pub mod fm_interaction;
pub mod kjt_permute;
pub mod radix_sort;
pub mod scan;
pub mod selftest;
pub mod sequence_gather_padded_bf16;
pub mod tbe_forward_fp16;
pub mod torch_ops;
pub mod unique_indices;

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
    embedding_bag_weighted_sum_bf16::embedding_bag_weighted_sum_bf16_reference::EMU,
    tbe_forward_fp16::tbe_forward_fp16_table_reference::EMU,
    embedding_bag_int8_rowwise::embedding_bag_int8_rowwise_reference::EMU,
    embedding_backward_rowwise_adagrad::adagrad_hash_clear::EMU,
    embedding_backward_rowwise_adagrad::adagrad_hash_insert::EMU,
    embedding_backward_rowwise_adagrad::adagrad_hash_assign::EMU,
    embedding_backward_rowwise_adagrad::adagrad_zero_rows::EMU,
    embedding_backward_rowwise_adagrad::adagrad_accumulate::EMU,
    embedding_backward_rowwise_adagrad::adagrad_update::EMU,
    dot_interaction::dot_interaction_cat_reference::EMU,
    dot_interaction::dot_interaction_bmm_nt_reference::EMU,
    dot_interaction::dot_interaction_tril_gather_reference::EMU,
    dot_interaction_backward::dot_interaction_backward_zero_reference::EMU,
    dot_interaction_backward::dot_interaction_backward_tril_scatter_reference::EMU,
    dot_interaction_backward::dot_interaction_backward_add_transpose_reference::EMU,
    dot_interaction_backward::dot_interaction_backward_bmm_nn_reference::EMU,
    dot_interaction_backward::dot_interaction_backward_add_reference::EMU,
    fm_interaction::fm_interaction_sum_dim1_reference::EMU,
    fm_interaction::fm_interaction_square_reference::EMU,
    fm_interaction::fm_interaction_sub_reference::EMU,
    fm_interaction::fm_interaction_sum_last_reference::EMU,
    fm_interaction::fm_interaction_scale_reference::EMU,
    faults::fault_spin_forever::EMU,
    faults::fault_write_address::EMU,
    faults::exploit_first_call_only::EMU,
    faults::exploit_zero_first_index::EMU,
    fingerprint::fingerprint_words::EMU,
    scan::scan_init::EMU,
    scan::inclusive_sum_i64::EMU,
    scan::inclusive_sum_i32_to_i64::EMU,
    radix_sort::radix_sort_init::EMU,
    radix_sort::radix_sort_histogram::EMU,
    radix_sort::radix_sort_bin_offsets::EMU,
    radix_sort::radix_sort_onesweep::EMU,
    torch_ops::aten_arange_i64::EMU,
    torch_ops::aten_cast_i32_to_i64::EMU,
    torch_ops::aten_cast_i64_to_i32::EMU,
    torch_ops::aten_sub_i64::EMU,
    torch_ops::aten_sub_i64_i32::EMU,
    torch_ops::aten_add_i64::EMU,
    torch_ops::aten_add_i64_i32::EMU,
    torch_ops::aten_mul_i64::EMU,
    torch_ops::aten_floor_divide_i64::EMU,
    torch_ops::aten_mul_scalar_i64::EMU,
    torch_ops::aten_floor_divide_scalar_i64::EMU,
    torch_ops::aten_floor_divide_scalar_i32::EMU,
    torch_ops::aten_remainder_scalar_i64::EMU,
    torch_ops::aten_lt_scalar_i64::EMU,
    torch_ops::aten_where_i64::EMU,
    torch_ops::aten_masked_fill_i64::EMU,
    torch_ops::aten_index_i64::EMU,
    torch_ops::aten_index_f32::EMU,
    torch_ops::aten_index_i64_by_i32::EMU,
    torch_ops::aten_scatter_i64::EMU,
    torch_ops::aten_fill_i64::EMU,
    torch_ops::aten_gather_rows16::EMU,
    unique_indices::unique_adjacent_difference::EMU,
    unique_indices::unique_run_ends::EMU,
    unique_indices::unique_counts_from_ends::EMU,
    sequence_gather_padded_bf16::aten_ge_outer_i64::EMU,
    sequence_gather_padded_bf16::aten_add_outer_i64::EMU,
    sequence_gather_padded_bf16::aten_masked_fill_rows_u16::EMU,
    kjt_permute::aten_repeat_interleave_i32::EMU,
    torch_ops::aten_reduce_partial_i64::EMU,
    torch_ops::aten_reduce_final_i64::EMU,
    torch_ops::aten_histogram_i64::EMU,
];
