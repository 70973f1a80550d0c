//! Seeded random permutations of table rows, used to scatter the hot Zipf ranks over the
//! table instead of packing them at its start.

use rand::seq::SliceRandom;

use crate::error::DataGenError;
use crate::seed::rng;

/// A seeded uniformly random permutation of `0..n` (Fisher–Yates via rand's shuffle on a
/// `Vec<u32>`, `n < 2^32`), or the identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowPermutation {
    n: u64,
    /// `None` for the identity.
    map: Option<Vec<u32>>,
}

impl RowPermutation {
    /// A uniformly random permutation of `0..n`; `n` must be below 2^32.
    pub fn new(n: u64, seed: u64) -> Result<Self, DataGenError> {
        if n > u64::from(u32::MAX) + 1 {
            return Err(DataGenError::invalid("n", n, "must be at most 2^32 rows"));
        }
        let mut map: Vec<u32> = (0..n).map(|i| i as u32).collect();
        map.shuffle(&mut rng(seed));
        Ok(Self { n, map: Some(map) })
    }

    /// The identity permutation of `0..n` (no memory used).
    pub fn identity(n: u64) -> Self {
        Self { n, map: None }
    }

    /// The row that `rank` lands on. Panics if `rank >= len()`.
    #[inline]
    pub fn map(&self, rank: u64) -> u64 {
        assert!(rank < self.n, "rank {rank} out of range 0..{}", self.n);
        match &self.map {
            None => rank,
            Some(m) => u64::from(m[rank as usize]),
        }
    }

    /// Number of elements permuted.
    pub fn len(&self) -> u64 {
        self.n
    }

    /// Whether the permutation is over an empty range.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Whether this is the identity (built by [`RowPermutation::identity`]).
    pub fn is_identity(&self) -> bool {
        self.map.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_a_bijection() {
        for n in [0u64, 1, 2, 17, 10_000] {
            let p = RowPermutation::new(n, 11).unwrap();
            assert_eq!(p.len(), n);
            let mut seen = vec![false; n as usize];
            for r in 0..n {
                let row = p.map(r);
                assert!(row < n);
                assert!(!seen[row as usize], "row {row} hit twice");
                seen[row as usize] = true;
            }
            assert!(seen.iter().all(|&s| s));
        }
    }

    #[test]
    fn seeded() {
        let a = RowPermutation::new(1000, 1).unwrap();
        let b = RowPermutation::new(1000, 1).unwrap();
        let c = RowPermutation::new(1000, 2).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
        // A random permutation moves almost everything.
        let fixed = (0..1000).filter(|&r| a.map(r) == r).count();
        assert!(fixed < 10, "{fixed} fixed points");
    }

    #[test]
    fn identity_maps_to_itself() {
        let p = RowPermutation::identity(5);
        assert!(p.is_identity());
        assert_eq!(
            (0..5).map(|r| p.map(r)).collect::<Vec<_>>(),
            vec![0, 1, 2, 3, 4]
        );
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn out_of_range_rank_panics() {
        RowPermutation::identity(3).map(3);
    }

    #[test]
    fn too_many_rows_is_an_error() {
        let e = RowPermutation::new(1 << 33, 0).unwrap_err();
        assert!(e.to_string().contains("`n`"), "{e}");
    }
}
