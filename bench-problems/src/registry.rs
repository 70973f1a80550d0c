//! Every problem of the catalog, in catalog order.
use crate::problems;
use crate::spec::Problem;

/// All registered problems.
pub fn all_problems() -> Vec<&'static dyn Problem> {
    vec![
        &problems::embedding_bag_sum::EmbeddingBagSum,
        &problems::embedding_bag_weighted_sum_bf16::EmbeddingBagWeightedSumBf16,
        &problems::tbe_forward_fp16::TbeForwardFp16,
        &problems::embedding_bag_int8_rowwise::EmbeddingBagInt8Rowwise,
        &problems::embedding_backward_rowwise_adagrad::EmbeddingBackwardRowwiseAdagrad,
        &problems::sequence_gather_padded_bf16::SequenceGatherPaddedBf16,
        &problems::kjt_permute::KjtPermute,
        &problems::block_bucketize_sparse_features::BlockBucketizeSparseFeatures,
        &problems::unique_indices::UniqueIndices,
        &problems::dot_interaction::DotInteraction,
        &problems::dot_interaction_backward::DotInteractionBackward,
        &problems::fm_interaction::FmInteraction,
    ]
}

/// A problem by name.
pub fn find_problem(name: &str) -> Option<&'static dyn Problem> {
    all_problems().into_iter().find(|p| p.name() == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn twelve_problems_in_catalog_order_with_unique_names() {
        let all = all_problems();
        assert_eq!(
            all.iter().map(|p| p.number()).collect::<Vec<_>>(),
            (1..=12).collect::<Vec<_>>()
        );
        for p in &all {
            assert_eq!(find_problem(p.name()).map(|q| q.number()), Some(p.number()));
        }
    }
}
