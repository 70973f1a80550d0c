//! Problem 1, `embedding_bag_sum`: one fp32 table, sum pooling.
//!
//! `out[b, :] = Σ_{j ∈ [offsets[b], offsets[b+1])} weight[indices[j], :]`, fp32 accumulation
//! (PyTorch `F.embedding_bag(indices, weight, offsets, mode="sum", include_last_offset=True)`).
//! Inputs: Zipf(α = 1.15) row indices with hot rows scattered over the table, heavy-tailed
//! (log-normal) bag lengths with mean 20, weights uniform in [-1, 1). Every input set holds an
//! empty bag (bag 0) and a bag of the longest length (bag B/2).
use super::bags::distinct_rows;
use crate::launch::{LaunchSpec, ScratchSpec};
use crate::spec::{
    InputSet, OracleOutput, Preset, Problem, ProblemError, Role, Sizes, TensorSpec, Work,
};
use data_gen::{
    bag_indices, offsets_from_lengths, seed::derive_str, uniform_f32, DType, HostTensor,
    IndexRecipe, Pooling, TensorSet,
};
use rayon::prelude::*;
use serde_json::json;
use std::collections::BTreeMap;

/// The problem.
pub struct EmbeddingBagSum;

/// Zipf exponent of the row indices (FBGEMM's recommended training value).
const ALPHA: f64 = 1.15;
/// σ of the log-normal bag lengths.
const SIGMA: f64 = 1.0;

fn pooling(preset: Preset) -> Pooling {
    match preset {
        Preset::Ci => Pooling::LogNormal {
            mean: 8.0,
            sigma: SIGMA,
            max: 64,
        },
        Preset::Small | Preset::Full => Pooling::LogNormal {
            mean: 20.0,
            sigma: SIGMA,
            max: 1000,
        },
    }
}

fn size(sizes: &Sizes, name: &str) -> Result<i64, ProblemError> {
    crate::spec::size(sizes, "embedding_bag_sum", name)
}

impl Problem for EmbeddingBagSum {
    fn number(&self) -> u32 {
        1
    }

    fn name(&self) -> &'static str {
        "embedding_bag_sum"
    }

    fn summary(&self) -> &'static str {
        "one fp32 table W[E,D], sum pooling over CSR bags (Zipf 1.15, heavy-tailed lengths)"
    }

    fn tensors(&self) -> Vec<TensorSpec> {
        vec![
            TensorSpec {
                name: "weight",
                dtype: DType::F32,
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
                name: "out",
                dtype: DType::F32,
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
            "weight": {"distribution": "uniform", "low": -1.0, "high": 1.0},
            "edge_cases": ["bag 0 empty", "bag B/2 of the longest length"],
        })
    }

    fn generate(&self, preset: Preset, sizes: &Sizes, seed: u64) -> Result<InputSet, ProblemError> {
        let (e, d, b) = (size(sizes, "E")?, size(sizes, "D")?, size(sizes, "B")?);
        let pooling = pooling(preset);
        let mut lengths = pooling.lengths(b as usize, derive_str(seed, "lengths"))?;
        if lengths.len() >= 3 {
            lengths[0] = 0;
            let mid = lengths.len() / 2;
            lengths[mid] = pooling.max_length();
        }
        let recipe = IndexRecipe {
            rows: e as u64,
            alpha: ALPHA,
            scatter_hot_rows: true,
        };
        let indices = bag_indices(&recipe, &lengths, derive_str(seed, "indices"))?;
        let offsets = offsets_from_lengths(&lengths);
        let weight = uniform_f32((e * d) as usize, derive_str(seed, "weight"), -1.0, 1.0);
        let mut sizes = sizes.clone();
        sizes.insert("N".into(), indices.len() as i64);
        let mut tensors = TensorSet::new();
        tensors.insert(
            "weight",
            HostTensor::from_f32(vec![e as usize, d as usize], weight)?,
        );
        tensors.insert(
            "indices",
            HostTensor::from_i64(vec![indices.len()], indices)?,
        );
        tensors.insert(
            "offsets",
            HostTensor::from_i64(vec![offsets.len()], offsets)?,
        );
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
        let d = size(&inputs.sizes, "D")? as usize;
        let weight = inputs.tensors.get("weight")?.to_f32_vec();
        let indices = inputs.tensors.get("indices")?.to_i64_vec()?;
        let offsets = inputs.tensors.get("offsets")?.to_i64_vec()?;
        let bags = offsets.len() - 1;
        let mut out = vec![0.0f64; bags * d];
        out.par_chunks_mut(d)
            .enumerate()
            .for_each(|(bag, row_out)| {
                for &row in &indices[offsets[bag] as usize..offsets[bag + 1] as usize] {
                    let row = &weight[row as usize * d..(row as usize + 1) * d];
                    for (acc, &w) in row_out.iter_mut().zip(row) {
                        *acc += w as f64;
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
        let index_bytes = n * 8.0 + (b + 1.0) * 8.0;
        let out_bytes = b * d * 4.0;
        Work {
            compulsory_bytes: distinct * d * 4.0 + index_bytes + out_bytes,
            logical_bytes: n * d * 4.0 + index_bytes + out_bytes,
            flops: n * d,
        }
    }

    fn input_stats(&self, inputs: &InputSet) -> serde_json::Value {
        let (Ok(idx), Ok(off)) = (inputs.tensors.get("indices"), inputs.tensors.get("offsets"))
        else {
            return serde_json::Value::Null;
        };
        let (Ok(idx), Ok(off)) = (idx.to_i64_vec(), off.to_i64_vec()) else {
            return serde_json::Value::Null;
        };
        let rows = inputs.sizes.get("E").copied().unwrap_or(0) as usize;
        super::bags::bag_stats(&off, &idx, rows)
    }

    fn reference(&self) -> Vec<LaunchSpec> {
        // PyTorch (aten/src/ATen/native/cuda/EmbeddingBag.cu, `_embedding_bag_cuda`) launches
        // grid 1024, block (32, 8); the min() only trims blocks that would find no work at
        // small sizes (identical at `full`). Arguments in PyTorch's order; padding_idx = -1.
        vec![LaunchSpec {
            kernel: "embedding_bag_sum_reference".into(),
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
    use crate::selftest::self_test;

    #[test]
    fn self_test_rejects_degenerate_outputs() {
        self_test(&EmbeddingBagSum, Preset::Ci).unwrap();
    }

    #[test]
    fn inputs_are_well_formed_and_include_the_edge_bags() {
        let p = EmbeddingBagSum;
        let sizes = p.sizes(Preset::Ci);
        let set = p.generate(Preset::Ci, &sizes, 5).unwrap();
        let offsets = set.tensors.get("offsets").unwrap().to_i64_vec().unwrap();
        let indices = set.tensors.get("indices").unwrap().to_i64_vec().unwrap();
        assert_eq!(offsets.len(), 65);
        assert_eq!(offsets[0], 0);
        assert_eq!(*offsets.last().unwrap() as usize, indices.len());
        assert_eq!(offsets[1] - offsets[0], 0, "bag 0 is empty");
        assert_eq!(offsets[33] - offsets[32], 64, "bag B/2 is the longest");
        assert!(offsets.windows(2).all(|w| w[0] <= w[1]));
        assert!(indices.iter().all(|&i| (0..4096).contains(&i)));
        assert_eq!(set.sizes["N"], indices.len() as i64);
        let again = p.generate(Preset::Ci, &sizes, 5).unwrap();
        assert_eq!(again.tensors, set.tensors, "deterministic for a seed");
    }

    #[test]
    fn oracle_matches_a_direct_sum() {
        let p = EmbeddingBagSum;
        let set = p.generate(Preset::Ci, &p.sizes(Preset::Ci), 3).unwrap();
        let w = set.tensors.get("weight").unwrap().to_f32_vec();
        let idx = set.tensors.get("indices").unwrap().to_i64_vec().unwrap();
        let off = set.tensors.get("offsets").unwrap().to_i64_vec().unwrap();
        let OracleOutput::Float(out) = &p.oracle(&set).unwrap()["out"] else {
            panic!()
        };
        let (b, d) = (7usize, 13usize);
        let expect: f64 = (off[b]..off[b + 1])
            .map(|j| w[idx[j as usize] as usize * 40 + d] as f64)
            .sum();
        assert_eq!(out[b * 40 + d], expect);
        assert!(
            out[..40].iter().all(|&v| v == 0.0),
            "the empty bag sums to zero"
        );
    }

    #[test]
    fn input_stats_describe_the_skew() {
        let p = EmbeddingBagSum;
        let set = p.generate(Preset::Ci, &p.sizes(Preset::Ci), 3).unwrap();
        let stats = p.input_stats(&set);
        let top1 = stats["top1pct_share"].as_f64().expect("top-1% share");
        assert!(
            top1 > 0.1,
            "Zipf 1.15 puts well over 1% of lookups on the top 1% of rows: {stats}"
        );
        assert_eq!(stats["lookups"].as_u64(), Some(set.sizes["N"] as u64));
    }

    #[test]
    fn work_counts_distinct_rows_once() {
        assert_eq!(distinct_rows(&[3, 3, 5, 0, 5], 8), 3);
        let p = EmbeddingBagSum;
        let set = p.generate(Preset::Ci, &p.sizes(Preset::Ci), 3).unwrap();
        let w = p.work(&set);
        assert!(
            w.compulsory_bytes < w.logical_bytes,
            "skewed lookups repeat rows"
        );
        assert_eq!(w.flops, (set.sizes["N"] * 40) as f64);
    }
}
