//! Every problem of the catalog, in catalog order.
use crate::problems;
use crate::spec::Problem;

/// All registered problems.
pub fn all_problems() -> Vec<&'static dyn Problem> {
    vec![&problems::embedding_bag_sum::EmbeddingBagSum]
}

/// A problem by name.
pub fn find_problem(name: &str) -> Option<&'static dyn Problem> {
    all_problems().into_iter().find(|p| p.name() == name)
}
