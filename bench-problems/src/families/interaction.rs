//! What the feature-interaction problems 10–12 share: the dense and sparse feature tensors and
//! the pair width of DLRM's interaction output, size sets, inputs drawn uniform one stream per
//! tensor, the pair order of the lower triangle, and the eager kernels' launch shapes (cat,
//! batched GEMM, lower-triangle gather and scatter, elementwise).
use crate::error::ProblemError;
use crate::families::rows::Rows;
use crate::input_set::{InputSet, InputSetBuilder};
use crate::launch::{LaunchSpec, ScratchSpec};
use crate::signature::TensorSpec;
use crate::sizes::{counts_in, sizes_of, Preset, Sizes};
use data_gen::{seed::derive_str, uniform_f32, DType};
use serde_json::json;

/// Dense features x [B, D] (the bottom MLP's output).
pub const X: TensorSpec = TensorSpec::input("x", DType::F32, &["B", "D"]);
/// Sparse embeddings emb [B, F, D].
pub const EMB: TensorSpec = TensorSpec::input("emb", DType::F32, &["B", "F", "D"]);
/// The columns of DLRM's interaction output: x's D, then the P = F(F+1)/2 pairs.
pub const OUT_WIDTH: &str = "D + F * (F + 1) / 2";

/// The signature of a dot interaction (problems 10 and 11): [`X`], [`EMB`], then `rest`.
pub fn dot_signature<const K: usize>(rest: [TensorSpec; K]) -> Vec<TensorSpec> {
    [X, EMB].into_iter().chain(rest).collect()
}

/// (B, F, D) of a size set.
pub fn bfd(problem: &str, sizes: &Sizes) -> Result<[usize; 3], ProblemError> {
    counts_in(sizes, problem, ["B", "F", "D"])
}

/// Float tensor `name` of an input set as `samples` rows of `width` values (one sample's
/// worth each), decoded from its bytes as each sample needs them: the oracles convert no whole
/// tensor, and their samples run in parallel.
pub fn sample_rows<'a>(
    problem: &str,
    inputs: &'a InputSet,
    name: &str,
    samples: usize,
    width: usize,
) -> Result<Rows<'a>, ProblemError> {
    Rows::flat(problem, name, inputs.tensors.get(name)?, samples, width)
}

/// x and emb of a dot interaction's input set (problems 10 and 11), decoded one sample at a
/// time ([`sample_rows`]), with its (B, F, D).
pub struct DotRows<'a> {
    /// (B, F, D).
    pub dims: [usize; 3],
    x: Rows<'a>,
    emb: Rows<'a>,
}

impl<'a> DotRows<'a> {
    /// x and emb of `inputs`; an error (naming `problem`) when a size or tensor is missing.
    pub fn of(problem: &str, inputs: &'a InputSet) -> Result<Self, ProblemError> {
        let [b, f, d] = bfd(problem, &inputs.sizes)?;
        Ok(DotRows {
            dims: [b, f, d],
            x: sample_rows(problem, inputs, "x", b, d)?,
            emb: sample_rows(problem, inputs, "emb", b, f * d)?,
        })
    }

    /// Writes sample `s`'s T = [x; emb] [(F+1)·D] into `t`, in f64.
    pub fn t_into(&self, s: usize, t: &mut [f64]) {
        let d = self.dims[2];
        self.x.f64_into(s, &mut t[..d]);
        self.emb.f64_into(s, &mut t[d..]);
    }
}

/// Float tensors `names` of an input set in f64.
pub fn f64_tensors<const K: usize>(
    inputs: &InputSet,
    names: [&str; K],
) -> Result<[Vec<f64>; K], ProblemError> {
    let mut out = names.map(|_| Vec::new());
    for (v, name) in out.iter_mut().zip(names) {
        *v = inputs.tensors.get(name)?.to_f64_vec();
    }
    Ok(out)
}

/// Sizes of a dot interaction (problems 10 and 11).
pub fn dot_sizes(preset: Preset) -> Sizes {
    let (b, f, d): (i64, i64, i64) = match preset {
        // B = 19 and F + 1 = 7 fill no GEMM tile or gather block evenly; D = 36 gives the
        // GEMM a partial second k-stage; D + P = 57 makes the output rows unaligned as at full.
        Preset::Ci => (19, 6, 36),
        Preset::Small => (8192, 26, 128),
        // DLRM (Criteo Kaggle / Terabyte): 26 sparse features, D = 128 on MLPerf's DLRMv2.
        Preset::Full => (65536, 26, 128),
    };
    sizes_of(&[("B", b), ("F", f), ("D", d)])
}

/// The timed shapes of the dot interactions (problems 10 and 11): the default, D = 64, F = 8
/// (a small model) and a quarter of the batch; at `ci` the default and D = 12.
pub fn dot_shapes(preset: Preset) -> Vec<crate::shapes::Shape> {
    let base = dot_sizes(preset);
    let b = base["B"];
    let shapes: &[crate::shapes::Variation] = match preset {
        Preset::Ci => &[("d12", &[("D", 12)], "D = 12")],
        _ => &[
            ("d64", &[("D", 64)], "D = 64 (Criteo Terabyte's)"),
            ("f8", &[("F", 8)], "8 sparse features"),
            ("b-quarter", &[("B", b / 4)], "a quarter of the batch"),
        ],
    };
    crate::shapes::shapes_of(base, shapes)
}

/// Uneven shapes checked once: F + 1 = 34 > 32 (two GEMM tiles per side, the second partial;
/// 561 pairs over 18 gather blocks), and F = 1 (a single pair, k < one stage).
pub fn dot_edge_sizes() -> Vec<Sizes> {
    [(3, 33, 20), (5, 1, 8)]
        .into_iter()
        .map(|(b, f, d)| sizes_of(&[("B", b), ("F", f), ("D", d)]))
        .collect()
}

/// Adds fp32 tensor `name` of `shape`, uniform in [`low`, `high`), drawn from the stream of
/// `seed` named after the tensor.
pub fn uniform(
    set: InputSetBuilder,
    seed: u64,
    name: &str,
    shape: &[usize],
    (low, high): (f32, f32),
) -> Result<InputSetBuilder, ProblemError> {
    let values = uniform_f32(shape.iter().product(), derive_str(seed, name), low, high);
    set.f32(name, shape, values)
}

/// x uniform in [0, 1) (a ReLU bottom MLP's output is non-negative) and emb uniform in [-1, 1):
/// problem 11 draws the same ones as problem 10 from the same seed.
pub fn dot_inputs(
    set: InputSetBuilder,
    seed: u64,
    [b, f, d]: [usize; 3],
) -> Result<InputSetBuilder, ProblemError> {
    let set = uniform(set, seed, "x", &[b, d], (0.0, 1.0))?;
    uniform(set, seed, "emb", &[b, f, d], (-1.0, 1.0))
}

/// The recipe of x and emb (problem 10's draw; `x_note` says what x is) and the precision.
pub fn dot_recipe(x_note: &str) -> serde_json::Value {
    json!({
        "x": {"distribution": "uniform", "low": 0.0, "high": 1.0, "note": x_note},
        "emb": {"distribution": "uniform", "low": -1.0, "high": 1.0},
        "precision": "fp32 products and accumulation (no TF32)",
    })
}

/// DLRM's pairs (i, j), i > j, of the strictly lower triangle of the (F+1)×(F+1) interaction
/// matrix for `features` = F sparse features, in output order: pair p = i(i−1)/2 + j.
pub fn pairs(features: usize) -> Vec<(usize, usize)> {
    (1..=features)
        .flat_map(|i| (0..i).map(move |j| (i, j)))
        .collect()
}

/// Row `i` of sample `s`'s T = [x; emb] [F+1, D] (row 0 is x).
pub fn t_row<'a, T>(
    x: &'a [T],
    emb: &'a [T],
    (f, d): (usize, usize),
    s: usize,
    i: usize,
) -> &'a [T] {
    if i == 0 {
        &x[s * d..(s + 1) * d]
    } else {
        &emb[(s * f + i - 1) * d..(s * f + i) * d]
    }
}

/// An eager elementwise launch over `n` elements (block 128, 4 per thread).
pub fn elementwise(kernel: &str, n: &str, args: &[&str]) -> LaunchSpec {
    LaunchSpec::linear(kernel, format!("ceil_div({n}, 512)").as_str(), 128, args)
}

/// `torch.cat` along dim 1 of `a` [B, D] and `b` [B, `b_cols`] (flattened per sample) into
/// `out`: PyTorch's CatArrayBatchedCopy launch shape, its grid sized by `grid_elements`.
pub fn cat(a: &str, b: &str, out: &str, grid_elements: &str, b_cols: &str) -> LaunchSpec {
    LaunchSpec::new(
        "dot_interaction_cat_reference",
        [
            format!("min(4224, ceil_div({grid_elements}, 512))")
                .as_str()
                .into(),
            2.into(),
            1.into(),
        ],
        [128.into(), 1.into(), 1.into()],
        &[a, b, out, "B", "D", b_cols],
    )
}

/// T = torch.cat([x.unsqueeze(1), emb], dim=1) into the scratch `cat_t`.
pub fn cat_t() -> LaunchSpec {
    cat("x", "emb", "cat_t", "B * F * D", "F * D")
}

/// The scratch of [`cat_t`].
pub fn cat_t_scratch() -> ScratchSpec {
    ScratchSpec::new("cat_t", "B * (F + 1) * D * 4")
}

/// A batched GEMM over the B samples with an (F+1) × `cols` output per sample (cuBLAS
/// sgemmStridedBatched's role): 32 × 32 tiles, 64 threads.
pub fn bmm(kernel: &str, cols: &str, args: &[&str]) -> LaunchSpec {
    LaunchSpec::new(
        kernel,
        [
            "B".into(),
            "ceil_div(F + 1, 32)".into(),
            format!("ceil_div({cols}, 32)").as_str().into(),
        ],
        [64.into(), 1.into(), 1.into()],
        args,
    )
}

/// A gather or scatter between the P pairs and the (F+1)² matrix (index_elementwise_kernel's
/// role): 32 pairs × 32 samples a block.
pub fn tril(kernel: &str, args: &[&str]) -> LaunchSpec {
    LaunchSpec::new(
        kernel,
        [
            "ceil_div(F * (F + 1) / 2, 32)".into(),
            "ceil_div(B, 32)".into(),
            1.into(),
        ],
        [32.into(), 8.into(), 1.into()],
        args,
    )
}

#[cfg(test)]
pub(crate) mod testing {
    //! Checks the interaction problems' tests share.
    use crate::spec::{InputSet, Preset, Problem};

    /// `p`'s `ci` inputs of seed 5: each named tensor has `shape` and lies in [`low`, `high`);
    /// they are the same for the same seed and differ for another.
    pub fn assert_uniform_inputs(p: &dyn Problem, expect: &[(&str, &[usize], (f32, f32))]) {
        let sizes = p.sizes(Preset::Ci);
        let set = p.generate(Preset::Ci, &sizes, 5.into()).unwrap();
        for &(name, shape, (low, high)) in expect {
            let t = set.tensors.get(name).unwrap();
            assert_eq!(t.shape, shape, "{name}");
            assert!(
                t.to_f32_vec().iter().all(|v| (low..high).contains(v)),
                "{name} in [{low}, {high})"
            );
        }
        let again = p.generate(Preset::Ci, &sizes, 5.into()).unwrap();
        assert_eq!(again.tensors, set.tensors, "deterministic for a seed");
        let other = p.generate(Preset::Ci, &sizes, 6.into()).unwrap();
        assert_ne!(other.tensors, set.tensors);
    }

    /// `p`'s work counts for its sizes at `preset` (no tensors needed).
    pub fn work_at(p: &dyn Problem, preset: Preset) -> crate::spec::Work {
        p.work(&InputSet {
            sizes: p.sizes(preset),
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn sizes_are_counts_and_t_rows_start_with_x() {
        let s = dot_sizes(Preset::Ci);
        assert_eq!(bfd("p", &s).unwrap(), [19, 6, 36]);
        let e = bfd("p", &sizes_of(&[("B", -1), ("F", 1), ("D", 1)])).unwrap_err();
        assert!(e.to_string().contains("problem p"), "{e}");
        assert!(bfd("p", &sizes_of(&[("B", 1)])).is_err());
        let (x, emb) = ([1, 2, 3, 4], [5, 6, 7, 8, 9, 10, 11, 12]);
        assert_eq!(t_row(&x, &emb, (2, 2), 1, 0), &[3, 4]);
        assert_eq!(t_row(&x, &emb, (2, 2), 1, 2), &[11, 12]);
    }
}
