//! One module per problem. (`bags` and `sparse` are re-exported from [`crate::families`].)
pub use crate::families::{bags, sparse};
pub mod block_bucketize_sparse_features;
pub mod dot_interaction;
pub mod dot_interaction_backward;
pub mod embedding_backward_rowwise_adagrad;
pub mod embedding_bag_int8_rowwise;
pub mod embedding_bag_sum;
pub mod embedding_bag_weighted_sum_bf16;
pub mod fm_interaction;
pub mod kjt_permute;
pub mod sequence_gather_padded_bf16;
pub mod tbe_forward_fp16;
pub mod unique_indices;
