//! Problem 10, `dot_interaction`: DLRM's dot-product feature interaction.
//!
//! Dense features x [B, D] (the bottom MLP's output) and F sparse embeddings emb [B, F, D], fp32.
//! T = [x; emb] [B, F+1, D] (dense feature first); Z = T·Tᵀ [B, F+1, F+1];
//! `out [B, D + P] = cat(x, Z's strictly lower triangle)`, P = F(F+1)/2.
//!
//! **Pair order** (DLRM's `li`, `lj`): row-major over i > j of the (F+1)×(F+1) matrix,
//! `for i in 1..=F { for j in 0..i }`, so pair p = i(i−1)/2 + j sits at column D + p: first
//! (1, 0) = x·emb₀, then (2, 0), (2, 1), …, last (F, F−1). See [`pairs`].
//!
//! Inputs: x uniform in [0, 1) (a ReLU bottom MLP's output is non-negative), emb uniform in
//! [-1, 1). The fp32 products are full fp32 (PyTorch's default `allow_tf32 = False`): a TF32
//! product misses the fp32 tolerance.
//!
//! The reference (`gpu-kernels/src/kernels/dot_interaction.rs`) mirrors the eager `Model` of
//! `kernelbench/10_dot_interaction.py` launch for launch: cat (T), batched SGEMM (Z), the
//! lower-triangle gather, cat (out).
use crate::problem::problem_identity;
use crate::families::interaction::{
    bfd, bmm, cat, cat_t, cat_t_scratch, dot_edge_sizes, dot_inputs, dot_recipe, dot_signature,
    dot_sizes, pairs, tril, DotRows, OUT_WIDTH,
};
use crate::launch::{LaunchSpec, ScratchSpec};
use crate::spec::Seeds;
use crate::spec::{
    oracle_of, InputSet, Oracle, OracleOutput, Preset, Problem, ProblemError, Sizes, TensorSpec,
    Work,
};
use data_gen::DType;
use rayon::prelude::*;
use serde_json::json;

/// The problem.
pub struct DotInteraction;

/// The forward in f64: out [B, D + P] for x [B, D] and emb [B, F, D] (any element type).
pub fn forward_f64(x: &[f64], emb: &[f64], b: usize, f: usize, d: usize) -> Vec<f64> {
    forward_by_sample(b, f, d, |s, t| {
        t[..d].copy_from_slice(&x[s * d..(s + 1) * d]);
        t[d..].copy_from_slice(&emb[s * f * d..(s + 1) * f * d]);
    })
}

/// The forward in f64, samples in parallel: `fill(s, t)` writes sample s's T = [x; emb]
/// [(F+1)·D]. Each pair's dot product sums its D products in order from −0.0 (as
/// `Iterator::sum` does), four pairs at a time so that the four sums overlap.
pub fn forward_by_sample(
    b: usize,
    f: usize,
    d: usize,
    fill: impl Fn(usize, &mut [f64]) + Sync,
) -> Vec<f64> {
    let pairs = pairs(f);
    let width = d + pairs.len();
    let mut out = vec![0.0f64; b * width];
    out.par_chunks_mut(width).enumerate().for_each_init(
        || vec![0.0f64; (f + 1) * d],
        |t, (s, row)| {
            fill(s, t);
            let t: &[f64] = t;
            let r = |i: usize| &t[i * d..(i + 1) * d];
            row[..d].copy_from_slice(r(0));
            let quads = pairs.chunks_exact(4);
            let rest = quads.remainder();
            let mut col = d;
            for quad in quads {
                let [a0, a1, a2, a3] = [0, 1, 2, 3].map(|k| r(quad[k].0));
                let [b0, b1, b2, b3] = [0, 1, 2, 3].map(|k| r(quad[k].1));
                let mut sums = [-0.0f64; 4];
                for c in 0..d {
                    sums[0] += a0[c] * b0[c];
                    sums[1] += a1[c] * b1[c];
                    sums[2] += a2[c] * b2[c];
                    sums[3] += a3[c] * b3[c];
                }
                row[col..col + 4].copy_from_slice(&sums);
                col += 4;
            }
            for &(i, j) in rest {
                row[col] = r(i).iter().zip(r(j)).map(|(u, v)| u * v).sum();
                col += 1;
            }
        },
    );
    out
}

impl Problem for DotInteraction {
    problem_identity!(
        10,
        "dot_interaction",
        "DLRM dot interaction: cat(x, strictly-lower triangle of [x; emb]·[x; emb]ᵀ), fp32"
    );

    fn tensors(&self) -> Vec<TensorSpec> {
        dot_signature([TensorSpec::output("out", DType::F32, &["B", OUT_WIDTH])])
    }

    fn sizes(&self, preset: Preset) -> Sizes {
        dot_sizes(preset)
    }

    fn shapes(&self, preset: Preset) -> Vec<crate::shapes::Shape> {
        crate::families::interaction::dot_shapes(preset)
    }

    fn recipe(&self, _preset: Preset) -> serde_json::Value {
        let mut recipe = dot_recipe("non-negative like a ReLU bottom-MLP output");
        recipe["pair_order"] = json!(
            "row-major over i > j of the (F+1)x(F+1) matrix, dense feature first: \
             for i in 1..=F, for j in 0..i; pair p = i(i-1)/2 + j at column D + p"
        );
        recipe
    }

    fn generate(&self, _: Preset, sizes: &Sizes, seeds: Seeds) -> Result<InputSet, ProblemError> {
        let seed = seeds.set;
        let dims = bfd(self.name(), sizes)?;
        Ok(dot_inputs(InputSet::builder(seed, sizes), seed, dims)?.build())
    }

    fn edge_sizes(&self, _preset: Preset) -> Vec<Sizes> {
        dot_edge_sizes()
    }

    fn oracle(&self, inputs: &InputSet) -> Result<Oracle, ProblemError> {
        let rows = DotRows::of(self.name(), inputs)?;
        let [b, f, d] = rows.dims;
        let out = forward_by_sample(b, f, d, |s, t| rows.t_into(s, t));
        Ok(oracle_of([("out", OracleOutput::Float(out))]))
    }

    fn work(&self, inputs: &InputSet) -> Work {
        let [b, f, d] = ["B", "F", "D"].map(|k| inputs.count(k) as f64);
        let p = f * (f + 1.0) / 2.0;
        // Read x and emb once, write out once; no lookups, so logical = compulsory.
        let bytes = 4.0 * (b * d + b * f * d + b * (d + p));
        Work {
            compulsory_bytes: bytes,
            logical_bytes: bytes,
            // The P dot products of length D the output needs (eager's bmm computes all
            // (F+1)² of them, twice the work).
            flops: 2.0 * b * p * d,
            gathered: None,
        }
    }

    fn reference(&self) -> Vec<LaunchSpec> {
        vec![
            // T = torch.cat([x.unsqueeze(1), emb], dim=1): PyTorch's CatArrayBatchedCopy_vectorized.
            cat_t(),
            // Z = torch.bmm(T, T.transpose(1, 2)): cuBLAS sgemmStridedBatched's role.
            bmm(
                "dot_interaction_bmm_nt_reference",
                "F + 1",
                &["cat_t", "cat_t", "bmm_z", "F + 1", "F + 1", "D"],
            ),
            // Zflat = Z[:, li, lj]: index_elementwise_kernel's gather.
            tril(
                "dot_interaction_tril_gather_reference",
                &["bmm_z", "tril_z", "B", "F + 1"],
            ),
            // torch.cat([x, Zflat], dim=1): CatArrayBatchedCopy_alignedK_contig.
            cat(
                "x",
                "tril_z",
                "out",
                "B * max(D, F * (F + 1) / 2)",
                "F * (F + 1) / 2",
            ),
        ]
    }

    fn reference_scratch(&self) -> Vec<ScratchSpec> {
        vec![
            cat_t_scratch(),
            ScratchSpec::new("bmm_z", "B * (F + 1) * (F + 1) * 4"),
            ScratchSpec::new("tril_z", "B * (F * (F + 1) / 2) * 4"),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::families::interaction::t_row;
    use crate::families::interaction::testing::{assert_uniform_inputs, work_at};
    use crate::testing::{ci_and_edge_sets, ci_set};
    crate::selftest::self_test_case!(DotInteraction);

    #[test]
    fn inputs_are_well_formed_and_deterministic() {
        assert_uniform_inputs(
            &DotInteraction,
            &[
                ("x", &[19, 36], (0.0, 1.0)),
                ("emb", &[19, 6, 36], (-1.0, 1.0)),
            ],
        );
        let p = DotInteraction;
        let set = ci_set(&p, 5);
        assert!(set.f32s("emb").unwrap().iter().any(|&v| v < 0.0));
    }

    #[test]
    fn oracle_matches_direct_dot_products() {
        let p = DotInteraction;
        for (sizes, set) in ci_and_edge_sets(&p, 3) {
            let [b, f, d] = bfd("t", &sizes).unwrap();
            let x = set.f32s("x").unwrap();
            let emb = set.f32s("emb").unwrap();
            let OracleOutput::Float(out) = &p.oracle(&set).unwrap()["out"] else {
                panic!()
            };
            let width = d + f * (f + 1) / 2;
            assert_eq!(out.len(), b * width);
            let dot = |s: usize, i: usize, j: usize| -> f64 {
                t_row(&x, &emb, (f, d), s, i)
                    .iter()
                    .zip(t_row(&x, &emb, (f, d), s, j))
                    .map(|(&u, &v)| u as f64 * v as f64)
                    .sum()
            };
            let s = b - 1;
            let row = &out[s * width..(s + 1) * width];
            for c in 0..d {
                assert_eq!(row[c], x[s * d + c] as f64, "x is copied first");
            }
            // Pair positions by the closed form p = i(i-1)/2 + j.
            assert_eq!(row[d], dot(s, 1, 0), "first pair: x · emb[0]");
            assert_eq!(row[width - 1], dot(s, f, f - 1), "last pair");
            if f >= 5 {
                assert_eq!(row[d + 5 * 4 / 2 + 2], dot(s, 5, 2));
            }
        }
    }

    #[test]
    fn work_counts_bytes_and_pair_flops() {
        let p = DotInteraction;
        let set = ci_set(&p, 1);
        let w = p.work(&set);
        // B = 19, F = 6, D = 36, P = 21.
        assert_eq!(w.flops, 2.0 * 19.0 * 21.0 * 36.0);
        assert_eq!(w.compulsory_bytes, 4.0 * (19.0 * 36.0 * 7.0 + 19.0 * 57.0));
        assert_eq!(w.logical_bytes, w.compulsory_bytes);
        // Full size: 2·65536·351·128 flops ≈ 5.9 GFLOP over ≈ 1.03 GB: not purely memory-bound.
        let w = work_at(&p, Preset::Full);
        assert_eq!(w.flops, 2.0 * 65536.0 * 351.0 * 128.0);
        assert_eq!(
            w.compulsory_bytes,
            4.0 * 65536.0 * (128.0 + 26.0 * 128.0 + 479.0)
        );
    }
}
