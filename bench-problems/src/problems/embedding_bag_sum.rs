//! Problem 1, `embedding_bag_sum`: one fp32 table, sum pooling.
//!
//! `out[b, :] = Σ_{j ∈ [offsets[b], offsets[b+1])} weight[indices[j], :]`, fp32 accumulation
//! (PyTorch `F.embedding_bag(indices, weight, offsets, mode="sum", include_last_offset=True)`).
//! Inputs: Zipf(α = 1.15) row indices with hot rows scattered over the table, heavy-tailed
//! (log-normal) bag lengths with mean 20, weights uniform in [-1, 1). Every input set holds an
//! empty bag (bag 0) and a bag of the longest length (bag B/2).
use crate::problem::problem_identity;
use crate::families::bags::{self, BagRecipe, BagSizes, Counts};
use crate::launch::{LaunchSpec, ScratchSpec};
use crate::spec::Seeds;
use crate::spec::{InputSet, Oracle, Preset, Problem, ProblemError, Sizes, TensorSpec, Work};
use data_gen::DType;
use serde_json::json;

/// The problem.
pub struct EmbeddingBagSum;

const NAME: &str = "embedding_bag_sum";
/// Zipf exponent of the row indices (FBGEMM's recommended training value).
const ALPHA: f64 = 1.15;

fn recipe(preset: Preset) -> BagRecipe {
    BagRecipe::new(preset, ALPHA, 20.0)
}

impl Problem for EmbeddingBagSum {
    problem_identity!(
        1,
        NAME,
        "one fp32 table W[E,D], sum pooling over CSR bags (Zipf 1.15, heavy-tailed lengths)"
    );

    fn tensors(&self) -> Vec<TensorSpec> {
        bags::forward_signature(bags::weight(DType::F32), None, DType::F32)
    }

    fn sizes(&self, preset: Preset) -> Sizes {
        BagSizes::DEFAULT.of(preset)
    }

    fn shapes(&self, preset: Preset) -> Vec<crate::shapes::Shape> {
        bags::table_shapes(self.sizes(preset), preset)
    }

    fn recipe(&self, preset: Preset) -> serde_json::Value {
        recipe(preset).record(json!({
            "weight": {"distribution": "uniform", "low": -1.0, "high": 1.0},
        }))
    }

    fn generate(&self, preset: Preset, sizes: &Sizes, seeds: Seeds) -> Result<InputSet, ProblemError> {
        let seed = seeds.set;
        let (e, d) = bags::table_dims(NAME, sizes)?;
        let bags = recipe(preset).draw(NAME, sizes, seed)?;
        let weight = bags::uniform_table(NAME, [e, d], DType::F32, seeds.table)?;
        Ok(bags.builder(seed, sizes)?.tensor("weight", weight).build())
    }

    crate::families::bags::bag_check_sets!();

    fn oracle(&self, inputs: &InputSet) -> Result<Oracle, ProblemError> {
        bags::pooled_weight_oracle(NAME, inputs, |acc, _, row| {
            for (acc, &w) in acc.iter_mut().zip(row) {
                *acc += w as f64;
            }
        })
    }

    fn work(&self, inputs: &InputSet) -> Work {
        let c = Counts::of(inputs);
        c.forward_work(c.d * 4.0, c.index_bytes(), c.b * c.d * 4.0, c.n * c.d)
    }

    crate::families::bags::bag_table_methods!();

    fn reference(&self) -> Vec<LaunchSpec> {
        bags::embedding_bag_plan("embedding_bag_sum_reference", false)
    }

    fn reference_scratch(&self) -> Vec<ScratchSpec> {
        bags::embedding_bag_scratch(bags::BAG_SIZE_BYTES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::families::bags::{testing::assert_well_formed, Bags};
    use crate::spec::OracleOutput;
    use crate::testing::ci_set;
    crate::selftest::self_test_case!(EmbeddingBagSum);

    #[test]
    fn inputs_are_well_formed_and_include_the_edge_bags() {
        let s = ci_set(&EmbeddingBagSum, 5);
        assert_well_formed(&s, 64);
        assert_eq!((s.count("B"), s.count("E")), (64, 4096));
        assert_eq!(ci_set(&EmbeddingBagSum, 5).tensors, s.tensors, "deterministic for a seed");
    }

    #[test]
    fn oracle_matches_a_direct_sum() {
        let s = ci_set(&EmbeddingBagSum, 3);
        let (w, Bags { indices, offsets }) = (s.f32s("weight").unwrap(), Bags::of(&s).unwrap());
        let OracleOutput::Float(out) = &EmbeddingBagSum.oracle(&s).unwrap()["out"] else {
            panic!()
        };
        let (b, d) = (7usize, 13usize);
        let expect: f64 = (offsets[b]..offsets[b + 1])
            .map(|j| w[indices[j as usize] as usize * 40 + d] as f64)
            .sum();
        assert_eq!(out[b * 40 + d], expect);
        assert!(
            out[..40].iter().all(|&v| v == 0.0),
            "the empty bag sums to zero"
        );
    }

    #[test]
    fn work_counts_distinct_rows_once() {
        let s = ci_set(&EmbeddingBagSum, 3);
        let w = EmbeddingBagSum.work(&s);
        assert!(
            w.compulsory_bytes < w.logical_bytes,
            "skewed lookups repeat rows"
        );
        assert_eq!(w.flops, (s.sizes["N"] * 40) as f64);
    }
}
