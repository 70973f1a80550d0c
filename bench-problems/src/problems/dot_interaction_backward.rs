//! Problem 11, `dot_interaction_backward`: the gradient of problem 10 (`dot_interaction`) with
//! respect to x and emb, given grad_out [B, D + P].
//!
//! With T = [x; emb] [B, F+1, D] and dZ [B, F+1, F+1] holding grad_out's pair column p at
//! (i_p, j_p) (problem 10's pair order, zeros elsewhere): dT = (dZ + dZᵀ)·T,
//! `dx = grad_out[:, :D] + dT[:, 0]` (x reaches the output twice: copied, and as T's row 0) and
//! `d_emb = dT[:, 1:]`. Per pair p = (i, j): dT_i += g_p·T_j and dT_j += g_p·T_i.
//!
//! Inputs: problem 10's x and emb (the same draw for the same seed) and grad_out uniform in
//! [-1, 1). The reference (`gpu-kernels/src/kernels/dot_interaction_backward.rs`) mirrors the
//! eager `Model` of `kernelbench/11_dot_interaction_backward.py` launch for launch: cat (T),
//! zeros (dZ), the lower-triangle scatter, dZ + dZᵀ, one batched SGEMM, the add for dx.
use super::dot_interaction::{bfd, dot_edge_sizes, dot_inputs, dot_sizes, pairs};
use crate::launch::{LaunchSpec, ScratchSpec};
use crate::spec::{
    InputSet, OracleOutput, Preset, Problem, ProblemError, Role, Sizes, TensorSpec, Work,
};
use data_gen::{seed::derive_str, uniform_f32, DType, HostTensor};
use rayon::prelude::*;
use serde_json::json;
use std::collections::BTreeMap;

/// The problem.
pub struct DotInteractionBackward;

/// The backward in f64: (dx [B, D], d_emb [B, F, D]) for x [B, D], emb [B, F, D] and
/// grad_out [B, D + P].
pub fn backward_f64(
    x: &[f64],
    emb: &[f64],
    grad_out: &[f64],
    b: usize,
    f: usize,
    d: usize,
) -> (Vec<f64>, Vec<f64>) {
    let pairs = pairs(f);
    let width = d + pairs.len();
    let mut dx = vec![0.0f64; b * d];
    let mut d_emb = vec![0.0f64; b * f * d];
    dx.par_chunks_mut(d)
        .zip(d_emb.par_chunks_mut(f * d))
        .enumerate()
        .for_each(|(s, (dx_row, de_rows))| {
            let t = |i: usize| {
                if i == 0 {
                    &x[s * d..(s + 1) * d]
                } else {
                    &emb[(s * f + i - 1) * d..(s * f + i) * d]
                }
            };
            let g = &grad_out[s * width..(s + 1) * width];
            let mut dt = vec![0.0f64; (f + 1) * d];
            for (p, &(i, j)) in pairs.iter().enumerate() {
                let gp = g[d + p];
                for c in 0..d {
                    dt[i * d + c] += gp * t(j)[c];
                    dt[j * d + c] += gp * t(i)[c];
                }
            }
            for c in 0..d {
                dx_row[c] = g[c] + dt[c];
            }
            de_rows.copy_from_slice(&dt[d..]);
        });
    (dx, d_emb)
}

impl Problem for DotInteractionBackward {
    fn number(&self) -> u32 {
        11
    }

    fn name(&self) -> &'static str {
        "dot_interaction_backward"
    }

    fn summary(&self) -> &'static str {
        "gradient of the DLRM dot interaction: dx, d_emb from grad_out (dT = (dZ + dZᵀ)·T), fp32"
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
                name: "grad_out",
                dtype: DType::F32,
                shape: &["B", "D + F * (F + 1) / 2"],
                role: Role::Input,
            },
            TensorSpec {
                name: "dx",
                dtype: DType::F32,
                shape: &["B", "D"],
                role: Role::Output,
            },
            TensorSpec {
                name: "d_emb",
                dtype: DType::F32,
                shape: &["B", "F", "D"],
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
                  "note": "problem 10's draw for the same seed"},
            "emb": {"distribution": "uniform", "low": -1.0, "high": 1.0},
            "grad_out": {"distribution": "uniform", "low": -1.0, "high": 1.0},
            "pair_order": "problem 10's: for i in 1..=F, for j in 0..i; pair p at column D + p",
            "precision": "fp32 products and accumulation (no TF32)",
        })
    }

    fn generate(
        &self,
        _preset: Preset,
        sizes: &Sizes,
        seed: u64,
    ) -> Result<InputSet, ProblemError> {
        let (b, f, d) = bfd(self.name(), sizes)?;
        let mut tensors = dot_inputs(self.name(), sizes, seed)?;
        let width = d + f * (f + 1) / 2;
        let g = uniform_f32(b * width, derive_str(seed, "grad_out"), -1.0, 1.0);
        tensors.insert("grad_out", HostTensor::from_f32(vec![b, width], g)?);
        Ok(InputSet {
            seed,
            sizes: sizes.clone(),
            scalars: BTreeMap::new(),
            tensors,
        })
    }

    fn edge_sizes(&self, _preset: Preset) -> Vec<Sizes> {
        dot_edge_sizes()
    }

    fn oracle(&self, inputs: &InputSet) -> Result<BTreeMap<String, OracleOutput>, ProblemError> {
        let (b, f, d) = bfd(self.name(), &inputs.sizes)?;
        let x = inputs.tensors.get("x")?.to_f64_vec();
        let emb = inputs.tensors.get("emb")?.to_f64_vec();
        let g = inputs.tensors.get("grad_out")?.to_f64_vec();
        let (dx, d_emb) = backward_f64(&x, &emb, &g, b, f, d);
        Ok([
            ("dx".to_string(), OracleOutput::Float(dx)),
            ("d_emb".to_string(), OracleOutput::Float(d_emb)),
        ]
        .into_iter()
        .collect())
    }

    fn work(&self, inputs: &InputSet) -> Work {
        let s = |k: &str| inputs.sizes.get(k).copied().unwrap_or(0) as f64;
        let (b, f, d) = (s("B"), s("F"), s("D"));
        let p = f * (f + 1.0) / 2.0;
        // Read x, emb and grad_out once; write dx and d_emb once.
        let bytes = 4.0 * (b * d + b * f * d + b * (d + p) + b * d + b * f * d);
        Work {
            compulsory_bytes: bytes,
            logical_bytes: bytes,
            // Each pair adds g·T_j to dT_i and g·T_i to dT_j (2 FMAs per element of D), plus
            // the add for dx (eager's bmm over the full symmetric dZ does twice the FMAs).
            flops: 4.0 * b * p * d + b * d,
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
            // T = torch.cat([x.unsqueeze(1), emb], dim=1) (autograd would have saved it).
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
            // dZ = torch.zeros(B, F + 1, F + 1)
            ew(
                "dot_interaction_backward_zero_reference",
                "B * (F + 1) * (F + 1)",
                &["dz", "B * (F + 1) * (F + 1)"],
            ),
            // dZ[:, li, lj] = grad_out[:, D:]
            LaunchSpec {
                kernel: "dot_interaction_backward_tril_scatter_reference".into(),
                grid: [
                    "ceil_div(F * (F + 1) / 2, 32)".into(),
                    "ceil_div(B, 32)".into(),
                    1.into(),
                ],
                block: [32.into(), 8.into(), 1.into()],
                shared_bytes: 0.into(),
                args: s(&["grad_out", "dz", "B", "F + 1", "D + F * (F + 1) / 2", "D"]),
            },
            // dZ + dZ.transpose(1, 2)
            ew(
                "dot_interaction_backward_add_transpose_reference",
                "B * (F + 1) * (F + 1)",
                &["dz", "dz_sym", "B", "F + 1"],
            ),
            // dT = torch.bmm(dZ + dZᵀ, T): rows 1.. are d_emb (eager's dT[:, 1:] view), row 0
            // goes to scratch (eager reads dT[:, 0] in place).
            LaunchSpec {
                kernel: "dot_interaction_backward_bmm_nn_reference".into(),
                grid: [
                    "B".into(),
                    "ceil_div(F + 1, 32)".into(),
                    "ceil_div(D, 32)".into(),
                ],
                block: [64.into(), 1.into(), 1.into()],
                shared_bytes: 0.into(),
                args: s(&["dz_sym", "cat_t", "d_emb", "dt0", "F + 1", "D", "F + 1"]),
            },
            // dx = grad_out[:, :D] + dT[:, 0]
            ew(
                "dot_interaction_backward_add_reference",
                "B * D",
                &["grad_out", "dt0", "dx", "B", "D", "D + F * (F + 1) / 2"],
            ),
        ]
    }

    fn reference_scratch(&self) -> Vec<ScratchSpec> {
        vec![
            ScratchSpec {
                name: "cat_t".into(),
                bytes: "B * (F + 1) * D * 4".into(),
            },
            ScratchSpec {
                name: "dz".into(),
                bytes: "B * (F + 1) * (F + 1) * 4".into(),
            },
            ScratchSpec {
                name: "dz_sym".into(),
                bytes: "B * (F + 1) * (F + 1) * 4".into(),
            },
            ScratchSpec {
                name: "dt0".into(),
                bytes: "B * D * 4".into(),
            },
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::dot_interaction::{forward_f64, DotInteraction};
    use super::*;
    use crate::selftest::self_test;

    #[test]
    fn self_test_rejects_degenerate_outputs() {
        self_test(&DotInteractionBackward, Preset::Ci).unwrap();
    }

    #[test]
    fn inputs_share_problem_10s_draw() {
        let p = DotInteractionBackward;
        let sizes = p.sizes(Preset::Ci);
        let set = p.generate(Preset::Ci, &sizes, 8).unwrap();
        let fwd = DotInteraction.generate(Preset::Ci, &sizes, 8).unwrap();
        assert_eq!(set.tensors.get("x").unwrap(), fwd.tensors.get("x").unwrap());
        assert_eq!(
            set.tensors.get("emb").unwrap(),
            fwd.tensors.get("emb").unwrap()
        );
        let g = set.tensors.get("grad_out").unwrap();
        assert_eq!(g.shape, vec![19, 36 + 21]);
        assert!(g.to_f32_vec().iter().all(|v| (-1.0..1.0).contains(v)));
    }

    /// The oracle is the gradient of L = Σ grad_out · forward(x, emb): the forward is
    /// quadratic, so a central difference of the independent forward oracle is exact up to
    /// rounding.
    #[test]
    fn oracle_is_the_gradient_of_the_forward() {
        let p = DotInteractionBackward;
        for sizes in std::iter::once(p.sizes(Preset::Ci)).chain(p.edge_sizes(Preset::Ci)) {
            let set = p.generate(Preset::Ci, &sizes, 4).unwrap();
            let (b, f, d) = bfd("t", &sizes).unwrap();
            let x = set.tensors.get("x").unwrap().to_f64_vec();
            let emb = set.tensors.get("emb").unwrap().to_f64_vec();
            let g = set.tensors.get("grad_out").unwrap().to_f64_vec();
            let oracle = p.oracle(&set).unwrap();
            let (OracleOutput::Float(dx), OracleOutput::Float(d_emb)) =
                (&oracle["dx"], &oracle["d_emb"])
            else {
                panic!()
            };
            let loss = |x: &[f64], emb: &[f64]| -> f64 {
                forward_f64(x, emb, b, f, d)
                    .iter()
                    .zip(&g)
                    .map(|(o, g)| o * g)
                    .sum()
            };
            let h = 1e-3;
            let probes = [(0usize, 0usize), (b - 1, d - 1), (b / 2, d / 2)];
            for &(s, c) in &probes {
                let k = s * d + c;
                let (mut xp, mut xm) = (x.clone(), x.clone());
                xp[k] += h;
                xm[k] -= h;
                let fd = (loss(&xp, &emb) - loss(&xm, &emb)) / (2.0 * h);
                assert!(
                    (fd - dx[k]).abs() < 1e-8 * (1.0 + fd.abs()),
                    "dx[{s},{c}]: {fd} vs {}",
                    dx[k]
                );
                for feat in [0, f - 1] {
                    let k = (s * f + feat) * d + c;
                    let (mut ep, mut em) = (emb.clone(), emb.clone());
                    ep[k] += h;
                    em[k] -= h;
                    let fd = (loss(&x, &ep) - loss(&x, &em)) / (2.0 * h);
                    assert!(
                        (fd - d_emb[k]).abs() < 1e-8 * (1.0 + fd.abs()),
                        "d_emb[{s},{feat},{c}]: {fd} vs {}",
                        d_emb[k]
                    );
                }
            }
        }
    }

    #[test]
    fn work_counts_bytes_and_pair_flops() {
        let p = DotInteractionBackward;
        let set = InputSet {
            sizes: p.sizes(Preset::Full),
            ..Default::default()
        };
        let w = p.work(&set);
        let (b, f, d, pairs) = (65536.0, 26.0, 128.0, 351.0);
        assert_eq!(w.flops, 4.0 * b * pairs * d + b * d);
        assert_eq!(
            w.compulsory_bytes,
            4.0 * b * (2.0 * d + 2.0 * f * d + d + pairs)
        );
    }
}
