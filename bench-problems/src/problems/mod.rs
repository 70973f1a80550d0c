//! One module per problem, registered in catalog order by the one line each has in
//! [`catalog!`] below (`dlrm-bench new-problem` adds it). `bags` and `sparse` are re-exported
//! from [`crate::families`] for older paths.
pub use crate::families::{bags, sparse};

/// Declares each problem's module and lists its type in [`CATALOG`], in catalog order.
macro_rules! catalog {
    ($($module:ident :: $problem:ident),* $(,)?) => {
        $(pub mod $module;)*

        /// Every problem, in catalog order (problem k at index k − 1).
        pub static CATALOG: &[&dyn crate::problem::Problem] = &[$(&$module::$problem),*];
    };
}

catalog! {
    embedding_bag_sum::EmbeddingBagSum,
    embedding_bag_weighted_sum_bf16::EmbeddingBagWeightedSumBf16,
    tbe_forward_fp16::TbeForwardFp16,
    embedding_bag_int8_rowwise::EmbeddingBagInt8Rowwise,
    embedding_backward_rowwise_adagrad::EmbeddingBackwardRowwiseAdagrad,
    sequence_gather_padded_bf16::SequenceGatherPaddedBf16,
    kjt_permute::KjtPermute,
    block_bucketize_sparse_features::BlockBucketizeSparseFeatures,
    unique_indices::UniqueIndices,
    dot_interaction::DotInteraction,
    dot_interaction_backward::DotInteractionBackward,
    fm_interaction::FmInteraction,
}
