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
use crate::problem::problem_identity;
use crate::families::interaction::{
    bfd, bmm, cat_t, cat_t_scratch, dot_edge_sizes, dot_inputs, dot_recipe, dot_signature,
    dot_sizes, elementwise, pairs, sample_rows, tril, uniform, DotRows, OUT_WIDTH,
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
    let width = d + f * (f + 1) / 2;
    backward_by_sample(
        b,
        f,
        d,
        |s, t| {
            t[..d].copy_from_slice(&x[s * d..(s + 1) * d]);
            t[d..].copy_from_slice(&emb[s * f * d..(s + 1) * f * d]);
        },
        |s, g| g.copy_from_slice(&grad_out[s * width..(s + 1) * width]),
    )
}

/// The backward in f64, samples in parallel: `fill_t(s, t)` writes sample s's T = [x; emb]
/// [(F+1)·D] and `fill_g(s, g)` its grad_out row [D + P]. Each element of dT sums its pairs'
/// terms in pair order.
pub fn backward_by_sample(
    b: usize,
    f: usize,
    d: usize,
    fill_t: impl Fn(usize, &mut [f64]) + Sync,
    fill_g: impl Fn(usize, &mut [f64]) + Sync,
) -> (Vec<f64>, Vec<f64>) {
    let pairs = pairs(f);
    let width = d + pairs.len();
    let mut dx = vec![0.0f64; b * d];
    let mut d_emb = vec![0.0f64; b * f * d];
    let scratch = || {
        let rows = vec![0.0f64; (f + 1) * d];
        (rows.clone(), vec![0.0f64; width], rows)
    };
    dx.par_chunks_mut(d)
        .zip(d_emb.par_chunks_mut(f * d))
        .enumerate()
        .for_each_init(scratch, |(t, g, dt), (s, (dx_row, de_rows))| {
            fill_t(s, t);
            fill_g(s, g);
            dt.fill(0.0);
            for (p, &(i, j)) in pairs.iter().enumerate() {
                let gp = g[d + p];
                // j < i: row j lies before row i.
                let (below, from_i) = dt.split_at_mut(i * d);
                let (dt_i, dt_j) = (&mut from_i[..d], &mut below[j * d..(j + 1) * d]);
                let (t_i, t_j) = (&t[i * d..(i + 1) * d], &t[j * d..(j + 1) * d]);
                for c in 0..d {
                    dt_i[c] += gp * t_j[c];
                    dt_j[c] += gp * t_i[c];
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
    problem_identity!(
        11,
        "dot_interaction_backward",
        "gradient of the DLRM dot interaction: dx, d_emb from grad_out (dT = (dZ + dZᵀ)·T), fp32"
    );

    fn tensors(&self) -> Vec<TensorSpec> {
        dot_signature([
            TensorSpec::input("grad_out", DType::F32, &["B", OUT_WIDTH]),
            TensorSpec::output("dx", DType::F32, &["B", "D"]),
            TensorSpec::output("d_emb", DType::F32, &["B", "F", "D"]),
        ])
    }

    fn sizes(&self, preset: Preset) -> Sizes {
        dot_sizes(preset)
    }

    fn shapes(&self, preset: Preset) -> Vec<crate::shapes::Shape> {
        crate::families::interaction::dot_shapes(preset)
    }

    fn recipe(&self, _preset: Preset) -> serde_json::Value {
        let mut recipe = dot_recipe("problem 10's draw for the same seed");
        recipe["grad_out"] = json!({"distribution": "uniform", "low": -1.0, "high": 1.0});
        recipe["pair_order"] =
            json!("problem 10's: for i in 1..=F, for j in 0..i; pair p at column D + p");
        recipe
    }

    fn generate(&self, _: Preset, sizes: &Sizes, seeds: Seeds) -> Result<InputSet, ProblemError> {
        let seed = seeds.set;
        let [b, f, d] = bfd(self.name(), sizes)?;
        let set = dot_inputs(InputSet::builder(seed, sizes), seed, [b, f, d])?;
        let width = d + f * (f + 1) / 2;
        Ok(uniform(set, seed, "grad_out", &[b, width], (-1.0, 1.0))?.build())
    }

    fn edge_sizes(&self, _preset: Preset) -> Vec<Sizes> {
        dot_edge_sizes()
    }

    fn oracle(&self, inputs: &InputSet) -> Result<Oracle, ProblemError> {
        let rows = DotRows::of(self.name(), inputs)?;
        let [b, f, d] = rows.dims;
        let g = sample_rows(self.name(), inputs, "grad_out", b, d + f * (f + 1) / 2)?;
        let (dx, d_emb) = backward_by_sample(
            b,
            f,
            d,
            |s, t| rows.t_into(s, t),
            |s, row| g.f64_into(s, row),
        );
        Ok(oracle_of([
            ("dx", OracleOutput::Float(dx)),
            ("d_emb", OracleOutput::Float(d_emb)),
        ]))
    }

    fn work(&self, inputs: &InputSet) -> Work {
        let [b, f, d] = ["B", "F", "D"].map(|k| inputs.count(k) as f64);
        let p = f * (f + 1.0) / 2.0;
        // Read x, emb and grad_out once; write dx and d_emb once.
        let bytes = 4.0 * (b * d + b * f * d + b * (d + p) + b * d + b * f * d);
        Work {
            compulsory_bytes: bytes,
            logical_bytes: bytes,
            // Each pair adds g·T_j to dT_i and g·T_i to dT_j (2 FMAs per element of D), plus
            // the add for dx (eager's bmm over the full symmetric dZ does twice the FMAs).
            flops: 4.0 * b * p * d + b * d,
            gathered: None,
        }
    }

    fn reference(&self) -> Vec<LaunchSpec> {
        let square = "B * (F + 1) * (F + 1)";
        vec![
            // T = torch.cat([x.unsqueeze(1), emb], dim=1) (autograd would have saved it).
            cat_t(),
            // dZ = torch.zeros(B, F + 1, F + 1)
            elementwise(
                "dot_interaction_backward_zero_reference",
                square,
                &["dz", square],
            ),
            // dZ[:, li, lj] = grad_out[:, D:]
            tril(
                "dot_interaction_backward_tril_scatter_reference",
                &["grad_out", "dz", "B", "F + 1", OUT_WIDTH, "D"],
            ),
            // dZ + dZ.transpose(1, 2)
            elementwise(
                "dot_interaction_backward_add_transpose_reference",
                square,
                &["dz", "dz_sym", "B", "F + 1"],
            ),
            // dT = torch.bmm(dZ + dZᵀ, T): rows 1.. are d_emb (eager's dT[:, 1:] view), row 0
            // goes to scratch (eager reads dT[:, 0] in place).
            bmm(
                "dot_interaction_backward_bmm_nn_reference",
                "D",
                &["dz_sym", "cat_t", "d_emb", "dt0", "F + 1", "D", "F + 1"],
            ),
            // dx = grad_out[:, :D] + dT[:, 0]
            elementwise(
                "dot_interaction_backward_add_reference",
                "B * D",
                &["grad_out", "dt0", "dx", "B", "D", OUT_WIDTH],
            ),
        ]
    }

    fn reference_scratch(&self) -> Vec<ScratchSpec> {
        vec![
            cat_t_scratch(),
            ScratchSpec::new("dz", "B * (F + 1) * (F + 1) * 4"),
            ScratchSpec::new("dz_sym", "B * (F + 1) * (F + 1) * 4"),
            ScratchSpec::new("dt0", "B * D * 4"),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::dot_interaction::{forward_f64, DotInteraction};
    use super::*;
    use crate::families::interaction::f64_tensors;
    use crate::families::interaction::testing::{assert_uniform_inputs, work_at};
    use crate::testing::{ci_and_edge_sets, ci_set};
    crate::selftest::self_test_case!(DotInteractionBackward);

    #[test]
    fn inputs_share_problem_10s_draw() {
        let (set, fwd) = (ci_set(&DotInteractionBackward, 8), ci_set(&DotInteraction, 8));
        assert_eq!(set.tensors.get("x").unwrap(), fwd.tensors.get("x").unwrap());
        assert_eq!(
            set.tensors.get("emb").unwrap(),
            fwd.tensors.get("emb").unwrap()
        );
        assert_uniform_inputs(
            &DotInteractionBackward,
            &[("grad_out", &[19, 36 + 21], (-1.0, 1.0))],
        );
    }

    /// The oracle is the gradient of L = Σ grad_out · forward(x, emb): the forward is
    /// quadratic, so a central difference of the independent forward oracle is exact up to
    /// rounding.
    #[test]
    fn oracle_is_the_gradient_of_the_forward() {
        let p = DotInteractionBackward;
        for (sizes, set) in ci_and_edge_sets(&p, 4) {
            let [b, f, d] = bfd("t", &sizes).unwrap();
            let [x, emb, g] = f64_tensors(&set, ["x", "emb", "grad_out"]).unwrap();
            let oracle = p.oracle(&set).unwrap();
            let (OracleOutput::Float(dx), OracleOutput::Float(d_emb)) =
                (&oracle["dx"], &oracle["d_emb"])
            else {
                panic!()
            };
            let loss = |[x, emb]: &[Vec<f64>; 2]| -> f64 {
                forward_f64(x, emb, b, f, d)
                    .iter()
                    .zip(&g)
                    .map(|(o, g)| o * g)
                    .sum()
            };
            // The central difference of the loss in element k of operand `which` (0: x, 1: emb).
            let h = 1e-3;
            let central = |which: usize, k: usize| {
                let (mut plus, mut minus) = ([x.clone(), emb.clone()], [x.clone(), emb.clone()]);
                plus[which][k] += h;
                minus[which][k] -= h;
                (loss(&plus) - loss(&minus)) / (2.0 * h)
            };
            let close = |fd: f64, want: f64| (fd - want).abs() < 1e-8 * (1.0 + fd.abs());
            let probes = [(0usize, 0usize), (b - 1, d - 1), (b / 2, d / 2)];
            for &(s, c) in &probes {
                let k = s * d + c;
                let fd = central(0, k);
                assert!(close(fd, dx[k]), "dx[{s},{c}]: {fd} vs {}", dx[k]);
                for feat in [0, f - 1] {
                    let k = (s * f + feat) * d + c;
                    let fd = central(1, k);
                    assert!(
                        close(fd, d_emb[k]),
                        "d_emb[{s},{feat},{c}]: {fd} vs {}",
                        d_emb[k]
                    );
                }
            }
        }
    }

    #[test]
    fn work_counts_bytes_and_pair_flops() {
        let w = work_at(&DotInteractionBackward, Preset::Full);
        let (b, f, d, pairs) = (65536.0, 26.0, 128.0, 351.0);
        assert_eq!(w.flops, 4.0 * b * pairs * d + b * d);
        assert_eq!(
            w.compulsory_bytes,
            4.0 * b * (2.0 * d + 2.0 * f * d + d + pairs)
        );
    }
}
