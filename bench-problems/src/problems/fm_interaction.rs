//! Problem 12, `fm_interaction`: DeepFM's factorization-machine second-order term.
//!
//! x [B, F, K] fp32 (F fields, each a K-wide embedding) → out [B] =
//! ½ Σ_k ((Σ_f x[b, f, k])² − Σ_f x[b, f, k]²), which equals Σ_{f < g} ⟨x_f, x_g⟩ (every pair
//! of fields' inner product). Memory-bound: one pass over x is all the work needs.
//!
//! Inputs: x uniform in [-1, 1). The reference (`gpu-kernels/src/kernels/fm_interaction.rs`)
//! mirrors the eager `Model` of `kernelbench/12_fm_interaction.py` launch for launch: sum, pow,
//! pow, sum, sub, sum, mul (seven launches, a full [B, F, K] temporary for x²).
use crate::launch::{LaunchSpec, ScratchSpec};
use crate::spec::{
    InputSet, OracleOutput, Preset, Problem, ProblemError, Role, Sizes, TensorSpec, Work,
};
use data_gen::{seed::derive_str, uniform_f32, DType, HostTensor, TensorSet};
use rayon::prelude::*;
use serde_json::json;
use std::collections::BTreeMap;

/// The problem.
pub struct FmInteraction;

fn sizes_of(b: i64, f: i64, k: i64) -> Sizes {
    [("B", b), ("F", f), ("K", k)]
        .into_iter()
        .map(|(n, v)| (n.to_string(), v))
        .collect()
}

fn bfk(sizes: &Sizes) -> Result<(usize, usize, usize), ProblemError> {
    let get = |n: &str| super::dot_interaction::size("fm_interaction", sizes, n);
    Ok((get("B")?, get("F")?, get("K")?))
}

/// The FM term in f64 by its O(F·K) formula: ½ Σ_k ((Σ_f x)² − Σ_f x²) per sample.
pub fn fm_f64(x: &[f64], b: usize, f: usize, k: usize) -> Vec<f64> {
    (0..b)
        .into_par_iter()
        .map(|s| {
            let xs = &x[s * f * k..(s + 1) * f * k];
            let mut total = 0.0;
            for c in 0..k {
                let (mut sum, mut sq) = (0.0, 0.0);
                for g in 0..f {
                    let v = xs[g * k + c];
                    sum += v;
                    sq += v * v;
                }
                total += sum * sum - sq;
            }
            0.5 * total
        })
        .collect()
}

impl Problem for FmInteraction {
    fn number(&self) -> u32 {
        12
    }

    fn name(&self) -> &'static str {
        "fm_interaction"
    }

    fn summary(&self) -> &'static str {
        "DeepFM second-order term: ½ Σ_k ((Σ_f x)² − Σ_f x²) per sample, fp32"
    }

    fn tensors(&self) -> Vec<TensorSpec> {
        vec![
            TensorSpec {
                name: "x",
                dtype: DType::F32,
                shape: &["B", "F", "K"],
                role: Role::Input,
            },
            TensorSpec {
                name: "out",
                dtype: DType::F32,
                shape: &["B"],
                role: Role::Output,
            },
        ]
    }

    fn sizes(&self, preset: Preset) -> Sizes {
        match preset {
            // B = 37: no block of the reduction or elementwise kernels is full.
            Preset::Ci => sizes_of(37, 7, 16),
            Preset::Small => sizes_of(32768, 39, 16),
            // Criteo's 39 fields (13 dense bucketized + 26 categorical), K = 16.
            Preset::Full => sizes_of(262144, 39, 16),
        }
    }

    fn recipe(&self, _preset: Preset) -> serde_json::Value {
        json!({
            "x": {"distribution": "uniform", "low": -1.0, "high": 1.0},
            "precision": "fp32 accumulation",
        })
    }

    fn generate(
        &self,
        _preset: Preset,
        sizes: &Sizes,
        seed: u64,
    ) -> Result<InputSet, ProblemError> {
        let (b, f, k) = bfk(sizes)?;
        let x = uniform_f32(b * f * k, derive_str(seed, "x"), -1.0, 1.0);
        let mut tensors = TensorSet::new();
        tensors.insert("x", HostTensor::from_f32(vec![b, f, k], x)?);
        Ok(InputSet {
            seed,
            sizes: sizes.clone(),
            scalars: BTreeMap::new(),
            tensors,
        })
    }

    fn edge_sizes(&self, _preset: Preset) -> Vec<Sizes> {
        // K = 10 (DeepFM's paper size): not a multiple of 4, so no 16-byte path applies;
        // F = 2: a single pair of fields.
        vec![sizes_of(3, 39, 10), sizes_of(2, 2, 16)]
    }

    fn oracle(&self, inputs: &InputSet) -> Result<BTreeMap<String, OracleOutput>, ProblemError> {
        let (b, f, k) = bfk(&inputs.sizes)?;
        let x = inputs.tensors.get("x")?.to_f64_vec();
        Ok(
            [("out".to_string(), OracleOutput::Float(fm_f64(&x, b, f, k)))]
                .into_iter()
                .collect(),
        )
    }

    fn work(&self, inputs: &InputSet) -> Work {
        let s = |n: &str| inputs.sizes.get(n).copied().unwrap_or(0) as f64;
        let (b, f, k) = (s("B"), s("F"), s("K"));
        let bytes = 4.0 * (b * f * k + b);
        Work {
            compulsory_bytes: bytes,
            logical_bytes: bytes,
            // Σ_f x and Σ_f x² (an add, a multiply and an add per element), then per (b, k)
            // a square, a subtract and the sum over k, and the ½ per sample.
            flops: 3.0 * b * f * k + 3.0 * b * k + b,
        }
    }

    fn reference(&self) -> Vec<LaunchSpec> {
        let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        let ew = |kernel: &str, n: &str, args: &[&str]| LaunchSpec {
            kernel: kernel.into(),
            grid: [
                format!("ceil_div({n}, 512)").as_str().into(),
                1.into(),
                1.into(),
            ],
            block: [128.into(), 1.into(), 1.into()],
            shared_bytes: 0.into(),
            args: s(args),
        };
        vec![
            // square_of_sum = torch.sum(x, dim=1).pow(2)
            ew(
                "fm_interaction_sum_dim1_reference",
                "B * K",
                &["x", "fm_s", "B", "F", "K"],
            ),
            ew(
                "fm_interaction_square_reference",
                "B * K",
                &["fm_s", "fm_s2", "B * K"],
            ),
            // sum_of_square = torch.sum(x.pow(2), dim=1)
            ew(
                "fm_interaction_square_reference",
                "B * F * K",
                &["x", "fm_xx", "B * F * K"],
            ),
            ew(
                "fm_interaction_sum_dim1_reference",
                "B * K",
                &["fm_xx", "fm_q", "B", "F", "K"],
            ),
            // square_of_sum - sum_of_square
            ew(
                "fm_interaction_sub_reference",
                "B * K",
                &["fm_s2", "fm_q", "fm_d", "B * K"],
            ),
            // torch.sum(…, dim=1)
            LaunchSpec {
                kernel: "fm_interaction_sum_last_reference".into(),
                grid: ["ceil_div(B, 16)".into(), 1.into(), 1.into()],
                block: [16.into(), 16.into(), 1.into()],
                shared_bytes: 0.into(),
                args: s(&["fm_d", "fm_r", "B", "K"]),
            },
            // 0.5 * …
            ew(
                "fm_interaction_scale_reference",
                "B",
                &["fm_r", "out", "B", "0.5"],
            ),
        ]
    }

    fn reference_scratch(&self) -> Vec<ScratchSpec> {
        let bk = |name: &str| ScratchSpec {
            name: name.into(),
            bytes: "B * K * 4".into(),
        };
        vec![
            bk("fm_s"),
            bk("fm_s2"),
            ScratchSpec {
                name: "fm_xx".into(),
                bytes: "B * F * K * 4".into(),
            },
            bk("fm_q"),
            bk("fm_d"),
            ScratchSpec {
                name: "fm_r".into(),
                bytes: "B * 4".into(),
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
        self_test(&FmInteraction, Preset::Ci).unwrap();
    }

    #[test]
    fn inputs_are_well_formed_and_deterministic() {
        let p = FmInteraction;
        let sizes = p.sizes(Preset::Ci);
        let set = p.generate(Preset::Ci, &sizes, 2).unwrap();
        let x = set.tensors.get("x").unwrap();
        assert_eq!(x.shape, vec![37, 7, 16]);
        assert!(x.to_f32_vec().iter().all(|v| (-1.0..1.0).contains(v)));
        assert_eq!(
            p.generate(Preset::Ci, &sizes, 2).unwrap().tensors,
            set.tensors
        );
    }

    /// The oracle's O(F·K) formula against the definition: the sum of the inner products of
    /// every pair of fields.
    #[test]
    fn oracle_equals_the_sum_over_field_pairs() {
        let p = FmInteraction;
        for sizes in std::iter::once(p.sizes(Preset::Ci)).chain(p.edge_sizes(Preset::Ci)) {
            let set = p.generate(Preset::Ci, &sizes, 9).unwrap();
            let (b, f, k) = bfk(&sizes).unwrap();
            let x = set.tensors.get("x").unwrap().to_f32_vec();
            let OracleOutput::Float(out) = &p.oracle(&set).unwrap()["out"] else {
                panic!()
            };
            assert_eq!(out.len(), b);
            for s in 0..b {
                let field = |g: usize| &x[(s * f + g) * k..(s * f + g + 1) * k];
                let mut want = 0.0f64;
                for g in 0..f {
                    for h in 0..g {
                        want += field(g)
                            .iter()
                            .zip(field(h))
                            .map(|(&u, &v)| u as f64 * v as f64)
                            .sum::<f64>();
                    }
                }
                assert!(
                    (out[s] - want).abs() < 1e-12 * (1.0 + want.abs()),
                    "{} vs {want}",
                    out[s]
                );
            }
        }
    }

    #[test]
    fn work_counts_one_pass_over_x() {
        let p = FmInteraction;
        let set = InputSet {
            sizes: p.sizes(Preset::Full),
            ..Default::default()
        };
        let w = p.work(&set);
        let (b, f, k) = (262144.0, 39.0, 16.0);
        assert_eq!(w.compulsory_bytes, 4.0 * (b * f * k + b));
        assert_eq!(w.flops, 3.0 * b * f * k + 3.0 * b * k + b);
        // ≈ 0.65 GB at ≈ 0.75 flop/byte: memory-bound.
        assert!(w.flops / w.compulsory_bytes < 1.0);
    }
}
