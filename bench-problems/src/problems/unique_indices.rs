//! Problem 9, `unique_indices`: deduplicate a batch of lookups.
//!
//! `torch.unique(indices, sorted=True, return_inverse=True, return_counts=True)`: the sorted
//! distinct values `unique`, `inverse[i]` = position of `indices[i]` in `unique`, and `counts`
//! (occurrences of each distinct value). Their number U depends on the data: `unique` and
//! `counts` are allocated at N and only their first U elements are checked (and must hold no
//! poison); U itself is the one-element output `num_unique`. Everything is checked exactly.
//!
//! Inputs: N int64 ids, Zipf(α = 1.15) over a table of E rows with the hot rows scattered (the
//! indices of one embedding table's lookups in a training batch). Edge sets: all ids equal
//! (E = 1), all ids distinct (`DISTINCT = 1`: N different rows in random order), one id.
//!
//! The reference is eager PyTorch's CUDA `unique` launch for launch (see
//! `gpu_kernels::kernels::unique_indices`): arange, CUB's onesweep radix sort of (id, position)
//! over all 64 key bits, the adjacent-difference kernel, CUB's inclusive scan, the inverse
//! scatter, and a run-length encoding.
use crate::problem::problem_identity;
use crate::families::sparse::{
    apply_grid, scratch_of, sizes_in, unique_of_indices, unique_scratch, with_sizes, SortScratch,
};
use crate::launch::{LaunchSpec, ScratchSpec};
use crate::spec::Seeds;
use crate::spec::{
    oracle_of, sizes_of, InputSet, Oracle, OracleOutput, Preset, Problem, ProblemError, Sizes,
    TensorSpec, Work,
};
use data_gen::{lookup_indices, seed::derive_str, DType, IndexRecipe, RowPermutation};
use rayon::prelude::*;
use serde_json::json;

/// The problem.
pub struct UniqueIndices;

const NAME: &str = "unique_indices";
/// Zipf exponent of the ids (FBGEMM's recommended training value).
const ALPHA: f64 = 1.15;

/// Sorted distinct values, inverse and counts (the oracle, also used by tests).
pub fn unique_with_inverse_and_counts(indices: &[i64]) -> (Vec<i64>, Vec<i64>, Vec<i64>) {
    let mut sorted = indices.to_vec();
    sorted.par_sort_unstable();
    let mut unique = Vec::new();
    let mut counts = Vec::new();
    for &v in &sorted {
        if unique.last() == Some(&v) {
            *counts.last_mut().unwrap() += 1;
        } else {
            unique.push(v);
            counts.push(1i64);
        }
    }
    let inverse = indices
        .par_iter()
        .map(|v| unique.binary_search(v).expect("present") as i64)
        .collect();
    (unique, inverse, counts)
}

/// The edge sets of sizes `base`: every id equal (E = 1), every id distinct (E at least N),
/// a single id.
fn edges_of(base: &Sizes) -> Vec<Sizes> {
    let (n, e) = (base["N"], base["E"]);
    vec![
        with_sizes(base, &[("E", 1)]),
        with_sizes(base, &[("E", e.max(n)), ("DISTINCT", 1)]),
        with_sizes(base, &[("N", 1)]),
    ]
}

impl Problem for UniqueIndices {
    problem_identity!(
        9,
        NAME,
        "torch.unique(sorted, return_inverse, return_counts) of N Zipf(1.15) int64 ids; U in a scalar output"
    );

    fn tensors(&self) -> Vec<TensorSpec> {
        vec![
            TensorSpec::input("indices", DType::I64, &["N"]),
            TensorSpec::output("unique", DType::I64, &["N"]),
            TensorSpec::output("inverse", DType::I64, &["N"]),
            TensorSpec::output("counts", DType::I64, &["N"]),
            TensorSpec::output("num_unique", DType::I64, &["1"]),
        ]
    }

    fn sizes(&self, preset: Preset) -> Sizes {
        let (n, e): (i64, i64) = match preset {
            Preset::Ci => (3000, 2000),
            Preset::Small => (1 << 20, 2 << 20),
            Preset::Full => (10_000_000, 16 << 20),
        };
        sizes_of(&[("N", n), ("E", e), ("DISTINCT", 0)])
    }

    fn shapes(&self, preset: Preset) -> Vec<crate::shapes::Shape> {
        let n = self.sizes(preset)["N"];
        let shapes: &[crate::shapes::Variation] = match preset {
            Preset::Ci => &[("e64", &[("E", 64)], "64 rows: most ids repeat")],
            _ => &[
                ("n-tenth", &[("N", n / 10)], "a tenth of the ids"),
                ("e65536", &[("E", 65536)], "65536 rows: most ids repeat"),
                ("n-triple", &[("N", n * 3)], "three times the ids"),
            ],
        };
        crate::shapes::shapes_of(self.sizes(preset), shapes)
    }

    fn recipe(&self, _preset: Preset) -> serde_json::Value {
        json!({
            "indices": {"distribution": "bounded_zipf", "alpha": ALPHA, "rows": "E", "scatter_hot_rows": true},
            "DISTINCT": "1: the N ids are N distinct rows of E in random order (edge case)",
            "edge_cases": ["all ids equal (E = 1)", "all ids distinct", "a single id"],
        })
    }

    fn generate(&self, _: Preset, sizes: &Sizes, seeds: Seeds) -> Result<InputSet, ProblemError> {
        let seed = seeds.set;
        let [n, e] = sizes_in(sizes, NAME, ["N", "E"])?;
        let distinct = sizes.get("DISTINCT").copied().unwrap_or(0) != 0;
        if n < 1 || e < 1 || (distinct && n > e) {
            return Err(ProblemError::invalid(
                NAME,
                format!("need 1 <= N and 1 <= E (N <= E when DISTINCT), got N={n} E={e}"),
            ));
        }
        let indices = if distinct {
            let perm = RowPermutation::hashed(e as u64, derive_str(seed, "distinct"))?;
            (0..n as u64)
                .into_par_iter()
                .map(|k| perm.map(k) as i64)
                .collect()
        } else {
            let recipe = IndexRecipe {
                rows: e as u64,
                alpha: ALPHA,
                scatter_hot_rows: true,
            };
            lookup_indices(&recipe, n as usize, derive_str(seed, "indices"))?
        };
        Ok(InputSet::builder(seed, sizes)
            .i64("indices", &[n as usize], indices)?
            .build())
    }

    fn edge_sizes(&self, preset: Preset) -> Vec<Sizes> {
        edges_of(&self.sizes(preset))
    }

    fn edge_sizes_at(&self, _preset: Preset, base: &Sizes) -> Vec<Sizes> {
        edges_of(base)
    }

    fn oracle(&self, inputs: &InputSet) -> Result<Oracle, ProblemError> {
        let (unique, inverse, counts) = unique_with_inverse_and_counts(&inputs.i64s("indices")?);
        let u = unique.len() as i64;
        Ok(oracle_of([
            ("unique", OracleOutput::Int(unique)),
            ("inverse", OracleOutput::Int(inverse)),
            ("counts", OracleOutput::Int(counts)),
            ("num_unique", OracleOutput::Int(vec![u])),
        ]))
    }

    fn checked_prefix(&self, output: &str) -> bool {
        matches!(output, "unique" | "counts")
    }

    fn work(&self, inputs: &InputSet) -> Work {
        let n = inputs.count("N") as f64;
        let u = inputs
            .i64s("indices")
            .map(|mut v| {
                v.par_sort_unstable();
                v.dedup();
                v.len()
            })
            .unwrap_or(0) as f64;
        // Read the ids, write the inverse, the distinct values and their counts, and U.
        let bytes = n * 8.0 + n * 8.0 + 2.0 * u * 8.0 + 8.0;
        Work {
            compulsory_bytes: bytes,
            logical_bytes: bytes,
            flops: 0.0,
            gathered: None,
        }
    }

    fn input_stats(&self, inputs: &InputSet) -> serde_json::Value {
        let Ok(indices) = inputs.i64s("indices") else {
            return serde_json::Value::Null;
        };
        let (unique, _, counts) = unique_with_inverse_and_counts(&indices);
        let top = counts.iter().copied().max().unwrap_or(0);
        json!({
            "N": indices.len(),
            "unique": unique.len(),
            "mean_count": indices.len() as f64 / unique.len().max(1) as f64,
            "hottest_share": top as f64 / indices.len().max(1) as f64,
            "seen_once": counts.iter().filter(|&&c| c == 1).count(),
        })
    }

    fn reference(&self) -> Vec<LaunchSpec> {
        let mut plan = unique_of_indices("unique", "inverse");
        plan.push(apply_grid(
            "unique_counts_from_ends",
            "N",
            &["counts", "run_ends", "num_unique"],
        ));
        plan
    }

    fn reference_scratch(&self) -> Vec<ScratchSpec> {
        let mut s = unique_scratch();
        s.extend(scratch_of(&[("run_ends", "max(N, 1) * 8")]));
        s.extend(SortScratch::new("sort").specs("N"));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::ci_set;
    crate::selftest::self_test_case!(UniqueIndices);

    #[test]
    fn inputs_are_skewed_ids_in_range_and_deterministic() {
        let p = UniqueIndices;
        let set = ci_set(&p, 5);
        let idx = set.i64s("indices").unwrap();
        assert_eq!(idx.len(), 3000);
        assert!(idx.iter().all(|&i| (0..2000).contains(&i)));
        let (unique, _, counts) = unique_with_inverse_and_counts(&idx);
        assert!(
            unique.len() < 1500,
            "skewed: {} distinct of 3000",
            unique.len()
        );
        assert!(*counts.iter().max().unwrap() > 100, "a hot id");
        assert_eq!(ci_set(&p, 5).tensors, set.tensors);
        assert_ne!(ci_set(&p, 6).tensors, set.tensors);
    }

    #[test]
    fn edge_sets_are_all_equal_all_distinct_and_single() {
        let p = UniqueIndices;
        let edges = p.edge_sizes(Preset::Ci);
        let ids = |s: &Sizes| {
            p.generate(Preset::Ci, s, 1.into())
                .unwrap()
                .i64s("indices")
                .unwrap()
        };
        assert!(ids(&edges[0]).iter().all(|&i| i == 0));
        let distinct = ids(&edges[1]);
        let (unique, _, counts) = unique_with_inverse_and_counts(&distinct);
        assert_eq!(unique.len(), 3000);
        assert!(counts.iter().all(|&c| c == 1));
        assert!(
            distinct.windows(2).any(|w| w[0] > w[1]),
            "not already sorted"
        );
        assert_eq!(ids(&edges[2]).len(), 1);
    }

    #[test]
    fn oracle_is_torch_unique() {
        let idx = vec![5, 3, 5, 9, 3, 5, -1];
        let (u, inv, c) = unique_with_inverse_and_counts(&idx);
        assert_eq!(u, vec![-1, 3, 5, 9]);
        assert_eq!(inv, vec![2, 1, 2, 3, 1, 2, 0]);
        assert_eq!(c, vec![1, 2, 3, 1]);
        let p = UniqueIndices;
        let set = ci_set(&p, 2);
        let out = p.oracle(&set).unwrap();
        let OracleOutput::Int(num) = &out["num_unique"] else {
            panic!()
        };
        assert_eq!(out["unique"].len(), num[0] as usize);
        assert_eq!(out["counts"].len(), num[0] as usize);
        assert_eq!(out["inverse"].len(), 3000);
        assert!(
            p.checked_prefix("unique")
                && p.checked_prefix("counts")
                && !p.checked_prefix("inverse")
        );
    }

    #[test]
    fn work_counts_the_compulsory_traffic() {
        let p = UniqueIndices;
        let set = ci_set(&p, 2);
        let OracleOutput::Int(num) = &p.oracle(&set).unwrap()["num_unique"] else {
            panic!()
        };
        let w = p.work(&set);
        assert_eq!(w.compulsory_bytes, (3000 * 16 + num[0] * 16 + 8) as f64);
    }
}
