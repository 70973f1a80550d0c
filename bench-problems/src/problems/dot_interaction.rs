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
use crate::launch::{LaunchSpec, ScratchSpec};
use crate::spec::{
    InputSet, OracleOutput, Preset, Problem, ProblemError, Role, Sizes, TensorSpec, Work,
};
use data_gen::{seed::derive_str, uniform_f32, DType, HostTensor, TensorSet};
use rayon::prelude::*;
use serde_json::json;
use std::collections::BTreeMap;

/// The problem.
pub struct DotInteraction;

/// DLRM's pairs (i, j), i > j, of the strictly lower triangle of the (F+1)×(F+1) interaction
/// matrix for `features` = F sparse features, in output order: pair p = i(i−1)/2 + j.
pub fn pairs(features: usize) -> Vec<(usize, usize)> {
    (1..=features)
        .flat_map(|i| (0..i).map(move |j| (i, j)))
        .collect()
}

pub(crate) fn size(problem: &str, sizes: &Sizes, name: &str) -> Result<usize, ProblemError> {
    let v = crate::spec::size(sizes, problem, name)?;
    usize::try_from(v).map_err(|_| ProblemError::Invalid {
        problem: problem.into(),
        message: format!("size {name} is not set"),
    })
}

/// (B, F, D) of a size set.
pub(crate) fn bfd(problem: &str, sizes: &Sizes) -> Result<(usize, usize, usize), ProblemError> {
    Ok((
        size(problem, sizes, "B")?,
        size(problem, sizes, "F")?,
        size(problem, sizes, "D")?,
    ))
}

pub(crate) fn dot_sizes(preset: Preset) -> Sizes {
    let (b, f, d): (i64, i64, i64) = match preset {
        // B = 19 and F + 1 = 7 fill no GEMM tile or gather block evenly; D = 36 gives the
        // GEMM a partial second k-stage; D + P = 57 makes the output rows unaligned as at full.
        Preset::Ci => (19, 6, 36),
        Preset::Small => (8192, 26, 128),
        // DLRM (Criteo Kaggle / Terabyte): 26 sparse features, D = 128 on MLPerf's DLRMv2.
        Preset::Full => (65536, 26, 128),
    };
    [("B", b), ("F", f), ("D", d)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

/// Uneven shapes checked once: F + 1 = 34 > 32 (two GEMM tiles per side, the second partial;
/// 561 pairs over 18 gather blocks), and F = 1 (a single pair, k < one stage).
pub(crate) fn dot_edge_sizes() -> Vec<Sizes> {
    [(3i64, 33i64, 20i64), (5, 1, 8)]
        .into_iter()
        .map(|(b, f, d)| {
            [("B", b), ("F", f), ("D", d)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect()
        })
        .collect()
}

/// x and emb of an input set (problem 11 draws the same ones from the same seed).
pub(crate) fn dot_inputs(
    problem: &str,
    sizes: &Sizes,
    seed: u64,
) -> Result<TensorSet, ProblemError> {
    let (b, f, d) = bfd(problem, sizes)?;
    let x = uniform_f32(b * d, derive_str(seed, "x"), 0.0, 1.0);
    let emb = uniform_f32(b * f * d, derive_str(seed, "emb"), -1.0, 1.0);
    let mut tensors = TensorSet::new();
    tensors.insert("x", HostTensor::from_f32(vec![b, d], x)?);
    tensors.insert("emb", HostTensor::from_f32(vec![b, f, d], emb)?);
    Ok(tensors)
}

/// The forward in f64: out [B, D + P] for x [B, D] and emb [B, F, D] (any element type).
pub fn forward_f64(x: &[f64], emb: &[f64], b: usize, f: usize, d: usize) -> Vec<f64> {
    let pairs = pairs(f);
    let width = d + pairs.len();
    let mut out = vec![0.0f64; b * width];
    out.par_chunks_mut(width).enumerate().for_each(|(s, row)| {
        let t = |i: usize| {
            if i == 0 {
                &x[s * d..(s + 1) * d]
            } else {
                &emb[(s * f + i - 1) * d..(s * f + i) * d]
            }
        };
        row[..d].copy_from_slice(t(0));
        for (p, &(i, j)) in pairs.iter().enumerate() {
            row[d + p] = t(i).iter().zip(t(j)).map(|(u, v)| u * v).sum();
        }
    });
    out
}

impl Problem for DotInteraction {
    fn number(&self) -> u32 {
        10
    }

    fn name(&self) -> &'static str {
        "dot_interaction"
    }

    fn summary(&self) -> &'static str {
        "DLRM dot interaction: cat(x, strictly-lower triangle of [x; emb]·[x; emb]ᵀ), fp32"
    }

    fn tensors(&self) -> Vec<TensorSpec> {
        vec![
            TensorSpec {
                name: "x",
                dtype: DType::F32,
                shape: &["B", "D"],
                role: Role::Input,
            },
            TensorSpec {
                name: "emb",
                dtype: DType::F32,
                shape: &["B", "F", "D"],
                role: Role::Input,
            },
            TensorSpec {
                name: "out",
                dtype: DType::F32,
                shape: &["B", "D + F * (F + 1) / 2"],
                role: Role::Output,
            },
        ]
    }

    fn sizes(&self, preset: Preset) -> Sizes {
        dot_sizes(preset)
    }

    fn recipe(&self, _preset: Preset) -> serde_json::Value {
        json!({
            "x": {"distribution": "uniform", "low": 0.0, "high": 1.0,
                  "note": "non-negative like a ReLU bottom-MLP output"},
            "emb": {"distribution": "uniform", "low": -1.0, "high": 1.0},
            "pair_order": "row-major over i > j of the (F+1)x(F+1) matrix, dense feature first: \
                           for i in 1..=F, for j in 0..i; pair p = i(i-1)/2 + j at column D + p",
            "precision": "fp32 products and accumulation (no TF32)",
        })
    }

    fn generate(
        &self,
        _preset: Preset,
        sizes: &Sizes,
        seed: u64,
    ) -> Result<InputSet, ProblemError> {
        Ok(InputSet {
            seed,
            sizes: sizes.clone(),
            scalars: BTreeMap::new(),
            tensors: dot_inputs(self.name(), sizes, seed)?,
        })
    }

    fn edge_sizes(&self, _preset: Preset) -> Vec<Sizes> {
        dot_edge_sizes()
    }

    fn oracle(&self, inputs: &InputSet) -> Result<BTreeMap<String, OracleOutput>, ProblemError> {
        let (b, f, d) = bfd(self.name(), &inputs.sizes)?;
        let x: Vec<f64> = inputs.tensors.get("x")?.to_f64_vec();
        let emb: Vec<f64> = inputs.tensors.get("emb")?.to_f64_vec();
        let out = forward_f64(&x, &emb, b, f, d);
        Ok([("out".to_string(), OracleOutput::Float(out))]
            .into_iter()
            .collect())
    }

    fn work(&self, inputs: &InputSet) -> Work {
        let s = |k: &str| inputs.sizes.get(k).copied().unwrap_or(0) as f64;
        let (b, f, d) = (s("B"), s("F"), s("D"));
        let p = f * (f + 1.0) / 2.0;
        // Read x and emb once, write out once; no lookups, so logical = compulsory.
        let bytes = 4.0 * (b * d + b * f * d + b * (d + p));
        Work {
            compulsory_bytes: bytes,
            logical_bytes: bytes,
            // The P dot products of length D the output needs (eager's bmm computes all
            // (F+1)² of them, twice the work).
            flops: 2.0 * b * p * d,
        }
    }

    fn reference(&self) -> Vec<LaunchSpec> {
        let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        vec![
            // T = torch.cat([x.unsqueeze(1), emb], dim=1): PyTorch's CatArrayBatchedCopy_vectorized.
            LaunchSpec {
                kernel: "dot_interaction_cat_reference".into(),
                grid: [
                    "min(4224, ceil_div(B * F * D, 512))".into(),
                    2.into(),
                    1.into(),
                ],
                block: [128.into(), 1.into(), 1.into()],
                shared_bytes: 0.into(),
                args: s(&["x", "emb", "cat_t", "B", "D", "F * D"]),
            },
            // Z = torch.bmm(T, T.transpose(1, 2)): cuBLAS sgemmStridedBatched's role.
            LaunchSpec {
                kernel: "dot_interaction_bmm_nt_reference".into(),
                grid: [
                    "B".into(),
                    "ceil_div(F + 1, 32)".into(),
                    "ceil_div(F + 1, 32)".into(),
                ],
                block: [64.into(), 1.into(), 1.into()],
                shared_bytes: 0.into(),
                args: s(&["cat_t", "cat_t", "bmm_z", "F + 1", "F + 1", "D"]),
            },
            // Zflat = Z[:, li, lj]: index_elementwise_kernel's gather.
            LaunchSpec {
                kernel: "dot_interaction_tril_gather_reference".into(),
                grid: [
                    "ceil_div(F * (F + 1) / 2, 32)".into(),
                    "ceil_div(B, 32)".into(),
                    1.into(),
                ],
                block: [32.into(), 8.into(), 1.into()],
                shared_bytes: 0.into(),
                args: s(&["bmm_z", "tril_z", "B", "F + 1"]),
            },
            // torch.cat([x, Zflat], dim=1): CatArrayBatchedCopy_alignedK_contig.
            LaunchSpec {
                kernel: "dot_interaction_cat_reference".into(),
                grid: [
                    "min(4224, ceil_div(B * max(D, F * (F + 1) / 2), 512))".into(),
                    2.into(),
                    1.into(),
                ],
                block: [128.into(), 1.into(), 1.into()],
                shared_bytes: 0.into(),
                args: s(&["x", "tril_z", "out", "B", "D", "F * (F + 1) / 2"]),
            },
        ]
    }

    fn reference_scratch(&self) -> Vec<ScratchSpec> {
        vec![
            ScratchSpec {
                name: "cat_t".into(),
                bytes: "B * (F + 1) * D * 4".into(),
            },
            ScratchSpec {
                name: "bmm_z".into(),
                bytes: "B * (F + 1) * (F + 1) * 4".into(),
            },
            ScratchSpec {
                name: "tril_z".into(),
                bytes: "B * (F * (F + 1) / 2) * 4".into(),
            },
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selftest::self_test;

    /// Row `i` of sample `b`'s T = [x; emb] (i = 0 is x).
    fn t_row<'a>(
        x: &'a [f32],
        emb: &'a [f32],
        f: usize,
        d: usize,
        b: usize,
        i: usize,
    ) -> &'a [f32] {
        if i == 0 {
            &x[b * d..(b + 1) * d]
        } else {
            &emb[(b * f + i - 1) * d..(b * f + i) * d]
        }
    }

    #[test]
    fn self_test_rejects_degenerate_outputs() {
        self_test(&DotInteraction, Preset::Ci).unwrap();
    }

    #[test]
    fn pair_order_is_dlrms() {
        // Independent enumeration: every (i, j) with i > j of the (F+1)² matrix, sorted
        // row-major, i.e. DLRM's `[(i, j) for i in range(F+1) for j in range(i)]`.
        for f in [1usize, 2, 6, 26, 33] {
            let n = f + 1;
            let mut all: Vec<(usize, usize)> = (0..n * n)
                .map(|e| (e / n, e % n))
                .filter(|&(i, j)| i > j)
                .collect();
            all.sort();
            assert_eq!(pairs(f), all, "F = {f}");
            for (p, &(i, j)) in pairs(f).iter().enumerate() {
                assert_eq!(p, i * (i - 1) / 2 + j);
            }
        }
        let p26 = pairs(26);
        assert_eq!(p26.len(), 351);
        assert_eq!(&p26[..4], &[(1, 0), (2, 0), (2, 1), (3, 0)]);
        assert_eq!(p26[350], (26, 25));
    }

    #[test]
    fn inputs_are_well_formed_and_deterministic() {
        let p = DotInteraction;
        let sizes = p.sizes(Preset::Ci);
        let set = p.generate(Preset::Ci, &sizes, 5).unwrap();
        let x = set.tensors.get("x").unwrap();
        let emb = set.tensors.get("emb").unwrap();
        assert_eq!(x.shape, vec![19, 36]);
        assert_eq!(emb.shape, vec![19, 6, 36]);
        assert!(x.to_f32_vec().iter().all(|v| (0.0..1.0).contains(v)));
        assert!(emb.to_f32_vec().iter().all(|v| (-1.0..1.0).contains(v)));
        assert!(emb.to_f32_vec().iter().any(|&v| v < 0.0));
        let again = p.generate(Preset::Ci, &sizes, 5).unwrap();
        assert_eq!(again.tensors, set.tensors, "deterministic for a seed");
        let other = p.generate(Preset::Ci, &sizes, 6).unwrap();
        assert_ne!(other.tensors, set.tensors);
    }

    #[test]
    fn oracle_matches_direct_dot_products() {
        let p = DotInteraction;
        for sizes in std::iter::once(p.sizes(Preset::Ci)).chain(p.edge_sizes(Preset::Ci)) {
            let set = p.generate(Preset::Ci, &sizes, 3).unwrap();
            let (b, f, d) = bfd("t", &sizes).unwrap();
            let x = set.tensors.get("x").unwrap().to_f32_vec();
            let emb = set.tensors.get("emb").unwrap().to_f32_vec();
            let OracleOutput::Float(out) = &p.oracle(&set).unwrap()["out"] else {
                panic!()
            };
            let width = d + f * (f + 1) / 2;
            assert_eq!(out.len(), b * width);
            let dot = |s: usize, i: usize, j: usize| -> f64 {
                t_row(&x, &emb, f, d, s, i)
                    .iter()
                    .zip(t_row(&x, &emb, f, d, s, j))
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
        let set = p.generate(Preset::Ci, &p.sizes(Preset::Ci), 1).unwrap();
        let w = p.work(&set);
        // B = 19, F = 6, D = 36, P = 21.
        assert_eq!(w.flops, 2.0 * 19.0 * 21.0 * 36.0);
        assert_eq!(w.compulsory_bytes, 4.0 * (19.0 * 36.0 * 7.0 + 19.0 * 57.0));
        assert_eq!(w.logical_bytes, w.compulsory_bytes);
        let full = p.sizes(Preset::Full);
        let set = InputSet {
            sizes: full,
            ..Default::default()
        };
        // Full size: 2·65536·351·128 flops ≈ 5.9 GFLOP over ≈ 1.03 GB: not purely memory-bound.
        let w = p.work(&set);
        assert_eq!(w.flops, 2.0 * 65536.0 * 351.0 * 128.0);
        assert_eq!(
            w.compulsory_bytes,
            4.0 * 65536.0 * (128.0 + 26.0 * 128.0 + 479.0)
        );
    }
}
