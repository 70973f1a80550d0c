//! Problem 6, `sequence_gather_padded_bf16`: jagged sequences of table rows to a padded tensor.
//!
//! Sequence b holds `lengths[b]` row ids, stored one sequence after the other in `indices`
//! (sequence b starts at `lengths[0] + … + lengths[b-1]`). `out[b, j, :] = weight[id of b's
//! j-th item, :]` for `j < min(lengths[b], L)`, zeros elsewhere (sequences longer than L are
//! cut). bf16 throughout; a gather copies bits, so the check is exact.
//!
//! Inputs: a bf16 table of E rows of D values uniform in [-1, 1); heavy-tailed (log-normal,
//! σ = 1) lengths with mean L/4 and up to 4L, so a few sequences are cut; Zipf(α = 1.15) ids
//! with the hot rows scattered. Every set with at least 3 sequences has sequence 0 empty,
//! sequence 1 of exactly L and sequence B/2 of the longest length. Edge sets: one sequence, and
//! every id equal (E = 1).
//!
//! The reference is the eager `Model` (`kernelbench/06_sequence_gather_padded_bf16.py`) launch
//! for launch: `cumsum`, `sub`, `arange`, `>=`, `+`, `masked_fill_`, `indices[src]`,
//! `F.embedding` (ATen's vectorized row gather) and the final `masked_fill_`.
use super::sparse::{
    elementwise, gather_rows16, inclusive_scan, invalid, scan_status_bytes, scratch, size,
};
use crate::check::Tolerance;
use crate::launch::{LaunchSpec, ScratchSpec};
use crate::spec::{
    InputSet, OracleOutput, Preset, Problem, ProblemError, Role, Sizes, TensorSpec, Work,
};
use data_gen::{
    bag_indices, seed::derive_str, uniform_f32_at, DType, HostTensor, IndexRecipe, Pooling,
    TensorSet,
};
use rayon::prelude::*;
use serde_json::json;
use std::collections::{BTreeMap, HashSet};

/// The problem.
pub struct SequenceGatherPaddedBf16;

const NAME: &str = "sequence_gather_padded_bf16";
const ALPHA: f64 = 1.15;

fn sz(sizes: &Sizes, name: &str) -> Result<i64, ProblemError> {
    size(sizes, NAME, name)
}

fn pooling(max_len: i64) -> Pooling {
    Pooling::LogNormal {
        mean: max_len as f64 / 4.0,
        sigma: 1.0,
        max: (4 * max_len) as u32,
    }
}

/// bf16 bits of `len` values uniform in [-1, 1) (element i from (seed, i)), filled in place in
/// parallel without an f32 copy of the table.
fn uniform_bf16_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut bytes = vec![0u8; len * 2];
    bytes
        .par_chunks_mut(1 << 16)
        .enumerate()
        .for_each(|(c, chunk)| {
            let base = c * (1 << 15);
            for (j, pair) in chunk.chunks_exact_mut(2).enumerate() {
                let x = uniform_f32_at(seed, (base + j) as u64, -1.0, 1.0);
                pair.copy_from_slice(&half::bf16::from_f32(x).to_bits().to_le_bytes());
            }
        });
    bytes
}

/// (sequence, position) → id position in `indices` for the kept items, row-major over [B, L].
fn starts(lengths: &[i64]) -> Vec<i64> {
    lengths
        .iter()
        .scan(0i64, |s, &l| {
            let start = *s;
            *s += l;
            Some(start)
        })
        .collect()
}

impl Problem for SequenceGatherPaddedBf16 {
    fn number(&self) -> u32 {
        6
    }

    fn name(&self) -> &'static str {
        NAME
    }

    fn summary(&self) -> &'static str {
        "jagged sequences of bf16 table rows to a padded [B, L, D] tensor (zeros past each end, cut at L)"
    }

    fn tensors(&self) -> Vec<TensorSpec> {
        vec![
            TensorSpec {
                name: "weight",
                dtype: DType::BF16,
                shape: &["E", "D"],
                role: Role::Input,
            },
            TensorSpec {
                name: "indices",
                dtype: DType::I64,
                shape: &["N"],
                role: Role::Input,
            },
            TensorSpec {
                name: "lengths",
                dtype: DType::I64,
                shape: &["B"],
                role: Role::Input,
            },
            TensorSpec {
                name: "out",
                dtype: DType::BF16,
                shape: &["B", "L", "D"],
                role: Role::Output,
            },
        ]
    }

    fn sizes(&self, preset: Preset) -> Sizes {
        let (e, d, b, l): (i64, i64, i64, i64) = match preset {
            // D = 24: a row is three 16-byte vectors, not a whole warp's worth.
            Preset::Ci => (4096, 24, 12, 16),
            Preset::Small => (1 << 20, 256, 512, 128),
            Preset::Full => (16 << 20, 256, 2048, 256),
        };
        [("E", e), ("D", d), ("B", b), ("L", l)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect()
    }

    fn recipe(&self, preset: Preset) -> serde_json::Value {
        let l = self.sizes(preset)["L"];
        json!({
            "weight": {"distribution": "uniform", "low": -1.0, "high": 1.0, "dtype": "bf16"},
            "lengths": pooling(l),
            "indices": {"distribution": "bounded_zipf", "alpha": ALPHA, "scatter_hot_rows": true},
            "edge_cases": ["sequence 0 empty", "sequence 1 of exactly L", "sequence B/2 of the longest length (cut at L)", "one sequence", "all ids equal (E = 1)"],
        })
    }

    fn generate(&self, preset: Preset, sizes: &Sizes, seed: u64) -> Result<InputSet, ProblemError> {
        let _ = preset;
        let (e, d, b, l) = (
            sz(sizes, "E")?,
            sz(sizes, "D")?,
            sz(sizes, "B")?,
            sz(sizes, "L")?,
        );
        if e < 1 || b < 1 || l < 1 || d < 8 || d % 8 != 0 {
            return Err(invalid(NAME, format!("need E, B, L >= 1 and D a multiple of 8 (16-byte rows), got E={e} D={d} B={b} L={l}")));
        }
        let pooling = pooling(l);
        let mut lengths = pooling.lengths(b as usize, derive_str(seed, "lengths"))?;
        if lengths.len() >= 3 {
            lengths[0] = 0;
            lengths[1] = l as u32;
            let mid = lengths.len() / 2;
            lengths[mid] = pooling.max_length();
        }
        if lengths.iter().all(|&x| x == 0) {
            // The eager Model reads indices[0] for padded slots: at least one id.
            *lengths.last_mut().unwrap() = 1;
        }
        let recipe = IndexRecipe {
            rows: e as u64,
            alpha: ALPHA,
            scatter_hot_rows: true,
        };
        let indices = bag_indices(&recipe, &lengths, derive_str(seed, "indices"))?;
        let weight = uniform_bf16_bytes((e * d) as usize, derive_str(seed, "weight"));
        let mut sizes = sizes.clone();
        sizes.insert("N".into(), indices.len() as i64);
        let mut tensors = TensorSet::new();
        tensors.insert(
            "weight",
            HostTensor::new(DType::BF16, vec![e as usize, d as usize], weight)?,
        );
        tensors.insert(
            "indices",
            HostTensor::from_i64(vec![indices.len()], indices)?,
        );
        let lengths: Vec<i64> = lengths.into_iter().map(i64::from).collect();
        tensors.insert("lengths", HostTensor::from_i64(vec![b as usize], lengths)?);
        Ok(InputSet {
            seed,
            sizes,
            scalars: BTreeMap::new(),
            tensors,
        })
    }

    fn edge_sizes(&self, preset: Preset) -> Vec<Sizes> {
        let base = self.sizes(preset);
        let mut one = base.clone();
        one.insert("B".into(), 1);
        let mut equal = base;
        equal.insert("E".into(), 1);
        vec![one, equal]
    }

    fn oracle(&self, inputs: &InputSet) -> Result<BTreeMap<String, OracleOutput>, ProblemError> {
        let (d, l) = (
            sz(&inputs.sizes, "D")? as usize,
            sz(&inputs.sizes, "L")? as usize,
        );
        // Read the bf16 bits in place: the full table is 8 GiB.
        let weight = &inputs.tensors.get("weight")?.bytes;
        let indices = inputs.tensors.get("indices")?.to_i64_vec()?;
        let lengths = inputs.tensors.get("lengths")?.to_i64_vec()?;
        let starts = starts(&lengths);
        let mut out = vec![0.0f64; lengths.len() * l * d];
        out.par_chunks_mut(l * d).enumerate().for_each(|(b, seq)| {
            let kept = (lengths[b].max(0) as usize).min(l);
            for (j, row) in seq.chunks_mut(d).take(kept).enumerate() {
                let id = indices[starts[b] as usize + j] as usize;
                let bits = &weight[id * d * 2..(id + 1) * d * 2];
                for (o, w) in row.iter_mut().zip(bits.chunks_exact(2)) {
                    *o = half::bf16::from_bits(u16::from_le_bytes([w[0], w[1]])).to_f64();
                }
            }
        });
        Ok([("out".to_string(), OracleOutput::Float(out))]
            .into_iter()
            .collect())
    }

    fn tolerance(&self, output: &TensorSpec) -> Tolerance {
        let _ = output;
        // A gather copies bits: any difference is an error.
        Tolerance {
            rel_l2: 0.0,
            max_scaled: 0.0,
            exact: false,
        }
    }

    fn work(&self, inputs: &InputSet) -> Work {
        let s = |k: &str| inputs.sizes.get(k).copied().unwrap_or(0) as f64;
        let (d, b, l) = (s("D"), s("B"), s("L"));
        let (Ok(indices), Ok(lengths)) = (
            inputs.tensors.get("indices").and_then(|t| t.to_i64_vec()),
            inputs.tensors.get("lengths").and_then(|t| t.to_i64_vec()),
        ) else {
            return Work::default();
        };
        let starts = starts(&lengths);
        let mut kept_ids = Vec::new();
        for (bi, &len) in lengths.iter().enumerate() {
            let kept = len.clamp(0, l as i64) as usize;
            kept_ids.extend_from_slice(&indices[starts[bi] as usize..starts[bi] as usize + kept]);
        }
        let distinct = kept_ids.iter().collect::<HashSet<_>>().len() as f64;
        let kept = kept_ids.len() as f64;
        let fixed = b * l * d * 2.0 + kept * 8.0 + b * 8.0;
        Work {
            compulsory_bytes: distinct * d * 2.0 + fixed,
            logical_bytes: kept * d * 2.0 + fixed,
            flops: 0.0,
        }
    }

    fn input_stats(&self, inputs: &InputSet) -> serde_json::Value {
        let l = inputs.sizes.get("L").copied().unwrap_or(0);
        let Ok(lengths) = inputs.tensors.get("lengths").and_then(|t| t.to_i64_vec()) else {
            return serde_json::Value::Null;
        };
        json!({
            "B": lengths.len(),
            "N": lengths.iter().sum::<i64>(),
            "kept": lengths.iter().map(|&x| x.min(l)).sum::<i64>(),
            "empty": lengths.iter().filter(|&&x| x == 0).count(),
            "cut": lengths.iter().filter(|&&x| x > l).count(),
            "mean_length": lengths.iter().sum::<i64>() as f64 / lengths.len().max(1) as f64,
            "longest": lengths.iter().max(),
        })
    }

    fn reference(&self) -> Vec<LaunchSpec> {
        let mut plan = inclusive_scan("inclusive_sum_i64", "lengths", "cum", "B", "scan_status");
        plan.extend([
            elementwise("aten_sub_i64", "B", &["starts", "cum", "lengths", "B"]),
            elementwise("aten_arange_i64", "L", &["pos", "L"]),
            elementwise(
                "aten_ge_outer_i64",
                "B * L",
                &["pad", "pos", "lengths", "B", "L"],
            ),
            elementwise(
                "aten_add_outer_i64",
                "B * L",
                &["src", "starts", "pos", "B", "L"],
            ),
            elementwise(
                "aten_masked_fill_i64",
                "B * L",
                &["src", "pad", "0", "B * L"],
            ),
            elementwise(
                "aten_index_i64",
                "B * L",
                &["rows", "indices", "src", "B * L"],
            ),
            gather_rows16(
                "B * L",
                "D * 2",
                &["out", "weight", "rows", "D * 2", "D * 2", "D * 2"],
            ),
            elementwise(
                "aten_masked_fill_rows_u16",
                "B * L * D",
                &["out", "pad", "0", "B * L", "D"],
            ),
        ]);
        plan
    }

    fn reference_scratch(&self) -> Vec<ScratchSpec> {
        vec![
            scratch("scan_status", &scan_status_bytes("B")),
            scratch("cum", "B * 8"),
            scratch("starts", "B * 8"),
            scratch("pos", "L * 8"),
            scratch("pad", "B * L"),
            scratch("src", "B * L * 8"),
            scratch("rows", "B * L * 8"),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selftest::self_test;

    #[test]
    fn self_test_rejects_degenerate_outputs() {
        self_test(&SequenceGatherPaddedBf16, Preset::Ci).unwrap();
    }

    #[test]
    fn inputs_hold_the_edge_sequences_and_are_deterministic() {
        let p = SequenceGatherPaddedBf16;
        let sizes = p.sizes(Preset::Ci);
        let set = p.generate(Preset::Ci, &sizes, 5).unwrap();
        let lengths = set.tensors.get("lengths").unwrap().to_i64_vec().unwrap();
        let indices = set.tensors.get("indices").unwrap().to_i64_vec().unwrap();
        assert_eq!(lengths.len(), 12);
        assert_eq!(
            (lengths[0], lengths[1], lengths[6]),
            (0, 16, 64),
            "empty, exactly L, cut"
        );
        assert_eq!(set.sizes["N"], lengths.iter().sum::<i64>());
        assert_eq!(indices.len() as i64, set.sizes["N"]);
        assert!(indices.iter().all(|&i| (0..4096).contains(&i)));
        let w = set.tensors.get("weight").unwrap().to_bf16_vec().unwrap();
        assert_eq!(w.len(), 4096 * 24);
        assert!(w.iter().all(|x| (-1.0..=1.0).contains(&x.to_f32())));
        assert_eq!(
            p.generate(Preset::Ci, &sizes, 5).unwrap().tensors,
            set.tensors
        );
        for edge in p.edge_sizes(Preset::Ci) {
            let s = p.generate(Preset::Ci, &edge, 9).unwrap();
            assert!(s.sizes["N"] >= 1, "the Model needs an id to read");
        }
    }

    #[test]
    fn oracle_copies_rows_cuts_at_l_and_pads_with_zeros() {
        let p = SequenceGatherPaddedBf16;
        let set = p.generate(Preset::Ci, &p.sizes(Preset::Ci), 3).unwrap();
        let w = set.tensors.get("weight").unwrap().to_bf16_vec().unwrap();
        let idx = set.tensors.get("indices").unwrap().to_i64_vec().unwrap();
        let lengths = set.tensors.get("lengths").unwrap().to_i64_vec().unwrap();
        let OracleOutput::Float(out) = &p.oracle(&set).unwrap()["out"] else {
            panic!()
        };
        let (l, d) = (16usize, 24usize);
        let at = |b: usize, j: usize, c: usize| out[(b * l + j) * d + c];
        assert!((0..l * d).all(|k| out[k] == 0.0), "sequence 0 is empty");
        let start6: i64 = lengths[..6].iter().sum();
        for j in [0, 15] {
            let id = idx[(start6 + j as i64) as usize] as usize;
            assert_eq!(
                at(6, j, 5),
                w[id * d + 5].to_f64(),
                "sequence 6 is cut at L, position {j} kept"
            );
        }
        for (b, &len) in lengths.iter().enumerate() {
            for j in len.min(16) as usize..l {
                assert!((0..d).all(|c| at(b, j, c) == 0.0));
            }
        }
    }

    #[test]
    fn work_counts_kept_lookups_and_the_whole_output() {
        let p = SequenceGatherPaddedBf16;
        let set = p.generate(Preset::Ci, &p.sizes(Preset::Ci), 3).unwrap();
        let lengths = set.tensors.get("lengths").unwrap().to_i64_vec().unwrap();
        let kept: i64 = lengths.iter().map(|&x| x.min(16)).sum();
        let w = p.work(&set);
        let fixed = (12 * 16 * 24 * 2 + kept * 8 + 12 * 8) as f64;
        assert_eq!(w.logical_bytes, (kept * 24 * 2) as f64 + fixed);
        assert!(w.compulsory_bytes < w.logical_bytes, "hot rows repeat");
    }
}
