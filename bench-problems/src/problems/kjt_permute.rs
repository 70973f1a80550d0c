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
use super::sparse::{
    elementwise, gather_rows16, inclusive_scan, invalid, kjt, launch, scan_status_bytes, scratch,
    size, Kjt,
};
use crate::check::Tolerance;
use crate::launch::{LaunchSpec, ScratchSpec};
use crate::spec::{
    InputSet, OracleOutput, Preset, Problem, ProblemError, Role, Sizes, TensorSpec, Work,
};
use data_gen::{
    seed::derive, seed::derive_str, uniform_f32, DType, HostTensor, RowPermutation, TensorSet,
};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};

/// The problem.
pub struct KjtPermute;

const NAME: &str = "kjt_permute";

fn sz(sizes: &Sizes, name: &str) -> Result<i64, ProblemError> {
    size(sizes, NAME, name)
}

/// Table rows are capped at this many at `ci` (the ids' range does not matter to a permute,
/// only their values do; small tables keep the generator quick).
fn max_rows(preset: Preset) -> u64 {
    match preset {
        Preset::Ci => 5000,
        Preset::Small | Preset::Full => u64::MAX,
    }
}

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
pub fn feature_segments(lengths: &[i32], t: usize, b: usize) -> Vec<(usize, usize)> {
    let mut start = 0usize;
    (0..t)
        .map(|f| {
            let count: usize = lengths[f * b..(f + 1) * b]
                .iter()
                .map(|&l| l as usize)
                .sum();
            let seg = (start, count);
            start += count;
            seg
        })
        .collect()
}

impl Problem for KjtPermute {
    fn number(&self) -> u32 {
        7
    }

    fn name(&self) -> &'static str {
        NAME
    }

    fn summary(&self) -> &'static str {
        "keyed jagged tensor feature permute (lengths [T,B] int32, int64 values, fp32 weights; repeats allowed)"
    }

    fn tensors(&self) -> Vec<TensorSpec> {
        vec![
            TensorSpec {
                name: "permute",
                dtype: DType::I64,
                shape: &["P"],
                role: Role::Input,
            },
            TensorSpec {
                name: "lengths",
                dtype: DType::I32,
                shape: &["T", "B"],
                role: Role::Input,
            },
            TensorSpec {
                name: "values",
                dtype: DType::I64,
                shape: &["N"],
                role: Role::Input,
            },
            TensorSpec {
                name: "weights",
                dtype: DType::F32,
                shape: &["N"],
                role: Role::Input,
            },
            TensorSpec {
                name: "permuted_lengths",
                dtype: DType::I32,
                shape: &["P", "B"],
                role: Role::Output,
            },
            TensorSpec {
                name: "permuted_values",
                dtype: DType::I64,
                shape: &["NP"],
                role: Role::Output,
            },
            TensorSpec {
                name: "permuted_weights",
                dtype: DType::F32,
                shape: &["NP"],
                role: Role::Output,
            },
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
        [("T", t), ("B", b), ("P", p), ("NP", p * b * 16)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect()
    }

    fn recipe(&self, preset: Preset) -> serde_json::Value {
        json!({
            "features": "sparse::kjt_feature_config: table rows log-uniform in [1e3, 4e7), mean lengths log-uniform in [1, 64) rescaled to mean 16",
            "lengths": {"kind": "log_normal", "sigma": 1.0, "mean": "per feature", "max": "8x the feature mean"},
            "values": {"distribution": "bounded_zipf", "alpha": super::sparse::KJT_ALPHA, "scatter_hot_rows": true},
            "weights": {"distribution": "uniform", "low": 0.0, "high": 1.0},
            "permute": "random order of the features, 1 entry in 8 replaced by a random feature (repeats and drops)",
            "max_rows": max_rows(preset),
            "edge_cases": ["one feature, taken twice", "four samples (B = 4)"],
        })
    }

    fn generate(&self, preset: Preset, sizes: &Sizes, seed: u64) -> Result<InputSet, ProblemError> {
        let (t, b, p) = (sz(sizes, "T")?, sz(sizes, "B")?, sz(sizes, "P")?);
        if t < 1 || b < 4 || p < 1 || b % 4 != 0 {
            return Err(invalid(
                NAME,
                format!("need T, P >= 1 and B a positive multiple of 4, got T={t} B={b} P={p}"),
            ));
        }
        let (t, b, p) = (t as usize, b as usize, p as usize);
        let Kjt {
            lengths, values, ..
        } = kjt(t, b, derive_str(seed, "kjt"), max_rows(preset), None)?;
        let permute = permutation(t, p, seed)?;
        let segments = feature_segments(&lengths, t, b);
        let np: usize = permute.iter().map(|&f| segments[f as usize].1).sum();
        let weights = uniform_f32(values.len(), derive_str(seed, "weights"), 0.0, 1.0);
        let mut sizes = sizes.clone();
        sizes.insert("N".into(), values.len() as i64);
        sizes.insert("NP".into(), np as i64);
        let mut tensors = TensorSet::new();
        tensors.insert("permute", HostTensor::from_i64(vec![p], permute)?);
        tensors.insert("lengths", HostTensor::from_i32(vec![t, b], lengths)?);
        tensors.insert("values", HostTensor::from_i64(vec![values.len()], values)?);
        tensors.insert(
            "weights",
            HostTensor::from_f32(vec![weights.len()], weights)?,
        );
        Ok(InputSet {
            seed,
            sizes,
            scalars: BTreeMap::new(),
            tensors,
        })
    }

    fn edge_sizes(&self, preset: Preset) -> Vec<Sizes> {
        let base = self.sizes(preset);
        let mut one_feature = base.clone();
        one_feature.insert("T".into(), 1);
        one_feature.insert("P".into(), 2);
        let mut few_samples = base;
        few_samples.insert("B".into(), 4);
        vec![one_feature, few_samples]
    }

    fn oracle(&self, inputs: &InputSet) -> Result<BTreeMap<String, OracleOutput>, ProblemError> {
        let (t, b) = (
            sz(&inputs.sizes, "T")? as usize,
            sz(&inputs.sizes, "B")? as usize,
        );
        let permute = inputs.tensors.get("permute")?.to_i64_vec()?;
        let lengths = inputs.tensors.get("lengths")?.to_i64_vec()?;
        let values = inputs.tensors.get("values")?.to_i64_vec()?;
        let weights = inputs.tensors.get("weights")?.to_f64_vec();
        let lengths32: Vec<i32> = lengths.iter().map(|&l| l as i32).collect();
        let segments = feature_segments(&lengths32, t, b);
        let mut out_lengths = Vec::with_capacity(permute.len() * b);
        let mut out_values = Vec::new();
        let mut out_weights = Vec::new();
        for &f in &permute {
            let f = f as usize;
            out_lengths.extend_from_slice(&lengths[f * b..(f + 1) * b]);
            let (start, count) = segments[f];
            out_values.extend_from_slice(&values[start..start + count]);
            out_weights.extend_from_slice(&weights[start..start + count]);
        }
        Ok([
            (
                "permuted_lengths".to_string(),
                OracleOutput::Int(out_lengths),
            ),
            ("permuted_values".to_string(), OracleOutput::Int(out_values)),
            (
                "permuted_weights".to_string(),
                OracleOutput::Float(out_weights),
            ),
        ]
        .into_iter()
        .collect())
    }

    fn tolerance(&self, output: &TensorSpec) -> Tolerance {
        // Weights are copied, not computed: bit-exact (integers are exact anyway).
        match output.dtype {
            DType::F32 => Tolerance {
                rel_l2: 0.0,
                max_scaled: 0.0,
                exact: false,
            },
            other => Tolerance::for_dtype(other),
        }
    }

    fn work(&self, inputs: &InputSet) -> Work {
        let s = |k: &str| inputs.sizes.get(k).copied().unwrap_or(0) as usize;
        let (t, b, p, np) = (s("T"), s("B"), s("P"), s("NP") as f64);
        let (Ok(permute), Ok(lengths)) = (
            inputs.tensors.get("permute").and_then(|x| x.to_i64_vec()),
            inputs.tensors.get("lengths").and_then(|x| x.to_i64_vec()),
        ) else {
            return Work::default();
        };
        let lengths32: Vec<i32> = lengths.iter().map(|&l| l as i32).collect();
        let segments = feature_segments(&lengths32, t, b);
        let distinct: BTreeSet<i64> = permute.iter().copied().collect();
        let read_once: usize = distinct.iter().map(|&f| segments[f as usize].1).sum();
        // permute, lengths in, permuted lengths out, and 12 bytes (id + weight) per value.
        let fixed = (p * 8 + t * b * 4 + p * b * 4) as f64 + np * 12.0;
        Work {
            compulsory_bytes: fixed + read_once as f64 * 12.0,
            logical_bytes: fixed + np * 12.0,
            flops: 0.0,
        }
    }

    fn input_stats(&self, inputs: &InputSet) -> serde_json::Value {
        let (Ok(permute), Ok(lengths)) = (
            inputs.tensors.get("permute").and_then(|x| x.to_i64_vec()),
            inputs.tensors.get("lengths").and_then(|x| x.to_i64_vec()),
        ) else {
            return serde_json::Value::Null;
        };
        let t = inputs.sizes.get("T").copied().unwrap_or(0);
        let distinct: BTreeSet<i64> = permute.iter().copied().collect();
        json!({
            "N": inputs.sizes.get("N"),
            "NP": inputs.sizes.get("NP"),
            "mean_length": lengths.iter().sum::<i64>() as f64 / lengths.len().max(1) as f64,
            "empty_bags": lengths.iter().filter(|&&l| l == 0).count() as f64 / lengths.len().max(1) as f64,
            "features_dropped": t - distinct.len() as i64,
            "entries_repeating_a_feature": permute.len() - distinct.len(),
        })
    }

    fn reference(&self) -> Vec<LaunchSpec> {
        let mut plan = vec![gather_rows16(
            "P",
            "B * 4",
            &[
                "permuted_lengths",
                "lengths",
                "permute",
                "B * 4",
                "B * 4",
                "B * 4",
            ],
        )];
        // in_starts = cumsum(lengths) - lengths (cumsum of int32: a copy to int64, then CUB).
        plan.push(elementwise(
            "aten_cast_i32_to_i64",
            "T * B",
            &["lengths64", "lengths", "T * B"],
        ));
        plan.extend(inclusive_scan(
            "inclusive_sum_i64",
            "lengths64",
            "in_cum",
            "T * B",
            "status_in",
        ));
        plan.push(elementwise(
            "aten_sub_i64_i32",
            "T * B",
            &["in_starts", "in_cum", "lengths", "T * B"],
        ));
        // out_starts, the same over the permuted lengths.
        plan.push(elementwise(
            "aten_cast_i32_to_i64",
            "P * B",
            &["plengths64", "permuted_lengths", "P * B"],
        ));
        plan.extend(inclusive_scan(
            "inclusive_sum_i64",
            "plengths64",
            "out_cum",
            "P * B",
            "status_out",
        ));
        plan.push(elementwise(
            "aten_sub_i64_i32",
            "P * B",
            &["out_starts", "out_cum", "permuted_lengths", "P * B"],
        ));
        // shift = in_starts.view(T, B).index_select(0, permute).view(-1) - out_starts
        plan.push(gather_rows16(
            "P",
            "B * 8",
            &[
                "sel_starts",
                "in_starts",
                "permute",
                "B * 8",
                "B * 8",
                "B * 8",
            ],
        ));
        plan.push(elementwise(
            "aten_sub_i64",
            "P * B",
            &["shift", "sel_starts", "out_starts", "P * B"],
        ));
        // repeat_interleave(shift, permuted_lengths, output_size=NP): repeats.cumsum(0), the
        // segment of every output, then shift.index_select(0, segments).
        plan.push(elementwise(
            "aten_cast_i32_to_i64",
            "P * B",
            &["repeats64", "permuted_lengths", "P * B"],
        ));
        plan.extend(inclusive_scan(
            "inclusive_sum_i64",
            "repeats64",
            "repeats_cum",
            "P * B",
            "status_rep",
        ));
        plan.push(launch(
            "aten_repeat_interleave_i32",
            ["min(ceil_div(P * B, 16), 2048)", "1", "1"],
            ["512", "1", "1"],
            &["permuted_lengths", "repeats_cum", "segment", "P * B", "NP"],
        ));
        plan.push(elementwise(
            "aten_index_i64_by_i32",
            "NP",
            &["src", "shift", "segment", "NP"],
        ));
        // src += arange(NP); then the two gathers.
        plan.push(elementwise("aten_arange_i64", "NP", &["positions", "NP"]));
        plan.push(elementwise(
            "aten_add_i64",
            "NP",
            &["src", "src", "positions", "NP"],
        ));
        plan.push(elementwise(
            "aten_index_i64",
            "NP",
            &["permuted_values", "values", "src", "NP"],
        ));
        plan.push(elementwise(
            "aten_index_f32",
            "NP",
            &["permuted_weights", "weights", "src", "NP"],
        ));
        plan
    }

    fn reference_scratch(&self) -> Vec<ScratchSpec> {
        vec![
            scratch("lengths64", "T * B * 8"),
            scratch("in_cum", "T * B * 8"),
            scratch("in_starts", "T * B * 8"),
            scratch("status_in", &scan_status_bytes("T * B")),
            scratch("plengths64", "P * B * 8"),
            scratch("out_cum", "P * B * 8"),
            scratch("out_starts", "P * B * 8"),
            scratch("status_out", &scan_status_bytes("P * B")),
            scratch("sel_starts", "P * B * 8"),
            scratch("shift", "P * B * 8"),
            scratch("repeats64", "P * B * 8"),
            scratch("repeats_cum", "P * B * 8"),
            scratch("status_rep", &scan_status_bytes("P * B")),
            scratch("segment", "max(NP, 1) * 4"),
            scratch("src", "max(NP, 1) * 8"),
            scratch("positions", "max(NP, 1) * 8"),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selftest::self_test;

    #[test]
    fn self_test_rejects_degenerate_outputs() {
        self_test(&KjtPermute, Preset::Ci).unwrap();
    }

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
        for sizes in std::iter::once(p.sizes(Preset::Ci)).chain(p.edge_sizes(Preset::Ci)) {
            let set = p.generate(Preset::Ci, &sizes, 8).unwrap();
            let lengths = set.tensors.get("lengths").unwrap().to_i64_vec().unwrap();
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
        let set = p.generate(Preset::Ci, &p.sizes(Preset::Ci), 2).unwrap();
        let permute = set.tensors.get("permute").unwrap().to_i64_vec().unwrap();
        let lengths = set.tensors.get("lengths").unwrap().to_i64_vec().unwrap();
        let values = set.tensors.get("values").unwrap().to_i64_vec().unwrap();
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
