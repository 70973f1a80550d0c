//! Problem 5, `embedding_backward_rowwise_adagrad`: the backward of a sum-pooled embedding bag
//! fused with a row-wise Adagrad step on one fp32 table, in place.
//!
//! Given `grad_output` [B, D], the bags (`indices`, `offsets`), the table `weight` [E, D] and
//! the row-wise state `momentum` [E] (both updated in place), and scalars `lr`, `eps`: for each
//! distinct row r looked up, g = Σ grad_output[b] over every lookup of r (a row looked up k times
//! gets k terms), m[r] += mean(g²), W[r] -= lr·g / (sqrt(m[r]) + eps) (FBGEMM's
//! EXACT_ROWWISE_ADAGRAD). The oracle of each in-place tensor is a [`RowUpdate`]: the distinct
//! rows looked up and their update (new − initial) in f64, computed once per set, never the
//! whole table (1G elements at `full`). Its check ([`crate::check::check_rows`]) compares rows
//! not looked up with their initial bytes (bit-identical) and the update of every looked-up row
//! with the oracle's, since a tolerance test on the whole table is dominated by the untouched
//! rows. On the device the runner proves the untouched rows by fingerprint and copies back only
//! the looked-up ones ([`crate::check::check_changed_rows`]).
//!
//! The eager `Model` finds the distinct rows with `torch.unique` (a sort), reduces with
//! `index_add_` and updates with indexed gathers and scatters. The reference keeps that shape
//! (distinct rows, then reduce with fp32 atomics, then update) but finds the distinct rows with
//! a hash table in scratch (`gpu-kernels` `embedding_backward_rowwise_adagrad`: clear, insert,
//! assign ids, zero, accumulate, update: six launches).
//!
//! Inputs: Zipf(α = 1.15) rows with hot rows scattered (hot rows make long runs of one row);
//! log-normal bag lengths (mean 20, σ = 1), bag 0 empty and bag B/2 of the longest length;
//! grad_output and weight uniform in [-1, 1), momentum uniform in [0, 1); lr = 0.01, eps = 1e-8.
use crate::check::Tolerance;
use crate::problem::problem_identity;
use crate::families::bags::{self, BagRecipe, BagSizes, Bags, Counts};
use crate::launch::{LaunchSpec, ScratchSpec};
use crate::spec::{shared_table, Seeds};
use crate::spec::{
    oracle_of, size, InputSet, Oracle, OracleOutput, Preset, Problem, ProblemError, RowUpdate,
    Sizes, TensorSpec, Work,
};
use data_gen::{seed::derive_str, uniform_bytes, uniform_f32, DType, HostTensor};
use rayon::prelude::*;
use serde_json::json;

/// The problem.
pub struct EmbeddingBackwardRowwiseAdagrad;

const NAME: &str = "embedding_backward_rowwise_adagrad";
/// Zipf exponent of the row indices (FBGEMM's recommended training value).
const ALPHA: f64 = 1.15;
/// Learning rate and epsilon of the step (FBGEMM's defaults for row-wise Adagrad).
pub const LR: f64 = 0.01;
pub const EPS: f64 = 1e-8;
/// Bounds on the error of the per-row update (new − initial) of looked-up rows, relative to the
/// oracle's update: relative L2 over all of them, and the largest error over the largest update.
/// A correct fp32 kernel lands near 1e-6 (the rounding of W − update is ≈ 3e-8 against updates of
/// ≈ 6e-3); an update 0.1% off fails.
pub const UPDATE_REL_L2: f64 = 1e-4;
pub const UPDATE_MAX_SCALED: f64 = 1e-3;
/// E = 8M, D = 128, B = 65536 at `full` (DESIGN §3).
const SIZES: BagSizes = BagSizes {
    small: (1 << 20, 128, 16384),
    full: (8 << 20, 128, 65536),
};

fn recipe(preset: Preset) -> BagRecipe {
    BagRecipe::new(preset, ALPHA, 20.0)
}

/// The step's learning rate and epsilon as the kernels see them (f32), widened to f64.
fn step_scalars(inputs: &InputSet) -> (f64, f64) {
    let get = |k: &str, default: f64| inputs.scalars.get(k).copied().unwrap_or(default);
    (get("lr", LR) as f32 as f64, get("eps", EPS) as f32 as f64)
}

/// The distinct rows looked up (ascending) and each one's summed gradient g (f64, D per row).
fn row_gradients(inputs: &InputSet) -> Result<(Vec<i64>, Vec<f64>), ProblemError> {
    let d = size(&inputs.sizes, NAME, "D")? as usize;
    let grad = inputs.f32s("grad_output")?;
    let bags = Bags::of(inputs)?;
    // (row, bag) of every lookup, sorted by row: each distinct row is one run.
    let mut pairs: Vec<(i64, u32)> = Vec::with_capacity(bags.n());
    for bag in 0..bags.count() {
        for j in bags.lookups(bag) {
            pairs.push((bags.indices[j], bag as u32));
        }
    }
    pairs.par_sort_unstable();
    let mut starts: Vec<usize> = (0..pairs.len())
        .filter(|&i| i == 0 || pairs[i].0 != pairs[i - 1].0)
        .collect();
    let rows: Vec<i64> = starts.iter().map(|&i| pairs[i].0).collect();
    starts.push(pairs.len());
    let mut g = vec![0.0f64; rows.len() * d];
    g.par_chunks_mut(d.max(1))
        .zip(starts.par_windows(2))
        .for_each(|(g_row, run)| {
            for &(_, bag) in &pairs[run[0]..run[1]] {
                let src = &grad[bag as usize * d..(bag as usize + 1) * d];
                for (acc, &x) in g_row.iter_mut().zip(src) {
                    *acc += x as f64;
                }
            }
        });
    Ok((rows, g))
}

/// The exact step on the looked-up rows, in f64.
struct Step {
    /// The distinct rows looked up, ascending.
    rows: Vec<i64>,
    /// Per row: the momentum increment mean(g²).
    dm: Vec<f64>,
    /// Per row, D each: the weight update −lr·g/(sqrt(m0 + mean(g²)) + eps).
    dw: Vec<f64>,
}

/// The step of `inputs` on every distinct row.
fn updates(inputs: &InputSet) -> Result<Step, ProblemError> {
    let d = size(&inputs.sizes, NAME, "D")? as usize;
    let (lr, eps) = step_scalars(inputs);
    let momentum = inputs.f32s("momentum")?;
    let (rows, mut g) = row_gradients(inputs)?;
    let dm: Vec<f64> = g
        .par_chunks(d.max(1))
        .map(|g_row| g_row.iter().map(|x| x * x).sum::<f64>() / d as f64)
        .collect();
    g.par_chunks_mut(d.max(1))
        .zip(rows.par_iter().zip(&dm))
        .for_each(|(g_row, (&r, &dm))| {
            let denom = (momentum[r as usize] as f64 + dm).sqrt() + eps;
            for x in g_row.iter_mut() {
                *x = -lr * *x / denom;
            }
        });
    Ok(Step { rows, dm, dw: g })
}

impl Problem for EmbeddingBackwardRowwiseAdagrad {
    problem_identity!(
        5,
        NAME,
        "embedding-bag backward + row-wise Adagrad, in place on W [E,D] fp32 and momentum [E]"
    );

    fn tensors(&self) -> Vec<TensorSpec> {
        vec![
            TensorSpec::input("grad_output", DType::F32, &["B", "D"]),
            bags::INDICES,
            bags::OFFSETS,
            TensorSpec::in_out("weight", DType::F32, &["E", "D"]),
            TensorSpec::in_out("momentum", DType::F32, &["E"]),
        ]
    }

    fn sizes(&self, preset: Preset) -> Sizes {
        SIZES.of(preset)
    }

    fn recipe(&self, preset: Preset) -> serde_json::Value {
        recipe(preset).record(json!({
            "grad_output": {"distribution": "uniform", "low": -1.0, "high": 1.0},
            "weight": {"distribution": "uniform", "low": -1.0, "high": 1.0},
            "momentum": {"distribution": "uniform", "low": 0.0, "high": 1.0},
            "lr": LR,
            "eps": EPS,
        }))
    }

    fn generate(&self, preset: Preset, sizes: &Sizes, seeds: Seeds) -> Result<InputSet, ProblemError> {
        let seed = seeds.set;
        let (e, d) = bags::table_dims(NAME, sizes)?;
        let bags = recipe(preset).draw(NAME, sizes, seed)?;
        let b = bags.count();
        let grad = uniform_f32(b * d, derive_str(seed, "grad_output"), -1.0, 1.0);
        let weight = bags::uniform_table(NAME, [e, d], DType::F32, seeds.table)?;
        let momentum = shared_table(NAME, "momentum", &[e], seeds.table, |seed| {
            let m = uniform_bytes(e, derive_str(seed, "momentum"), 0.0, 1.0, DType::F32);
            Ok(HostTensor::new(DType::F32, vec![e], m)?)
        })?;
        Ok(bags
            .builder(seed, sizes)?
            .scalar("lr", LR)
            .scalar("eps", EPS)
            .f32("grad_output", &[b, d], grad)?
            .tensor("weight", weight)
            .tensor("momentum", momentum)
            .build())
    }

    fn edge_sizes(&self, preset: Preset) -> Vec<Sizes> {
        // One bag; the table shrunk too (the case is about the bag, and at `full` every set
        // holds the table three times on the device and its f64 oracle on the host).
        let mut one_bag = bags::one_bag(self.sizes(preset));
        one_bag
            .entry("E".into())
            .and_modify(|e| *e = (*e).min(1 << 16));
        vec![one_bag]
    }

    fn oracle(&self, inputs: &InputSet) -> Result<Oracle, ProblemError> {
        let d = size(&inputs.sizes, NAME, "D")? as usize;
        let e = inputs.tensors.get("momentum")?.numel();
        let Step { rows, dm, dw } = updates(inputs)?;
        let rows_of = |width, delta| {
            OracleOutput::Rows(RowUpdate {
                total_rows: e,
                width,
                rows: rows.clone(),
                delta,
                update_rel_l2: UPDATE_REL_L2,
                update_max_scaled: UPDATE_MAX_SCALED,
            })
        };
        Ok(oracle_of([
            ("weight", rows_of(d, dw)),
            ("momentum", rows_of(1, dm)),
        ]))
    }

    /// The momentum of a looked-up row is its initial value (in [0, 1)) plus mean(g²), and on
    /// hot rows the increment dominates: g sums thousands of fp32 gradients in whatever order the
    /// kernel's atomics land, so the values carry the update's relative error (an H200 reference
    /// measured 1.2e-5 relative L2 on one set of `full`). The momentum's values get the update's
    /// bounds; the update check (same bounds) and the bit-exact untouched rows still hold. The
    /// weight keeps its dtype's bounds: its values are dominated by W (|W| ≈ 1 against updates of
    /// ≈ 6e-3), so its update check is the tight one.
    fn tolerance(&self, output: &TensorSpec) -> Tolerance {
        match output.name {
            "momentum" => Tolerance {
                rel_l2: UPDATE_REL_L2,
                max_scaled: UPDATE_MAX_SCALED,
                exact: false,
            },
            _ => Tolerance::for_dtype(output.dtype),
        }
    }

    fn work(&self, inputs: &InputSet) -> Work {
        let Counts { d, b, n, distinct } = Counts::of(inputs);
        let index_bytes = n * 8.0 + (b + 1.0) * 8.0;
        // Each distinct row: W row and momentum read and written once.
        let row_update = 2.0 * (d * 4.0 + 4.0);
        Work {
            compulsory_bytes: b * d * 4.0 + index_bytes + distinct * row_update,
            // FBGEMM's backward count: twice the forward's (every lookup's row, the outputs).
            logical_bytes: 2.0 * (n * d * 4.0 + b * d * 4.0) + index_bytes,
            flops: n * d + distinct * d * 5.0,
        }
    }

    fn input_stats(&self, inputs: &InputSet) -> serde_json::Value {
        bags::input_stats(inputs)
    }

    fn reference(&self) -> Vec<LaunchSpec> {
        const CAP: &str = "2 * max(N, 1)";
        let threads =
            |kernel: &str, grid: &str, args: &[&str]| LaunchSpec::linear(kernel, grid, 256, args);
        let accumulate = [
            "grad_output",
            "indices",
            "offsets",
            "keys",
            "slot_id",
            CAP,
            "grad_sum",
            "B",
            "D",
        ];
        vec![
            threads(
                "adagrad_hash_clear",
                "ceil_div(2 * max(N, 1), 256)",
                &["keys", CAP, "distinct"],
            ),
            threads(
                "adagrad_hash_insert",
                "ceil_div(max(N, 1), 256)",
                &["indices", "N", "keys", CAP],
            ),
            threads(
                "adagrad_hash_assign",
                "ceil_div(2 * max(N, 1), 256)",
                &["keys", CAP, "slot_id", "rows", "distinct"],
            ),
            threads(
                "adagrad_zero_rows",
                "min(4096, ceil_div(max(N, 1) * D, 256))",
                &["grad_sum", "distinct", "D"],
            ),
            LaunchSpec::new(
                "adagrad_accumulate",
                [
                    "min(1024, ceil_div(max(B, 1) * ceil_div(D, 32), 8))".into(),
                    1.into(),
                    1.into(),
                ],
                [32.into(), 8.into(), 1.into()],
                &accumulate,
            ),
            threads(
                "adagrad_update",
                "ceil_div(max(N, 1) * 32, 256)",
                &[
                    "rows", "distinct", "grad_sum", "weight", "momentum", "lr", "eps", "D",
                ],
            ),
        ]
    }

    fn reference_scratch(&self) -> Vec<ScratchSpec> {
        vec![
            ScratchSpec::new("keys", "2 * max(N, 1) * 8"),
            ScratchSpec::new("slot_id", "2 * max(N, 1) * 4"),
            ScratchSpec::new("rows", "max(N, 1) * 8"),
            ScratchSpec::new("distinct", "4"),
            ScratchSpec::new("grad_sum", "max(N, 1) * D * 4"),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{check_output, check_output_with, encode, CheckContext};
    use data_gen::HostTensor;
    use crate::families::bags::testing::assert_well_formed;
    use crate::families::bags::touched_rows;
    use crate::selftest::self_test;
    use crate::spec::Role;

    fn set(seed: u64) -> InputSet {
        let p = EmbeddingBackwardRowwiseAdagrad;
        p.generate(Preset::Ci, &p.sizes(Preset::Ci), seed.into()).unwrap()
    }

    /// The oracle's outputs rounded to f32, as a correct kernel writes them.
    fn correct(
        p: &EmbeddingBackwardRowwiseAdagrad,
        set: &InputSet,
    ) -> Vec<(TensorSpec, HostTensor)> {
        let oracle = p.oracle(set).unwrap();
        p.tensors()
            .into_iter()
            .filter(|t| t.role == Role::InOut)
            .map(|t| {
                let shape = crate::spec::shape_of(&t, &set.sizes).unwrap();
                let out = encode(&dense(&oracle[t.name], set, t.name), t.dtype, shape).unwrap();
                (t, out)
            })
            .collect()
    }

    /// The oracle's whole value of in-place tensor `name` (small sizes only).
    fn dense(o: &OracleOutput, set: &InputSet, name: &str) -> OracleOutput {
        o.densified(Some(set.tensors.get(name).unwrap())).unwrap()
    }

    /// The runner's check of in-place tensor `spec`: `Some(reason)` when it fails.
    fn check(p: &EmbeddingBackwardRowwiseAdagrad, spec: &TensorSpec, out: &HostTensor, set: &InputSet) -> Option<String> {
        let oracle = p.oracle(set).unwrap();
        let ctx = CheckContext {
            encoded: None,
            initial: Some(set.tensors.get(spec.name).unwrap()),
        };
        let rep = check_output_with(out, &oracle[spec.name], &p.tolerance(spec), ctx);
        (!rep.passed).then_some(rep.reason)
    }

    #[test]
    fn self_test_rejects_degenerate_outputs() {
        self_test(&EmbeddingBackwardRowwiseAdagrad, Preset::Ci).unwrap();
    }

    #[test]
    fn oracle_matches_a_direct_step_on_one_row() {
        let p = EmbeddingBackwardRowwiseAdagrad;
        let s = set(3);
        let Bags {
            indices: idx,
            offsets: off,
        } = Bags::of(&s).unwrap();
        let grad = s.f32s("grad_output").unwrap();
        let (w0, m0) = (s.f32s("weight").unwrap(), s.f32s("momentum").unwrap());
        // The most looked-up row: its gradient sums several bags (and repeats within a bag).
        let mut counts = std::collections::HashMap::new();
        for &i in &idx {
            *counts.entry(i).or_insert(0) += 1;
        }
        let (&row, &k) = counts.iter().max_by_key(|(_, &c)| c).unwrap();
        assert!(k > 3, "a hot row is looked up several times");
        let d = 40;
        let mut g = vec![0.0f64; d];
        for bag in 0..64 {
            for j in off[bag]..off[bag + 1] {
                if idx[j as usize] == row {
                    for c in 0..d {
                        g[c] += grad[bag * d + c] as f64;
                    }
                }
            }
        }
        let m = m0[row as usize] as f64 + g.iter().map(|x| x * x).sum::<f64>() / d as f64;
        let oracle = p.oracle(&s).unwrap();
        let OracleOutput::Float(w) = dense(&oracle["weight"], &s, "weight") else {
            panic!()
        };
        let OracleOutput::Float(mo) = dense(&oracle["momentum"], &s, "momentum") else {
            panic!()
        };
        let OracleOutput::Rows(rows) = &oracle["weight"] else {
            panic!("the oracle lists the rows that change")
        };
        assert!(rows.rows.contains(&row) && rows.rows.windows(2).all(|w| w[0] < w[1]));
        assert!((mo[row as usize] - m).abs() < 1e-12);
        let lr = 0.01f32 as f64;
        let eps = 1e-8f32 as f64;
        for c in 0..d {
            let want = w0[row as usize * d + c] as f64 - lr * g[c] / (m.sqrt() + eps);
            assert!((w[row as usize * d + c] - want).abs() < 1e-12);
        }
        // An untouched row keeps its value.
        let untouched = (0..4096)
            .find(|r| !counts.contains_key(&(*r as i64)))
            .unwrap();
        assert_eq!(mo[untouched], m0[untouched] as f64);
        assert_eq!(w[untouched * d], w0[untouched * d] as f64);
    }

    #[test]
    fn the_row_check_passes_the_correct_update() {
        let p = EmbeddingBackwardRowwiseAdagrad;
        for seed in [1, 2] {
            let s = set(seed);
            for (spec, out) in correct(&p, &s) {
                assert_eq!(check(&p, &spec, &out, &s), None, "{}", spec.name);
            }
        }
    }

    #[test]
    fn a_changed_untouched_row_fails_even_by_one_ulp() {
        let p = EmbeddingBackwardRowwiseAdagrad;
        let s = set(4);
        let touched = touched_rows(&s.i64s("indices").unwrap(), 4096);
        let r = (0..4096).rev().find(|&r| !touched[r]).unwrap();
        for (spec, mut out) in correct(&p, &s) {
            let width = if spec.name == "weight" { 40 } else { 1 };
            let at = (r * width + width - 1) * 4;
            let bits = u32::from_le_bytes(out.bytes[at..at + 4].try_into().unwrap()) + 1;
            out.bytes[at..at + 4].copy_from_slice(&bits.to_le_bytes());
            // The whole-tensor tolerance cannot see one ulp; the row check must.
            let oracle = dense(&p.oracle(&s).unwrap()[spec.name], &s, spec.name);
            assert!(check_output(&out, &oracle, &p.tolerance(&spec)).passed);
            let why = check(&p, &spec, &out, &s).expect("must fail");
            assert!(why.contains("bit-identical"), "{why}");
        }
    }

    #[test]
    fn momentum_reordered_like_fp32_atomics_passes_but_one_in_a_thousand_off_fails() {
        let p = EmbeddingBackwardRowwiseAdagrad;
        let s = set(6);
        let oracle = p.oracle(&s).unwrap();
        let spec = p.tensors().into_iter().find(|t| t.name == "momentum").unwrap();
        let whole = dense(&oracle["momentum"], &s, "momentum");
        let OracleOutput::Float(want) = &whole else {
            panic!()
        };
        let initial = s.tensors.get("momentum").unwrap().to_f64_vec();
        let shape = crate::spec::shape_of(&spec, &s.sizes).unwrap();
        // Every looked-up row's increment off by ±5e-5 relative, alternating: the size of
        // error an fp32 sum of a hot row's gradients in another order gives, with margin (above the fp32
        // dtype bound of 1e-5 on the values, where the increment dominates).
        let scaled = |factor: f64| {
            let v = want
                .iter()
                .zip(&initial)
                .enumerate()
                .map(|(k, (w, i))| {
                    let sign = if k % 2 == 0 { 1.0 } else { -1.0 };
                    (i + (w - i) * (1.0 + sign * factor)) as f32
                })
                .collect();
            HostTensor::from_f32(shape.clone(), v).unwrap()
        };
        assert_eq!(check(&p, &spec, &scaled(5e-5), &s), None);
        let why = check(&p, &spec, &scaled(1e-3), &s).expect("0.1% off must fail");
        assert!(why.contains("update"), "{why}");
    }

    #[test]
    fn an_update_slightly_off_fails_the_update_check() {
        let p = EmbeddingBackwardRowwiseAdagrad;
        let s = set(5);
        let oracle = p.oracle(&s).unwrap();
        for spec in p.tensors().into_iter().filter(|t| t.role == Role::InOut) {
            let whole = dense(&oracle[spec.name], &s, spec.name);
            let OracleOutput::Float(want) = &whole else {
                panic!()
            };
            let initial = s.tensors.get(spec.name).unwrap().to_f64_vec();
            // Every update 0.1% too large: within the whole-tensor bound for the weight (its
            // untouched rows dominate), not within the update bound.
            let off: Vec<f32> = want
                .iter()
                .zip(&initial)
                .map(|(w, i)| (i + (w - i) * 1.001) as f32)
                .collect();
            let shape = crate::spec::shape_of(&spec, &s.sizes).unwrap();
            let out = HostTensor::from_f32(shape, off).unwrap();
            if spec.name == "weight" {
                assert!(check_output(&out, &whole, &p.tolerance(&spec)).passed);
            }
            let why = check(&p, &spec, &out, &s).expect("must fail");
            assert!(why.contains("update"), "{why}");
            // And no update at all fails too.
            let stale = s.tensors.get(spec.name).unwrap().clone();
            assert!(check(&p, &spec, &stale, &s).is_some());
            // A looked-up row left with a NaN fails (the weight had none before).
            let mut nan = encode(&whole, spec.dtype, out.shape.clone()).unwrap();
            let OracleOutput::Rows(rows) = &oracle[spec.name] else {
                panic!()
            };
            let at = rows.rows[0] as usize * rows.width * 4;
            nan.bytes[at..at + 4].copy_from_slice(&f32::NAN.to_le_bytes());
            let why = check(&p, &spec, &nan, &s).expect("must fail");
            assert!(why.contains("NaN or infinite"), "{why}");
        }
    }

    #[test]
    fn inputs_carry_the_scalars_and_the_initial_state() {
        let p = EmbeddingBackwardRowwiseAdagrad;
        let s = set(6);
        assert_eq!(s.scalars["lr"], 0.01);
        assert_eq!(s.scalars["eps"], 1e-8);
        assert_eq!(s.tensors.get("weight").unwrap().shape, vec![4096, 40]);
        assert_eq!(s.tensors.get("momentum").unwrap().shape, vec![4096]);
        let m = s.f32s("momentum").unwrap();
        assert!(m.iter().all(|&x| (0.0..1.0).contains(&x)));
        assert_well_formed(&s, 64);
        let edge = &p.edge_sizes(Preset::Full)[0];
        assert_eq!((edge["B"], edge["E"]), (1, 1 << 16));
        let w = p.work(&s);
        assert!(w.compulsory_bytes < w.logical_bytes);
    }
}
