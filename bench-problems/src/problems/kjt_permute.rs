//! Problem 7, `kjt_permute`: reorder the features of a keyed jagged tensor (TorchRec's
//! `KeyedJaggedTensor.permute`, FBGEMM's `permute_2D_sparse_data`).
//!
//! A KJT of T features × B samples: `lengths` [T, B] int32 (ids per feature and sample), and
//! `values` (int64 ids) with `weights` (fp32), stored feature by feature, sample by sample.
//! Given `permute` [P] (feature numbers; repeats allowed, features may be left out), the result
//! is the KJT of features `permute[0], permute[1], …`: `permuted_lengths[p, b] =
//! lengths[permute[p], b]`, and the values and weights of each selected feature copied in that
//! order. Its value count NP depends on the data: it is a size symbol of each input set (as
//! TorchRec knows it on the host from the lengths per key). Everything is checked exactly.
//!
//! Inputs: T features of a fixed model (table sizes from 10^3 to 4·10^7 rows, mean lengths from
//! 1 to 64 with mean 16, see `sparse::kjt`), heavy-tailed lengths (empty bags included),
//! Zipf(1.15) ids, weights uniform in [0, 1); `permute` is a random order of the features with
//! one entry in eight replaced by a random feature (so some features repeat and some are
//! dropped), repeated cyclically when P > T. B is a multiple of 4 (rows of `lengths` are whole
//! 16-byte vectors). Edge sets: one feature (taken twice), four samples.
//!
//! The reference is the eager `Model` (`kernelbench/07_kjt_permute.py`) launch for launch; see
//! `gpu_kernels::kernels::kjt_permute`.
//!
//! H200 `full` (profile 20261201T233623Z, NP ≈ 115M): the reference was 3.246 ms against
//! eager's 4.643 (0.70), the gap in four NP-sized launches whose ATen shape the plan now ports:
//! `arange` (RangeFactories' `elementwise_kernel_with_index`, 64 threads, one element each:
//! eager 1083 µs, the former 128 × 4 port 197), the two `values[src]` / `weights[src]` gathers
//! (`index_elementwise_kernel<128, 4>`, each element's index load, bounds check, gather and
//! store in turn: eager 855 and 718 µs, the former loads-first ports 636 and 448) and
//! `repeat_interleave`'s `index_select` (`_scatter_gather_elementwise_kernel<128, 8>`, grid
//! NP/1024: eager 449 µs, the former 128 × 4 port 362). If the ports take eager's times the
//! reference goes to ≈ 3.25 + 0.89 + 0.22 + 0.27 + 0.09 ≈ 4.7 ms, ≈ 1.01 of eager.
use crate::problem::problem_identity;
use crate::check::Tolerance;
use crate::families::sparse::{
    arange_with_index,
    elementwise, empty_share, gather_rows16, kjt_inputs, kjt_max_rows, kjt_weights_recipe,
    repeat_interleave, scratch_of, sizes_in, split_by, with_sizes, CumsumI32, KjtInputs, KJT_ALPHA,
};
use crate::launch::{LaunchSpec, ScratchSpec};
use crate::spec::Seeds;
use crate::spec::{
    oracle_of, sizes_of, InputSet, Oracle, OracleOutput, Preset, Problem, ProblemError, Sizes,
    TensorSpec, Work,
};
use data_gen::{seed::derive, seed::derive_str, DType, RowPermutation};
use rayon::prelude::*;
use serde_json::json;
use std::collections::BTreeSet;

/// The problem.
pub struct KjtPermute;

const NAME: &str = "kjt_permute";

/// `p` feature numbers: a random order of the `t` features (cycled when `p > t`), one entry in
/// eight replaced by a random feature.
pub fn permutation(t: usize, p: usize, seed: u64) -> Result<Vec<i64>, ProblemError> {
    let order = RowPermutation::new(t as u64, derive_str(seed, "permute-order"))?;
    Ok((0..p)
        .map(|k| {
            let h = derive(derive_str(seed, "permute-repeat"), k as u64);
            if h.is_multiple_of(8) {
                ((h >> 8) % t as u64) as i64
            } else {
                order.map((k % t) as u64) as i64
            }
        })
        .collect())
}

/// Where each feature's values start, and how many it has.
pub fn feature_segments<L: Copy + Into<i64>>(
    lengths: &[L],
    t: usize,
    b: usize,
) -> Vec<(usize, usize)> {
    let mut start = 0usize;
    (0..t)
        .map(|f| {
            let count: usize = lengths[f * b..(f + 1) * b]
                .iter()
                .map(|&l| l.into() as usize)
                .sum();
            let seg = (start, count);
            start += count;
            seg
        })
        .collect()
}

/// The cumsums of the plan: over the lengths, the permuted lengths, and the repeats of
/// `repeat_interleave`.
const IN_CUMSUM: CumsumI32 = CumsumI32 {
    wide: "lengths64",
    cum: "in_cum",
    status: "status_in",
};
const OUT_CUMSUM: CumsumI32 = CumsumI32 {
    wide: "plengths64",
    cum: "out_cum",
    status: "status_out",
};
const REPEATS_CUMSUM: CumsumI32 = CumsumI32 {
    wide: "repeats64",
    cum: "repeats_cum",
    status: "status_rep",
};

/// `starts = cumsum(lengths) - lengths` over `n` int32 lengths.
fn starts_plan(c: &CumsumI32, lengths: &str, starts: &str, n: &str) -> Vec<LaunchSpec> {
    let mut plan = c.plan(lengths, n);
    plan.push(elementwise(
        "aten_sub_i64_i32",
        n,
        &[starts, c.cum, lengths, n],
    ));
    plan
}

/// The scratch of [`starts_plan`]: the cumsum's, with `starts` before the tile state.
fn starts_scratch(c: &CumsumI32, starts: &str, n: &str) -> [ScratchSpec; 4] {
    let [wide, cum, status] = c.scratch(n);
    let starts = ScratchSpec::new(starts, format!("{n} * 8").as_str());
    [wide, cum, starts, status]
}

impl Problem for KjtPermute {
    problem_identity!(
        7,
        NAME,
        "keyed jagged tensor feature permute (lengths [T,B] int32, int64 values, fp32 weights; repeats allowed)"
    );

    fn tensors(&self) -> Vec<TensorSpec> {
        vec![
            TensorSpec::input("permute", DType::I64, &["P"]),
            TensorSpec::input("lengths", DType::I32, &["T", "B"]),
            TensorSpec::input("values", DType::I64, &["N"]),
            TensorSpec::input("weights", DType::F32, &["N"]),
            TensorSpec::output("permuted_lengths", DType::I32, &["P", "B"]),
            TensorSpec::output("permuted_values", DType::I64, &["NP"]),
            TensorSpec::output("permuted_weights", DType::F32, &["NP"]),
        ]
    }

    fn sizes(&self, preset: Preset) -> Sizes {
        // B a multiple of 4: rows of `lengths` are 16-byte multiples (ATen's vectorized
        // index_select applies).
        let (t, b, p): (i64, i64, i64) = match preset {
            Preset::Ci => (5, 12, 7),
            Preset::Small => (128, 2048, 128),
            Preset::Full => (856, 8192, 856),
        };
        // NP (the permuted value count) is per input set; the value here is only the expected
        // one (mean length 16), each set replaces it with its exact count.
        sizes_of(&[("T", t), ("B", b), ("P", p), ("NP", p * b * 16)])
    }

    fn shapes(&self, preset: Preset) -> Vec<crate::shapes::Shape> {
        let base = self.sizes(preset);
        let with = |t: i64, b: i64| [("T", t), ("B", b), ("P", t), ("NP", t * b * 16)];
        match preset {
            Preset::Ci => {
                let np = base["P"] * 4 * 16;
                crate::shapes::shapes_of(base, &[("b4", &[("B", 4), ("NP", np)], "four samples")])
            }
            _ => {
                let b = base["B"];
                crate::shapes::shapes_of(
                    base.clone(),
                    &[
                        ("b-quarter", &with(base["T"], b / 4), "a quarter of the batch"),
                        ("t26", &with(26, b), "Criteo's 26 features"),
                        ("criteo-b65536", &with(26, 65536), "Criteo's 26 features, B = 65536"),
                    ],
                )
            }
        }
    }

    fn recipe(&self, preset: Preset) -> serde_json::Value {
        json!({
            "features": "sparse::kjt_feature_config: table rows log-uniform in [1e3, 4e7), mean lengths log-uniform in [1, 64) rescaled to mean 16",
            "lengths": {"kind": "log_normal", "sigma": 1.0, "mean": "per feature", "max": "8x the feature mean"},
            "values": {"distribution": "bounded_zipf", "alpha": KJT_ALPHA, "scatter_hot_rows": true},
            "weights": kjt_weights_recipe(),
            "permute": "random order of the features, 1 entry in 8 replaced by a random feature (repeats and drops)",
            "max_rows": kjt_max_rows(preset),
            "edge_cases": ["one feature, taken twice", "four samples (B = 4)"],
        })
    }

    fn generate(&self, preset: Preset, sizes: &Sizes, seeds: Seeds) -> Result<InputSet, ProblemError> {
        let seed = seeds.set;
        let [t, b, p] = sizes_in(sizes, NAME, ["T", "B", "P"])?;
        if t < 1 || b < 4 || p < 1 || b % 4 != 0 {
            return Err(ProblemError::invalid(
                NAME,
                format!("need T, P >= 1 and B a positive multiple of 4, got T={t} B={b} P={p}"),
            ));
        }
        let (t, b, p) = (t as usize, b as usize, p as usize);
        let KjtInputs { set, lengths, .. } =
            kjt_inputs(preset, sizes, seed, (t, b), "values", None)?;
        let permute = permutation(t, p, seed)?;
        let segments = feature_segments(&lengths, t, b);
        let np: usize = permute.iter().map(|&f| segments[f as usize].1).sum();
        Ok(set.size("NP", np).i64("permute", &[p], permute)?.build())
    }

    fn edge_sizes(&self, preset: Preset) -> Vec<Sizes> {
        let base = self.sizes(preset);
        vec![
            with_sizes(&base, &[("T", 1), ("P", 2)]),
            with_sizes(&base, &[("B", 4)]),
        ]
    }

    fn oracle(&self, inputs: &InputSet) -> Result<Oracle, ProblemError> {
        let [t, b] = sizes_in(&inputs.sizes, NAME, ["T", "B"])?.map(|v| v as usize);
        let permute = inputs.i64s("permute")?;
        let lengths = inputs.i64s("lengths")?;
        let segments = feature_segments(&lengths, t, b);
        // The values and weights (N of each, ~112M at `full`) are copied straight from their
        // bytes into the outputs, one permuted feature per task.
        let values = inputs.tensors.get("values")?;
        let weights = inputs.tensors.get("weights")?;
        let n = segments.last().map_or(0, |&(start, count)| start + count);
        if (values.dtype, weights.dtype) != (DType::I64, DType::F32)
            || values.bytes.len() < n * 8
            || weights.bytes.len() < n * 4
        {
            return Err(ProblemError::invalid(
                NAME,
                format!("`values` (int64) and `weights` (fp32) must hold the {n} ids the lengths sum to"),
            ));
        }
        let selected: Vec<(usize, usize)> = permute.iter().map(|&f| segments[f as usize]).collect();
        let np: usize = selected.iter().map(|&(_, count)| count).sum();
        let mut out_lengths = vec![0i64; permute.len() * b];
        let mut out_values = vec![0i64; np];
        let mut out_weights = vec![0f64; np];
        let counts: Vec<usize> = selected.iter().map(|&(_, count)| count).collect();
        out_lengths
            .par_chunks_mut(b.max(1))
            .zip(permute.par_iter())
            .for_each(|(out, &f)| out.copy_from_slice(&lengths[f as usize * b..(f as usize + 1) * b]));
        split_by(&mut out_values, &counts)
            .into_par_iter()
            .zip(split_by(&mut out_weights, &counts))
            .zip(&selected)
            .for_each(|((vals, wts), &(start, count))| {
                let v = &values.bytes[start * 8..(start + count) * 8];
                for (val, bytes) in vals.iter_mut().zip(v.chunks_exact(8)) {
                    *val = i64::from_le_bytes(bytes.try_into().expect("8 bytes"));
                }
                let w = &weights.bytes[start * 4..(start + count) * 4];
                for (wt, bytes) in wts.iter_mut().zip(w.chunks_exact(4)) {
                    *wt = f64::from(f32::from_le_bytes(bytes.try_into().expect("4 bytes")));
                }
            });
        Ok(oracle_of([
            ("permuted_lengths", OracleOutput::Int(out_lengths)),
            ("permuted_values", OracleOutput::Int(out_values)),
            ("permuted_weights", OracleOutput::Float(out_weights)),
        ]))
    }

    fn tolerance(&self, _output: &TensorSpec) -> Tolerance {
        // Lengths and values are integers; weights are copied, not computed: bit-exact.
        Tolerance::EXACT
    }

    fn work(&self, inputs: &InputSet) -> Work {
        let [t, b, p] = ["T", "B", "P"].map(|k| inputs.count(k));
        let np = inputs.count("NP") as f64;
        let (Ok(permute), Ok(lengths)) = (inputs.i64s("permute"), inputs.i64s("lengths")) else {
            return Work::default();
        };
        let segments = feature_segments(&lengths, t, b);
        let distinct: BTreeSet<i64> = permute.iter().copied().collect();
        let read_once: usize = distinct.iter().map(|&f| segments[f as usize].1).sum();
        // permute, lengths in, permuted lengths out, and 12 bytes (id + weight) per value.
        let fixed = (p * 8 + t * b * 4 + p * b * 4) as f64 + np * 12.0;
        Work {
            compulsory_bytes: fixed + read_once as f64 * 12.0,
            logical_bytes: fixed + np * 12.0,
            flops: 0.0,
            gathered: None,
        }
    }

    fn input_stats(&self, inputs: &InputSet) -> serde_json::Value {
        let (Ok(permute), Ok(lengths)) = (inputs.i64s("permute"), inputs.i64s("lengths")) else {
            return serde_json::Value::Null;
        };
        let t = inputs.count("T") as i64;
        let distinct: BTreeSet<i64> = permute.iter().copied().collect();
        json!({
            "N": inputs.sizes.get("N"),
            "NP": inputs.sizes.get("NP"),
            "mean_length": lengths.iter().sum::<i64>() as f64 / lengths.len().max(1) as f64,
            "empty_bags": empty_share(&lengths),
            "features_dropped": t - distinct.len() as i64,
            "entries_repeating_a_feature": permute.len() - distinct.len(),
        })
    }

    fn reference(&self) -> Vec<LaunchSpec> {
        let gather = |out: &str, input: &str, row: &str| {
            gather_rows16("P", row, &[out, input, "permute", row, row, row])
        };
        let mut plan = vec![gather("permuted_lengths", "lengths", "B * 4")];
        // in_starts = cumsum(lengths) - lengths (cumsum of int32: a copy to int64, then CUB).
        plan.extend(starts_plan(&IN_CUMSUM, "lengths", "in_starts", "T * B"));
        // out_starts, the same over the permuted lengths.
        plan.extend(starts_plan(
            &OUT_CUMSUM,
            "permuted_lengths",
            "out_starts",
            "P * B",
        ));
        // shift = in_starts.view(T, B).index_select(0, permute).view(-1) - out_starts
        plan.push(gather("sel_starts", "in_starts", "B * 8"));
        plan.push(elementwise(
            "aten_sub_i64",
            "P * B",
            &["shift", "sel_starts", "out_starts", "P * B"],
        ));
        // repeat_interleave(shift, permuted_lengths, output_size=NP): repeats.cumsum(0), the
        // segment of every output, then shift.index_select(0, segments).
        plan.extend(REPEATS_CUMSUM.plan("permuted_lengths", "P * B"));
        plan.push(repeat_interleave(
            "permuted_lengths",
            REPEATS_CUMSUM.cum,
            "segment",
            "P * B",
            "NP",
        ));
        plan.extend([
            // shift.index_select(0, segment): ATen's elementwise gather, 8 per thread.
            LaunchSpec::linear(
                "aten_gather_elementwise_i64_by_i32",
                "max(ceil_div(NP, 1024), 1)",
                128,
                &["src", "shift", "segment", "NP", "P * B"],
            ),
            // src += arange(NP): RangeFactories' 64-thread, one-per-thread kernel, then the add.
            arange_with_index("positions", "NP"),
            elementwise("aten_add_i64", "NP", &["src", "src", "positions", "NP"]),
        ]);
        // values[src], weights[src]: gpu_index_kernel's index_elementwise_kernel<128, 4>.
        let index = |kernel: &str, out: &str, input: &str| {
            elementwise(kernel, "NP", &[out, input, "src", "NP", "N"])
        };
        plan.extend([
            index("aten_index_elementwise_i64", "permuted_values", "values"),
            index("aten_index_elementwise_f32", "permuted_weights", "weights"),
        ]);
        plan
    }

    fn reference_scratch(&self) -> Vec<ScratchSpec> {
        let mut s = Vec::new();
        s.extend(starts_scratch(&IN_CUMSUM, "in_starts", "T * B"));
        s.extend(starts_scratch(&OUT_CUMSUM, "out_starts", "P * B"));
        s.extend(scratch_of(&[
            ("sel_starts", "P * B * 8"),
            ("shift", "P * B * 8"),
        ]));
        s.extend(REPEATS_CUMSUM.scratch("P * B"));
        s.extend(scratch_of(&[
            ("segment", "max(NP, 1) * 4"),
            ("src", "max(NP, 1) * 8"),
            ("positions", "max(NP, 1) * 8"),
        ]));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{ci_and_edge_sets, ci_set};
    crate::selftest::self_test_case!(KjtPermute);

    #[test]
    fn permute_repeats_and_drops_features() {
        let p = permutation(856, 856, 4).unwrap();
        assert!(p.iter().all(|&f| (0..856).contains(&f)));
        let distinct: BTreeSet<i64> = p.iter().copied().collect();
        assert!(
            distinct.len() < 856 && distinct.len() > 700,
            "{} distinct",
            distinct.len()
        );
        let short = permutation(5, 7, 1).unwrap();
        assert_eq!(short.len(), 7);
        assert_eq!(permutation(5, 7, 1).unwrap(), short, "deterministic");
    }

    #[test]
    fn inputs_are_consistent_and_sizes_count_the_values() {
        let p = KjtPermute;
        for (_, set) in ci_and_edge_sets(&p, 8) {
            let lengths = set.i64s("lengths").unwrap();
            let n: i64 = lengths.iter().sum();
            assert_eq!(set.sizes["N"], n);
            assert_eq!(set.tensors.get("values").unwrap().numel() as i64, n);
            assert_eq!(set.tensors.get("weights").unwrap().numel() as i64, n);
            let out = p.oracle(&set).unwrap();
            assert_eq!(out["permuted_values"].len() as i64, set.sizes["NP"]);
            assert!(set.sizes["NP"] >= 1);
        }
    }

    #[test]
    fn oracle_copies_whole_features_in_permuted_order() {
        let p = KjtPermute;
        let set = ci_set(&p, 2);
        let permute = set.i64s("permute").unwrap();
        let lengths = set.i64s("lengths").unwrap();
        let values = set.i64s("values").unwrap();
        let out = p.oracle(&set).unwrap();
        let OracleOutput::Int(pl) = &out["permuted_lengths"] else {
            panic!()
        };
        let OracleOutput::Int(pv) = &out["permuted_values"] else {
            panic!()
        };
        // Entry k of the result is feature permute[k], sample by sample.
        let b = 12usize;
        let feature_start = |f: usize| lengths[..f * b].iter().sum::<i64>() as usize;
        let mut pos = 0usize;
        for (k, &f) in permute.iter().enumerate() {
            let f = f as usize;
            assert_eq!(&pl[k * b..(k + 1) * b], &lengths[f * b..(f + 1) * b]);
            let count: usize = lengths[f * b..(f + 1) * b].iter().sum::<i64>() as usize;
            assert_eq!(
                &pv[pos..pos + count],
                &values[feature_start(f)..feature_start(f) + count]
            );
            pos += count;
        }
        assert_eq!(pos, pv.len());
    }
}
