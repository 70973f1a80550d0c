//! Problem 2, `embedding_bag_weighted_sum_bf16`: one bf16 table, per-sample weights, sum
//! pooling, bf16 output.
//!
//! `out[b, :] = bf16(Σ_{j ∈ [offsets[b], offsets[b+1])} per_sample_weights[j] · weight[indices[j], :])`
//! with fp32 accumulation and one rounding to bf16 (nearest even) at the end: PyTorch
//! `F.embedding_bag(indices, weight, offsets, mode="sum", per_sample_weights=psw,
//! include_last_offset=True)` on bf16 tensors.
//!
//! Inputs: Zipf(α = 1.15) rows with hot rows scattered over the table; log-normal bag lengths
//! (σ = 1) of which 5% are then emptied, so the mean stays ≈ 20 (the log-normal's mean is 21);
//! bag 0 is empty and bag B/2 has the longest length; weights uniform in [-1, 1) and per-sample
//! weights uniform in [0, 2), both rounded to bf16.
//!
//! Tolerance: the bf16 default of DESIGN §6 (relative L2 1e-2, max error 2e-2 of ‖ref‖∞). A
//! correctly rounded output is off by at most half a bf16 ulp (2^-8 relative): ≈ 1.7e-3 in
//! relative L2 and ≈ 2.3e-3 in max error here. Accumulating in bf16 instead of fp32 gives
//! 1.6–2.2e-2 and 6–9e-2 with the `small`/`full` pooling (mean 20, tail to 1000), so the default
//! rejects it where it is timed; with the `ci` pooling (mean 8) bags are too short for that
//! (≈ 7e-3), which the tests record.
use super::bags::distinct_rows;
use super::bags::{bag_lengths, bag_stats, size};
use crate::launch::{LaunchSpec, ScratchSpec};
use crate::spec::{
    InputSet, OracleOutput, Preset, Problem, ProblemError, Role, Sizes, TensorSpec, Work,
};
use data_gen::values::uniform_bf16;
use data_gen::{
    bag_indices, offsets_from_lengths, seed::derive_str, DType, HostTensor, IndexRecipe, Pooling,
    TensorSet,
};
use rayon::prelude::*;
use serde_json::json;
use std::collections::BTreeMap;

/// The problem.
pub struct EmbeddingBagWeightedSumBf16;

const NAME: &str = "embedding_bag_weighted_sum_bf16";
/// Zipf exponent of the row indices (FBGEMM's recommended training value).
const ALPHA: f64 = 1.15;
/// Share of bags emptied after drawing their lengths.
const EMPTY_FRACTION: f64 = 0.05;
/// Per-sample weights are uniform in [0, PSW_HIGH).
const PSW_HIGH: f32 = 2.0;

fn pooling(preset: Preset) -> Pooling {
    match preset {
        Preset::Ci => Pooling::LogNormal {
            mean: 8.0,
            sigma: 1.0,
            max: 64,
        },
        // 21 before 5% of the bags are emptied: ≈ 20 lookups per bag in all.
        Preset::Small | Preset::Full => Pooling::LogNormal {
            mean: 21.0,
            sigma: 1.0,
            max: 1000,
        },
    }
}

impl Problem for EmbeddingBagWeightedSumBf16 {
    fn number(&self) -> u32 {
        2
    }

    fn name(&self) -> &'static str {
        NAME
    }

    fn summary(&self) -> &'static str {
        "bf16 table, bf16 per-sample weights, sum pooling, bf16 out (fp32 accumulate), 5% empty bags"
    }

    fn tensors(&self) -> Vec<TensorSpec> {
        vec![
            TensorSpec {
                name: "weight",
                dtype: DType::BF16,
                shape: &["E", "D"],
                role: Role::Input,
            },
            TensorSpec {
                name: "indices",
                dtype: DType::I64,
                shape: &["N"],
                role: Role::Input,
            },
            TensorSpec {
                name: "offsets",
                dtype: DType::I64,
                shape: &["B + 1"],
                role: Role::Input,
            },
            TensorSpec {
                name: "per_sample_weights",
                dtype: DType::BF16,
                shape: &["N"],
                role: Role::Input,
            },
            TensorSpec {
                name: "out",
                dtype: DType::BF16,
                shape: &["B", "D"],
                role: Role::Output,
            },
        ]
    }

    fn sizes(&self, preset: Preset) -> Sizes {
        let (e, d, b): (i64, i64, i64) = match preset {
            // D = 40: not a multiple of 32, so column chunks are partial.
            Preset::Ci => (4096, 40, 64),
            Preset::Small => (1 << 20, 128, 16384),
            Preset::Full => (8 << 20, 128, 131072),
        };
        [("E", e), ("D", d), ("B", b)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect()
    }

    fn recipe(&self, preset: Preset) -> serde_json::Value {
        json!({
            "indices": {"distribution": "bounded_zipf", "alpha": ALPHA, "scatter_hot_rows": true},
            "pooling": pooling(preset),
            "empty_bag_fraction": EMPTY_FRACTION,
            "weight": {"distribution": "uniform", "low": -1.0, "high": 1.0, "rounded_to": "bf16"},
            "per_sample_weights": {"distribution": "uniform", "low": 0.0, "high": PSW_HIGH, "rounded_to": "bf16"},
            "edge_cases": ["5% of bags empty", "bag 0 empty", "bag B/2 of the longest length"],
        })
    }

    fn generate(&self, preset: Preset, sizes: &Sizes, seed: u64) -> Result<InputSet, ProblemError> {
        let (e, d, b) = (
            size(sizes, NAME, "E")?,
            size(sizes, NAME, "D")?,
            size(sizes, NAME, "B")?,
        );
        let lengths = bag_lengths(&pooling(preset), b as usize, seed, EMPTY_FRACTION)?;
        let recipe = IndexRecipe {
            rows: e as u64,
            alpha: ALPHA,
            scatter_hot_rows: true,
        };
        let indices = bag_indices(&recipe, &lengths, derive_str(seed, "indices"))?;
        let offsets = offsets_from_lengths(&lengths);
        let n = indices.len();
        let weight = uniform_bf16((e * d) as usize, derive_str(seed, "weight"), -1.0, 1.0);
        let psw = uniform_bf16(n, derive_str(seed, "per_sample_weights"), 0.0, PSW_HIGH);
        let mut sizes = sizes.clone();
        sizes.insert("N".into(), n as i64);
        let mut tensors = TensorSet::new();
        tensors.insert(
            "weight",
            HostTensor::from_bf16(vec![e as usize, d as usize], weight)?,
        );
        tensors.insert("indices", HostTensor::from_i64(vec![n], indices)?);
        tensors.insert(
            "offsets",
            HostTensor::from_i64(vec![offsets.len()], offsets)?,
        );
        tensors.insert("per_sample_weights", HostTensor::from_bf16(vec![n], psw)?);
        Ok(InputSet {
            seed,
            sizes,
            scalars: BTreeMap::new(),
            tensors,
        })
    }

    fn edge_sizes(&self, preset: Preset) -> Vec<Sizes> {
        let mut one_bag = self.sizes(preset);
        one_bag.insert("B".into(), 1);
        vec![one_bag]
    }

    fn oracle(&self, inputs: &InputSet) -> Result<BTreeMap<String, OracleOutput>, ProblemError> {
        let d = size(&inputs.sizes, NAME, "D")? as usize;
        let weight = inputs.tensors.get("weight")?.to_f32_vec();
        let psw = inputs.tensors.get("per_sample_weights")?.to_f32_vec();
        let indices = inputs.tensors.get("indices")?.to_i64_vec()?;
        let offsets = inputs.tensors.get("offsets")?.to_i64_vec()?;
        let bags = offsets.len() - 1;
        let mut out = vec![0.0f64; bags * d];
        out.par_chunks_mut(d)
            .enumerate()
            .for_each(|(bag, row_out)| {
                for j in offsets[bag] as usize..offsets[bag + 1] as usize {
                    let row = indices[j] as usize;
                    let scale = psw[j] as f64;
                    for (acc, &w) in row_out.iter_mut().zip(&weight[row * d..(row + 1) * d]) {
                        *acc += scale * w as f64;
                    }
                }
            });
        Ok([("out".to_string(), OracleOutput::Float(out))]
            .into_iter()
            .collect())
    }

    fn work(&self, inputs: &InputSet) -> Work {
        let s = |k: &str| inputs.sizes.get(k).copied().unwrap_or(0) as f64;
        let (e, d, b, n) = (s("E"), s("D"), s("B"), s("N"));
        let distinct = inputs
            .tensors
            .get("indices")
            .ok()
            .and_then(|t| t.to_i64_vec().ok())
            .map(|idx| distinct_rows(&idx, e as usize))
            .unwrap_or(0) as f64;
        // Indices, offsets and the 2-byte per-sample weights; bf16 rows and outputs.
        let index_bytes = n * 8.0 + (b + 1.0) * 8.0 + n * 2.0;
        let out_bytes = b * d * 2.0;
        Work {
            compulsory_bytes: distinct * d * 2.0 + index_bytes + out_bytes,
            logical_bytes: n * d * 2.0 + index_bytes + out_bytes,
            flops: 2.0 * n * d,
        }
    }

    fn input_stats(&self, inputs: &InputSet) -> serde_json::Value {
        let rows = inputs.sizes.get("E").copied().unwrap_or(0) as usize;
        match (
            inputs.tensors.get("offsets").map(|t| t.to_i64_vec()),
            inputs.tensors.get("indices").map(|t| t.to_i64_vec()),
        ) {
            (Ok(Ok(offsets)), Ok(Ok(indices))) => bag_stats(&offsets, &indices, rows),
            _ => serde_json::Value::Null,
        }
    }

    fn reference(&self) -> Vec<LaunchSpec> {
        // PyTorch's `_embedding_bag_cuda` launches grid 1024, block (32, 8); the min() only trims
        // blocks that would find no work at small sizes. Arguments in PyTorch's order.
        vec![LaunchSpec {
            kernel: "embedding_bag_weighted_sum_bf16_reference".into(),
            grid: [
                "min(1024, ceil_div(B * ceil_div(D, 32), 8))".into(),
                1.into(),
                1.into(),
            ],
            block: [32.into(), 8.into(), 1.into()],
            shared_bytes: 0.into(),
            args: [
                "indices",
                "offsets",
                "weight",
                "out",
                "offset2bag",
                "N",
                "B",
                "D",
                "bag_size",
                "per_sample_weights",
                "-1",
            ]
            .map(String::from)
            .to_vec(),
        }]
    }

    fn reference_scratch(&self) -> Vec<ScratchSpec> {
        vec![
            ScratchSpec {
                name: "offset2bag".into(),
                bytes: "max(N, 1) * 8".into(),
            },
            ScratchSpec {
                name: "bag_size".into(),
                bytes: "(B + 1) * 8".into(),
            },
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{check_output, encode};
    use crate::selftest::self_test;
    use half::bf16;

    #[test]
    fn self_test_rejects_degenerate_outputs() {
        self_test(&EmbeddingBagWeightedSumBf16, Preset::Ci).unwrap();
    }

    #[test]
    fn inputs_are_well_formed_with_empty_bags() {
        let p = EmbeddingBagWeightedSumBf16;
        let sizes = p.sizes(Preset::Ci);
        let set = p.generate(Preset::Ci, &sizes, 5).unwrap();
        let offsets = set.tensors.get("offsets").unwrap().to_i64_vec().unwrap();
        let indices = set.tensors.get("indices").unwrap().to_i64_vec().unwrap();
        let psw = set.tensors.get("per_sample_weights").unwrap().to_f32_vec();
        assert_eq!(offsets.len(), 65);
        assert_eq!(offsets[0], 0);
        assert_eq!(*offsets.last().unwrap() as usize, indices.len());
        assert_eq!(psw.len(), indices.len());
        assert!(psw.iter().all(|&w| (0.0..=2.0).contains(&w)));
        assert_eq!(set.tensors.get("weight").unwrap().dtype, DType::BF16);
        assert_eq!(offsets[1], offsets[0], "bag 0 is empty");
        assert_eq!(offsets[33] - offsets[32], 64, "bag B/2 is the longest");
        assert!(indices.iter().all(|&i| (0..4096).contains(&i)));
        let again = p.generate(Preset::Ci, &sizes, 5).unwrap();
        assert_eq!(again.tensors, set.tensors, "deterministic for a seed");
        // More than the one forced empty bag, at the full recipe's rate.
        let full = p.sizes(Preset::Full);
        let mut big = full.clone();
        big.insert("B".into(), 20_000);
        big.insert("E".into(), 1 << 16);
        let set = p.generate(Preset::Full, &big, 1).unwrap();
        let offsets = set.tensors.get("offsets").unwrap().to_i64_vec().unwrap();
        let empty = offsets.windows(2).filter(|w| w[0] == w[1]).count();
        assert!((900..1150).contains(&empty), "{empty} empty bags of 20000");
        let mean = *offsets.last().unwrap() as f64 / 20_000.0;
        assert!((mean - 20.0).abs() < 0.6, "mean length {mean}");
    }

    #[test]
    fn oracle_matches_a_direct_weighted_sum() {
        let p = EmbeddingBagWeightedSumBf16;
        let set = p.generate(Preset::Ci, &p.sizes(Preset::Ci), 3).unwrap();
        let w = set.tensors.get("weight").unwrap().to_bf16_vec().unwrap();
        let psw = set
            .tensors
            .get("per_sample_weights")
            .unwrap()
            .to_bf16_vec()
            .unwrap();
        let idx = set.tensors.get("indices").unwrap().to_i64_vec().unwrap();
        let off = set.tensors.get("offsets").unwrap().to_i64_vec().unwrap();
        let OracleOutput::Float(out) = &p.oracle(&set).unwrap()["out"] else {
            panic!()
        };
        let (b, d) = (7usize, 13usize);
        let expect: f64 = (off[b]..off[b + 1])
            .map(|j| f64::from(psw[j as usize]) * f64::from(w[idx[j as usize] as usize * 40 + d]))
            .sum();
        assert_eq!(out[b * 40 + d], expect);
        for bag in 0..64 {
            if off[bag] == off[bag + 1] {
                assert!(out[bag * 40..(bag + 1) * 40].iter().all(|&v| v == 0.0));
            }
        }
    }

    /// What a kernel that accumulates in bf16 (rounding after every add) writes.
    fn bf16_accumulated(set: &InputSet) -> HostTensor {
        let d = set.sizes["D"] as usize;
        let w = set.tensors.get("weight").unwrap().to_f32_vec();
        let psw = set.tensors.get("per_sample_weights").unwrap().to_f32_vec();
        let idx = set.tensors.get("indices").unwrap().to_i64_vec().unwrap();
        let off = set.tensors.get("offsets").unwrap().to_i64_vec().unwrap();
        let mut out = Vec::new();
        for bag in 0..off.len() - 1 {
            for c in 0..d {
                let mut acc = bf16::ZERO;
                for j in off[bag] as usize..off[bag + 1] as usize {
                    let x = psw[j] * w[idx[j] as usize * d + c];
                    acc = bf16::from_f32(acc.to_f32() + x);
                }
                out.push(acc);
            }
        }
        HostTensor::from_bf16(vec![off.len() - 1, d], out).unwrap()
    }

    #[test]
    fn tolerance_accepts_rounding_and_rejects_bf16_accumulation() {
        let p = EmbeddingBagWeightedSumBf16;
        let spec = &p.tensors()[4];
        let tol = p.tolerance(spec);
        // The full recipe's pooling on a smaller table and batch.
        let mut sizes = p.sizes(Preset::Full);
        sizes.insert("E".into(), 1 << 16);
        sizes.insert("B".into(), 4000);
        for seed in [1, 2, 3] {
            let set = p.generate(Preset::Full, &sizes, seed).unwrap();
            let oracle = &p.oracle(&set).unwrap()["out"];
            let rounded = encode(oracle, DType::BF16, vec![4000, 128]).unwrap();
            let rep = check_output(&rounded, oracle, &tol);
            assert!(rep.passed && rep.rel_l2 < 3e-3, "{rep:?}");
            let rep = check_output(&bf16_accumulated(&set), oracle, &tol);
            assert!(!rep.passed, "bf16 accumulation passes: {rep:?}");
        }
        // At `ci` the bags are short: bf16 accumulation stays inside the bound there.
        let set = p.generate(Preset::Ci, &p.sizes(Preset::Ci), 1).unwrap();
        let oracle = &p.oracle(&set).unwrap()["out"];
        let rep = check_output(&bf16_accumulated(&set), oracle, &tol);
        assert!(rep.rel_l2 > 3e-3 && rep.rel_l2 < 1e-2, "{rep:?}");
    }

    #[test]
    fn work_counts_two_byte_rows() {
        let p = EmbeddingBagWeightedSumBf16;
        let set = p.generate(Preset::Ci, &p.sizes(Preset::Ci), 3).unwrap();
        let w = p.work(&set);
        let n = set.sizes["N"] as f64;
        assert!(w.compulsory_bytes < w.logical_bytes);
        assert_eq!(
            w.logical_bytes,
            n * 40.0 * 2.0 + n * 10.0 + 65.0 * 8.0 + 64.0 * 40.0 * 2.0
        );
    }
}
