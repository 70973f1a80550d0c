//! One module per problem.
pub mod embedding_bag_sum;
