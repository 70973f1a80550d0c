//! Problem 12, `fm_interaction`: DeepFM's factorization-machine second-order term.
//!
//! x [B, F, K] fp32 (F fields, each a K-wide embedding) → out [B] =
//! ½ Σ_k ((Σ_f x[b, f, k])² − Σ_f x[b, f, k]²), which equals Σ_{f < g} ⟨x_f, x_g⟩ (every pair
//! of fields' inner product). Memory-bound: one pass over x is all the work needs.
//!
//! Inputs: x uniform in [-1, 1). The reference (`gpu-kernels/src/kernels/fm_interaction.rs`)
//! mirrors the eager `Model` of `kernelbench/12_fm_interaction.py` launch for launch: sum, pow,
//! pow, sum, sub, sum, mul (seven launches, a full [B, F, K] temporary for x²).
use crate::problem::problem_identity;
use crate::families::interaction::{elementwise, sample_rows, uniform};
use crate::sizes::counts_in;
use crate::launch::{LaunchSpec, ScratchSpec};
use crate::spec::Seeds;
use crate::spec::{
    oracle_of, sizes_of, InputSet, Oracle, OracleOutput, Preset, Problem, ProblemError, Sizes,
    TensorSpec, Work,
};
use data_gen::DType;
use rayon::prelude::*;
use serde_json::json;

/// The problem.
pub struct FmInteraction;

fn bfk_sizes(b: i64, f: i64, k: i64) -> Sizes {
    sizes_of(&[("B", b), ("F", f), ("K", k)])
}

fn bfk(sizes: &Sizes) -> Result<[usize; 3], ProblemError> {
    counts_in(sizes, "fm_interaction", ["B", "F", "K"])
}

/// The FM term in f64 by its O(F·K) formula: ½ Σ_k ((Σ_f x)² − Σ_f x²) per sample.
pub fn fm_f64(x: &[f64], b: usize, f: usize, k: usize) -> Vec<f64> {
    fm_by_sample(b, f, k, |s, xs| {
        xs.copy_from_slice(&x[s * f * k..(s + 1) * f * k])
    })
}

/// [`fm_f64`], samples in parallel: `fill(s, xs)` writes sample s's x [F·K].
pub fn fm_by_sample(
    b: usize,
    f: usize,
    k: usize,
    fill: impl Fn(usize, &mut [f64]) + Sync,
) -> Vec<f64> {
    (0..b)
        .into_par_iter()
        .map_init(
            || vec![0.0f64; f * k],
            |xs, s| {
                fill(s, xs);
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
            },
        )
        .collect()
}

/// The special-value set: NaN, ±inf and −0 in x.
const NON_FINITE_FIELDS: &str = "non-finite-fields";

impl Problem for FmInteraction {
    problem_identity!(
        12,
        "fm_interaction",
        "DeepFM second-order term: ½ Σ_k ((Σ_f x)² − Σ_f x²) per sample, fp32"
    );

    fn tensors(&self) -> Vec<TensorSpec> {
        vec![
            TensorSpec::input("x", DType::F32, &["B", "F", "K"]),
            TensorSpec::output("out", DType::F32, &["B"]),
        ]
    }

    fn sizes(&self, preset: Preset) -> Sizes {
        match preset {
            // B = 37: no block of the reduction or elementwise kernels is full.
            Preset::Ci => bfk_sizes(37, 7, 16),
            Preset::Small => bfk_sizes(32768, 39, 16),
            // Criteo's 39 fields (13 dense bucketized + 26 categorical), K = 16.
            Preset::Full => bfk_sizes(262144, 39, 16),
        }
    }

    fn shapes(&self, preset: Preset) -> Vec<crate::shapes::Shape> {
        let shapes: &[crate::shapes::Variation] = match preset {
            Preset::Ci => &[("k5", &[("K", 5)], "K = 5")],
            _ => &[
                ("k32", &[("K", 32)], "K = 32"),
                ("k64", &[("K", 64)], "K = 64"),
                ("f26", &[("F", 26)], "Criteo's 26 categorical fields"),
            ],
        };
        crate::shapes::shapes_of(self.sizes(preset), shapes)
    }

    fn recipe(&self, _preset: Preset) -> serde_json::Value {
        json!({
            "x": {"distribution": "uniform", "low": -1.0, "high": 1.0},
            "precision": "fp32 accumulation",
        })
    }

    fn generate(&self, _: Preset, sizes: &Sizes, seeds: Seeds) -> Result<InputSet, ProblemError> {
        let seed = seeds.set;
        let [b, f, k] = bfk(sizes)?;
        let set = InputSet::builder(seed, sizes);
        Ok(uniform(set, seed, "x", &[b, f, k], (-1.0, 1.0))?.build())
    }

    fn special_sets(&self) -> Vec<&'static str> {
        vec![NON_FINITE_FIELDS]
    }

    fn generate_special(&self, name: &str, preset: Preset, seeds: Seeds) -> Result<InputSet, ProblemError> {
        if name != NON_FINITE_FIELDS {
            return Err(ProblemError::invalid(self.name(), format!("no special set `{name}`")));
        }
        // x[b, 0, 0] of samples 1–4 is NaN, +inf, −inf and −0: out is NaN for the first three
        // ((Σx)² − Σx² is inf − inf), finite for the fourth.
        let set = self.generate(preset, &self.sizes(preset), seeds)?;
        let row = set.count("F") * set.count("K");
        crate::special::with_special_values(set, "x", row, &[1, 2, 3, 4])
    }

    fn edge_sizes(&self, _preset: Preset) -> Vec<Sizes> {
        // K = 10 (DeepFM's paper size): not a multiple of 4, so no 16-byte path applies;
        // F = 2: a single pair of fields.
        vec![bfk_sizes(3, 39, 10), bfk_sizes(2, 2, 16)]
    }

    fn oracle(&self, inputs: &InputSet) -> Result<Oracle, ProblemError> {
        let [b, f, k] = bfk(&inputs.sizes)?;
        let x = sample_rows(self.name(), inputs, "x", b, f * k)?;
        let out = fm_by_sample(b, f, k, |s, xs| x.f64_into(s, xs));
        Ok(oracle_of([("out", OracleOutput::Float(out))]))
    }

    fn work(&self, inputs: &InputSet) -> Work {
        let [b, f, k] = ["B", "F", "K"].map(|n| inputs.count(n) as f64);
        let bytes = 4.0 * (b * f * k + b);
        Work {
            compulsory_bytes: bytes,
            logical_bytes: bytes,
            // Σ_f x and Σ_f x² (an add, a multiply and an add per element), then per (b, k)
            // a square, a subtract and the sum over k, and the ½ per sample.
            flops: 3.0 * b * f * k + 3.0 * b * k + b,
            gathered: None,
        }
    }

    fn reference(&self) -> Vec<LaunchSpec> {
        vec![
            // square_of_sum = torch.sum(x, dim=1).pow(2)
            elementwise(
                "fm_interaction_sum_dim1_reference",
                "B * K",
                &["x", "fm_s", "B", "F", "K"],
            ),
            elementwise(
                "fm_interaction_square_reference",
                "B * K",
                &["fm_s", "fm_s2", "B * K"],
            ),
            // sum_of_square = torch.sum(x.pow(2), dim=1)
            elementwise(
                "fm_interaction_square_reference",
                "B * F * K",
                &["x", "fm_xx", "B * F * K"],
            ),
            elementwise(
                "fm_interaction_sum_dim1_reference",
                "B * K",
                &["fm_xx", "fm_q", "B", "F", "K"],
            ),
            // square_of_sum - sum_of_square
            elementwise(
                "fm_interaction_sub_reference",
                "B * K",
                &["fm_s2", "fm_q", "fm_d", "B * K"],
            ),
            // torch.sum(…, dim=1)
            LaunchSpec::new(
                "fm_interaction_sum_last_reference",
                ["ceil_div(B, 16)".into(), 1.into(), 1.into()],
                [16.into(), 16.into(), 1.into()],
                &["fm_d", "fm_r", "B", "K"],
            ),
            // 0.5 * …
            elementwise(
                "fm_interaction_scale_reference",
                "B",
                &["fm_r", "out", "B", "0.5"],
            ),
        ]
    }

    fn reference_scratch(&self) -> Vec<ScratchSpec> {
        [
            ("fm_s", "B * K * 4"),
            ("fm_s2", "B * K * 4"),
            ("fm_xx", "B * F * K * 4"),
            ("fm_q", "B * K * 4"),
            ("fm_d", "B * K * 4"),
            ("fm_r", "B * 4"),
        ]
        .into_iter()
        .map(|(name, bytes)| ScratchSpec::new(name, bytes))
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::families::interaction::testing::{assert_uniform_inputs, work_at};
    use crate::testing::ci_and_edge_sets;
    crate::selftest::self_test_case!(FmInteraction);

    #[test]
    fn inputs_are_well_formed_and_deterministic() {
        assert_uniform_inputs(&FmInteraction, &[("x", &[37, 7, 16], (-1.0, 1.0))]);
    }

    /// The oracle's O(F·K) formula against the definition: the sum of the inner products of
    /// every pair of fields.
    #[test]
    fn oracle_equals_the_sum_over_field_pairs() {
        let p = FmInteraction;
        for (sizes, set) in ci_and_edge_sets(&p, 9) {
            let [b, f, k] = bfk(&sizes).unwrap();
            let x = set.f32s("x").unwrap();
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
        let w = work_at(&FmInteraction, Preset::Full);
        let (b, f, k) = (262144.0, 39.0, 16.0);
        assert_eq!(w.compulsory_bytes, 4.0 * (b * f * k + b));
        assert_eq!(w.flops, 3.0 * b * f * k + 3.0 * b * k + b);
        // ≈ 0.65 GB at ≈ 0.75 flop/byte: memory-bound.
        assert!(w.flops / w.compulsory_bytes < 1.0);
    }
}
