//! Every problem of the catalog, in catalog order.
use crate::problem::Problem;
use crate::problems;

/// All registered problems ([`problems::CATALOG`]).
pub fn all_problems() -> Vec<&'static dyn Problem> {
    problems::CATALOG.to_vec()
}

/// A problem by name.
pub fn find_problem(name: &str) -> Option<&'static dyn Problem> {
    all_problems().into_iter().find(|p| p.name() == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_are_numbered_in_catalog_order_with_unique_names() {
        let all = all_problems();
        assert!(all.len() >= 12, "the v1 catalog has twelve problems");
        assert_eq!(
            all.iter().map(|p| p.number()).collect::<Vec<_>>(),
            (1..=all.len() as u32).collect::<Vec<_>>()
        );
        for p in &all {
            assert_eq!(find_problem(p.name()).map(|q| q.number()), Some(p.number()));
        }
    }
}
