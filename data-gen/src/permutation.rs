//! Seeded random permutations of table rows, used to scatter the hot Zipf ranks over the
//! table instead of packing them at its start.

use rand::seq::SliceRandom;

use crate::error::DataGenError;
use crate::seed::rng;

/// A seeded uniformly random permutation of `0..n` (Fisher–Yates via rand's shuffle on a
/// `Vec<u32>`, `n < 2^32`), a hashed (Feistel) pseudo-random permutation that needs no memory,
/// or the identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowPermutation {
    n: u64,
    map: Repr,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Repr {
    Identity,
    Table(Vec<u32>),
    /// A 4-round balanced Feistel network over `2 * half_bits` bits with cycle walking.
    Feistel {
        half_bits: u32,
        keys: [u64; 4],
    },
}

impl RowPermutation {
    /// A uniformly random permutation of `0..n`; `n` must be below 2^32.
    pub fn new(n: u64, seed: u64) -> Result<Self, DataGenError> {
        if n > u64::from(u32::MAX) + 1 {
            return Err(DataGenError::invalid("n", n, "must be at most 2^32 rows"));
        }
        let mut map: Vec<u32> = (0..n).map(|i| i as u32).collect();
        map.shuffle(&mut rng(seed));
        Ok(Self {
            n,
            map: Repr::Table(map),
        })
    }

    /// A keyed pseudo-random permutation of `0..n` computed on the fly (a 4-round Feistel
    /// network keyed from `seed`, cycle-walking into range): O(1) memory and set-up, for tables
    /// of tens of millions of rows where a shuffled table would cost seconds and hundreds of MB.
    /// Any `n <= 2^62`.
    pub fn hashed(n: u64, seed: u64) -> Result<Self, DataGenError> {
        if n > 1 << 62 {
            return Err(DataGenError::invalid("n", n, "must be at most 2^62 rows"));
        }
        let bits = 64 - n.saturating_sub(1).leading_zeros();
        let half_bits = bits.div_ceil(2).max(1);
        let keys = std::array::from_fn(|i| crate::seed::derive(seed, i as u64));
        Ok(Self {
            n,
            map: Repr::Feistel { half_bits, keys },
        })
    }

    /// The identity permutation of `0..n` (no memory used).
    pub fn identity(n: u64) -> Self {
        Self {
            n,
            map: Repr::Identity,
        }
    }

    /// The row that `rank` lands on. Panics if `rank >= len()`.
    #[inline]
    pub fn map(&self, rank: u64) -> u64 {
        assert!(rank < self.n, "rank {rank} out of range 0..{}", self.n);
        match &self.map {
            Repr::Identity => rank,
            Repr::Table(m) => u64::from(m[rank as usize]),
            Repr::Feistel { half_bits, keys } => {
                let mask = (1u64 << half_bits) - 1;
                let mut x = rank;
                // Cycle walking: the network permutes 0..2^(2h) ⊇ 0..n; iterate until back in
                // range (fewer than 4 steps on average, as 2^(2h) < 4n).
                loop {
                    let (mut l, mut r) = (x >> half_bits, x & mask);
                    for &k in keys {
                        (l, r) = (r, l ^ (crate::seed::mix64(r ^ k) & mask));
                    }
                    x = (l << half_bits) | r;
                    if x < self.n {
                        return x;
                    }
                }
            }
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
        self.map == Repr::Identity
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

    #[test]
    fn hashed_is_a_bijection_that_scatters() {
        for n in [1u64, 2, 3, 17, 1000, 65_537, 300_000] {
            let p = RowPermutation::hashed(n, 5).unwrap();
            let mut seen = vec![false; n as usize];
            for r in 0..n {
                let row = p.map(r);
                assert!(row < n && !seen[row as usize], "n {n}: row {row}");
                seen[row as usize] = true;
            }
        }
        let (a, b) = (
            RowPermutation::hashed(1 << 20, 1).unwrap(),
            RowPermutation::hashed(1 << 20, 2).unwrap(),
        );
        assert_ne!(a.map(0), b.map(0));
        // The hottest ranks land far apart, not packed at the table's start.
        let hot: Vec<u64> = (0..1000).map(|r| a.map(r)).collect();
        assert!(hot.iter().filter(|&&x| x < 1 << 16).count() < 150);
        assert!(!a.is_identity());
        assert!(RowPermutation::hashed((1 << 62) + 1, 0).is_err());
    }
}
