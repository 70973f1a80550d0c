//! Zipf-distributed row indices for embedding lookups: rank ~ BoundedZipf(rows, alpha), row =
//! permutation(rank). Generated in parallel over fixed-size chunks, deterministic in the seed.
//!
//! The Zipf sampler uses the platform's `pow` (rand_distr's `std_math`); two libms that differ
//! in the last bit could only change a draw that sits on a rounding boundary (~1e-16 per draw).

use rayon::prelude::*;

use crate::error::DataGenError;
use crate::permutation::RowPermutation;
use crate::seed::{chunk_rng, derive_str};
use crate::zipf::BoundedZipf;

/// Lookups per RNG chunk. Fixed, so the output never depends on the thread count.
pub const LOOKUP_CHUNK: usize = 1 << 15;

/// How to draw the row indices of one table.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct IndexRecipe {
    /// Table rows (E).
    pub rows: u64,
    /// Zipf exponent (0 = uniform).
    pub alpha: f64,
    /// Scatter the hot ranks over the table with a seeded permutation; otherwise rank k is
    /// row k (the hottest row is row 0).
    pub scatter_hot_rows: bool,
}

impl IndexRecipe {
    /// The rank → row map this recipe uses for `seed` (what [`bag_indices`] uses).
    pub fn permutation(&self, seed: u64) -> Result<RowPermutation, DataGenError> {
        if self.scatter_hot_rows {
            RowPermutation::new(self.rows, derive_str(seed, "row-permutation"))
        } else {
            Ok(RowPermutation::identity(self.rows))
        }
    }
}

/// A ready-to-use sampler: the Zipf and the permutation, built once and reusable for several
/// batches that share the same hot rows.
#[derive(Clone, Debug)]
pub struct IndexSampler {
    zipf: BoundedZipf,
    permutation: RowPermutation,
}

impl IndexSampler {
    /// Build the sampler of `recipe`; the permutation is derived from `table_seed`.
    pub fn new(recipe: &IndexRecipe, table_seed: u64) -> Result<Self, DataGenError> {
        Ok(Self {
            zipf: BoundedZipf::new(recipe.rows, recipe.alpha)?,
            permutation: recipe.permutation(table_seed)?,
        })
    }

    /// A sampler from its parts; `permutation` must cover the Zipf's ranks.
    pub fn from_parts(
        zipf: BoundedZipf,
        permutation: RowPermutation,
    ) -> Result<Self, DataGenError> {
        if permutation.len() != zipf.n() {
            return Err(DataGenError::invalid(
                "permutation.len",
                permutation.len(),
                "must equal the Zipf's number of ranks",
            ));
        }
        Ok(Self { zipf, permutation })
    }

    /// The rank → row map.
    pub fn permutation(&self) -> &RowPermutation {
        &self.permutation
    }

    /// The rank distribution.
    pub fn zipf(&self) -> &BoundedZipf {
        &self.zipf
    }

    /// `count` independent row indices, deterministic in `seed`; lookup `i` depends only on
    /// (`seed`, `i / LOOKUP_CHUNK`), so a prefix is stable when `count` grows.
    pub fn sample(&self, count: usize, seed: u64) -> Vec<i64> {
        let mut out = vec![0i64; count];
        self.sample_into(&mut out, seed);
        out
    }

    /// [`IndexSampler::sample`]`(out.len(), seed)` written into `out` (a piece of a larger
    /// buffer: no copy of its own).
    pub fn sample_into(&self, out: &mut [i64], seed: u64) {
        let stream = derive_str(seed, "zipf-ranks");
        out.par_chunks_mut(LOOKUP_CHUNK)
            .enumerate()
            .for_each(|(c, chunk)| {
                let mut rng = chunk_rng(stream, c);
                for idx in chunk {
                    *idx = self.permutation.map(self.zipf.sample(&mut rng)) as i64;
                }
            });
    }
}

/// Zipf-distributed row indices for bags: `sum(lengths)` lookups, each with rank ~
/// BoundedZipf(rows, alpha) and row = permutation.map(rank) (the permutation derived from the
/// same `seed`). Lookups are independent, so the flat index list is generated in fixed chunks of
/// lookups, in parallel, deterministically.
pub fn bag_indices(
    recipe: &IndexRecipe,
    lengths: &[u32],
    seed: u64,
) -> Result<Vec<i64>, DataGenError> {
    let total: usize = lengths.iter().map(|&l| l as usize).sum();
    lookup_indices(recipe, total, seed)
}

/// `count` Zipf-distributed row indices without bag structure (e.g. for `unique_indices`).
pub fn lookup_indices(
    recipe: &IndexRecipe,
    count: usize,
    seed: u64,
) -> Result<Vec<i64>, DataGenError> {
    Ok(IndexSampler::new(recipe, seed)?.sample(count, seed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pooling::Pooling;

    fn counts(indices: &[i64], rows: u64) -> Vec<u64> {
        let mut c = vec![0u64; rows as usize];
        for &i in indices {
            assert!((0..rows as i64).contains(&i), "index {i} out of range");
            c[i as usize] += 1;
        }
        c
    }

    fn argmax(c: &[u64]) -> usize {
        (0..c.len()).max_by_key(|&i| c[i]).unwrap()
    }

    #[test]
    fn range_and_hot_rows() {
        let rows = 10_000u64;
        let lengths = Pooling::Fixed { length: 20 }.lengths(10_000, 0).unwrap();
        for seed in [1u64, 2, 3] {
            let scattered = IndexRecipe {
                rows,
                alpha: 1.15,
                scatter_hot_rows: true,
            };
            let idx = bag_indices(&scattered, &lengths, seed).unwrap();
            assert_eq!(idx.len(), 200_000);
            let c = counts(&idx, rows);
            let hot = argmax(&c);
            assert_ne!(
                hot, 0,
                "seed {seed}: hottest row should be scattered away from 0"
            );
            assert_eq!(hot as u64, scattered.permutation(seed).unwrap().map(0));

            let packed = IndexRecipe {
                scatter_hot_rows: false,
                ..scattered
            };
            let c = counts(&bag_indices(&packed, &lengths, seed).unwrap(), rows);
            assert_eq!(argmax(&c), 0);
        }
    }

    #[test]
    fn top_one_percent_share_matches_pmf() {
        let (rows, alpha, n) = (10_000u64, 1.15, 400_000usize);
        let recipe = IndexRecipe {
            rows,
            alpha,
            scatter_hot_rows: true,
        };
        let idx = lookup_indices(&recipe, n, 42).unwrap();
        // Oracle: the hottest 1% of rows, found from the data alone, vs the exact pmf mass of
        // the top 1% ranks.
        let mut c = counts(&idx, rows);
        c.sort_unstable_by(|a, b| b.cmp(a));
        let top = (rows / 100) as usize;
        let share = c[..top].iter().sum::<u64>() as f64 / n as f64;
        let w: Vec<f64> = (1..=rows).map(|k| (k as f64).powf(-alpha)).collect();
        let expected = w[..top].iter().sum::<f64>() / w.iter().sum::<f64>();
        assert!(
            (share / expected - 1.0).abs() < 0.02,
            "share {share}, pmf {expected}"
        );
    }

    #[test]
    fn deterministic_across_thread_counts() {
        let recipe = IndexRecipe {
            rows: 1 << 20,
            alpha: 1.05,
            scatter_hot_rows: true,
        };
        let lengths = Pooling::LogNormal {
            mean: 20.0,
            sigma: 1.0,
            max: 200,
        }
        .lengths(8_000, 5)
        .unwrap();
        let run = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| bag_indices(&recipe, &lengths, 9).unwrap())
        };
        let a = run(1);
        assert!(
            a.len() > 4 * LOOKUP_CHUNK,
            "needs several chunks, got {}",
            a.len()
        );
        assert_eq!(a, run(4));
        assert_ne!(a, bag_indices(&recipe, &lengths, 10).unwrap());
    }

    #[test]
    fn uniform_when_alpha_zero() {
        let rows = 100u64;
        let recipe = IndexRecipe {
            rows,
            alpha: 0.0,
            scatter_hot_rows: true,
        };
        let c = counts(&lookup_indices(&recipe, 100_000, 1).unwrap(), rows);
        // 1000 expected per row, sd ≈ 31.
        assert!(c.iter().all(|&x| (x as i64 - 1000).abs() < 200), "{c:?}");
    }

    #[test]
    fn sampler_reuse_and_errors() {
        let recipe = IndexRecipe {
            rows: 1000,
            alpha: 1.0,
            scatter_hot_rows: true,
        };
        let s = IndexSampler::new(&recipe, 3).unwrap();
        // Two batches sharing the table's hot rows but drawn from different seeds.
        let (a, b) = (s.sample(5000, 1), s.sample(5000, 2));
        assert_ne!(a, b);
        let hot = s.permutation().map(0) as i64;
        assert!(a.iter().filter(|&&i| i == hot).count() > 300);
        assert!(b.iter().filter(|&&i| i == hot).count() > 300);
        assert!(bag_indices(
            &IndexRecipe {
                rows: 0,
                ..recipe.clone()
            },
            &[1],
            0
        )
        .is_err());
        assert!(bag_indices(
            &IndexRecipe {
                alpha: -1.0,
                ..recipe.clone()
            },
            &[1],
            0
        )
        .is_err());
        assert!(bag_indices(&recipe, &[], 0).unwrap().is_empty());
        let bad = IndexSampler::from_parts(
            BoundedZipf::new(10, 1.0).unwrap(),
            RowPermutation::identity(9),
        );
        assert!(bad.is_err());
    }

    /// Full-size throughput check (E = 8M, N ≈ 2.6M); run with `--ignored --nocapture`.
    #[test]
    #[ignore]
    fn throughput_full_size() {
        let recipe = IndexRecipe {
            rows: 8 << 20,
            alpha: 1.15,
            scatter_hot_rows: true,
        };
        let lengths = Pooling::LogNormal {
            mean: 20.0,
            sigma: 1.0,
            max: 1000,
        }
        .lengths(131_072, 1)
        .unwrap();
        let t = std::time::Instant::now();
        let idx = bag_indices(&recipe, &lengths, 1).unwrap();
        eprintln!("{} lookups over 8M rows in {:?}", idx.len(), t.elapsed());
    }
}
