//! What the problems' tests share: the input sets they draw at `ci` size. (Family-specific
//! checks are in the families' `testing` modules.)
use crate::spec::{InputSet, Preset, Problem, Sizes};

/// `p`'s input set of seed `seed` at its `ci` sizes.
pub(crate) fn ci_set(p: &dyn Problem, seed: u64) -> InputSet {
    p.generate(Preset::Ci, &p.sizes(Preset::Ci), seed.into())
        .unwrap()
}

/// `p`'s `ci` sizes, then each of its `ci` edge size sets, with the input set of seed `seed`
/// drawn at each.
pub(crate) fn ci_and_edge_sets(p: &dyn Problem, seed: u64) -> Vec<(Sizes, InputSet)> {
    std::iter::once(p.sizes(Preset::Ci))
        .chain(p.edge_sizes(Preset::Ci))
        .map(|sizes| {
            let set = p.generate(Preset::Ci, &sizes, seed.into()).unwrap();
            (sizes, set)
        })
        .collect()
}
