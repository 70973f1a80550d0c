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
//! `F.embedding` (ATen's vectorized row gather) and the final `masked_fill_`, whose mask
//! broadcasts over D, so ATen runs it through the non-vectorized `elementwise_kernel<128, 4>`
//! (one bf16 element per iteration, offsets through a 2-D `OffsetCalculator`): ported as
//! `aten_masked_fill_bcast_u16`. H200 `full` (profile 20261201T233623Z): eager's fill 314 µs,
//! the former one-divide, loads-first port 188 µs; with the port the reference should go from
//! 0.535 to ≈ 0.66 ms, ≈ 1.0 of eager's 0.664.
use crate::problem::problem_identity;
use crate::check::Tolerance;
use crate::families::sparse::{
    arange_with_index,
    elementwise, exclusive_sums, gather_rows16, inclusive_scan, scan_status_bytes, scratch_of,
    sizes_in, with_sizes,
};
use crate::launch::{LaunchSpec, ScratchSpec};
use crate::spec::{shared_table, Seeds};
use crate::spec::{
    oracle_of, sizes_of, InputSet, Oracle, OracleOutput, Preset, Problem, ProblemError, Sizes,
    TensorSpec, Work,
};
use data_gen::{
    uniform_bytes,
    bag_indices, seed::derive_str, DType, HostTensor, IndexRecipe, Pooling,
};
use rayon::prelude::*;
use serde_json::json;
use std::collections::HashSet;

/// The problem.
pub struct SequenceGatherPaddedBf16;

const NAME: &str = "sequence_gather_padded_bf16";
const ALPHA: f64 = 1.15;

fn pooling(max_len: i64) -> Pooling {
    Pooling::LogNormal {
        mean: max_len as f64 / 4.0,
        sigma: 1.0,
        max: (4 * max_len) as u32,
    }
}


/// An eager elementwise launch over the B·L positions of the padded output.
fn per_slot(kernel: &str, args: &[&str]) -> LaunchSpec {
    elementwise(kernel, "B * L", args)
}

impl Problem for SequenceGatherPaddedBf16 {
    problem_identity!(
        6,
        NAME,
        "jagged sequences of bf16 table rows to a padded [B, L, D] tensor (zeros past each end, cut at L)"
    );

    fn tensors(&self) -> Vec<TensorSpec> {
        vec![
            TensorSpec::input("weight", DType::BF16, &["E", "D"]),
            TensorSpec::input("indices", DType::I64, &["N"]),
            TensorSpec::input("lengths", DType::I64, &["B"]),
            TensorSpec::output("out", DType::BF16, &["B", "L", "D"]),
        ]
    }

    fn sizes(&self, preset: Preset) -> Sizes {
        let (e, d, b, l): (i64, i64, i64, i64) = match preset {
            // D = 24: a row is three 16-byte vectors, not a whole warp's worth.
            Preset::Ci => (4096, 24, 12, 16),
            Preset::Small => (1 << 20, 256, 512, 128),
            Preset::Full => (16 << 20, 256, 2048, 256),
        };
        sizes_of(&[("E", e), ("D", d), ("B", b), ("L", l)])
    }

    fn shapes(&self, preset: Preset) -> Vec<crate::shapes::Shape> {
        let [e, d, b] = [self.sizes(preset)["E"], self.sizes(preset)["D"], self.sizes(preset)["B"]];
        let shapes: &[crate::shapes::Variation] = match preset {
            Preset::Ci => &[("l4", &[("L", 4)], "sequences of at most 4")],
            _ => &[
                ("d64", &[("D", 64), ("E", e * d / 64)], "D = 64, the table's bytes kept"),
                ("d128", &[("D", 128), ("E", e * d / 128)], "D = 128, the table's bytes kept"),
                ("short-l32", &[("L", 32), ("B", b * 8)], "sequences of at most 32, eight times the batch"),
            ],
        };
        crate::shapes::shapes_of(self.sizes(preset), shapes)
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

    fn generate(&self, _: Preset, sizes: &Sizes, seeds: Seeds) -> Result<InputSet, ProblemError> {
        let seed = seeds.set;
        let [e, d, b, l] = sizes_in(sizes, NAME, ["E", "D", "B", "L"])?;
        if e < 1 || b < 1 || l < 1 || d < 8 || d % 8 != 0 {
            return Err(ProblemError::invalid(NAME, format!("need E, B, L >= 1 and D a multiple of 8 (16-byte rows), got E={e} D={d} B={b} L={l}")));
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
        let (e, d) = (e as usize, d as usize);
        let weight = shared_table(NAME, "weight", &[e, d], seeds.table, |seed| {
            let bytes = uniform_bytes(e * d, derive_str(seed, "weight"), -1.0, 1.0, DType::BF16);
            Ok(HostTensor::new(DType::BF16, vec![e, d], bytes)?)
        })?;
        let n = indices.len();
        let lengths: Vec<i64> = lengths.into_iter().map(i64::from).collect();
        Ok(InputSet::builder(seed, sizes)
            .size("N", n)
            .tensor("weight", weight)
            .i64("indices", &[n], indices)?
            .i64("lengths", &[b as usize], lengths)?
            .build())
    }

    fn edge_sizes(&self, preset: Preset) -> Vec<Sizes> {
        let base = self.sizes(preset);
        vec![
            with_sizes(&base, &[("B", 1)]),
            with_sizes(&base, &[("E", 1)]),
        ]
    }

    fn oracle(&self, inputs: &InputSet) -> Result<Oracle, ProblemError> {
        let [d, l] = sizes_in(&inputs.sizes, NAME, ["D", "L"])?.map(|v| v as usize);
        // Read the bf16 bits in place: the full table is 8 GiB.
        let weight = &inputs.tensors.get("weight")?.bytes;
        let indices = inputs.i64s("indices")?;
        let lengths = inputs.i64s("lengths")?;
        let starts = exclusive_sums(&lengths);
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
        Ok(oracle_of([("out", OracleOutput::Float(out))]))
    }

    fn tolerance(&self, _output: &TensorSpec) -> Tolerance {
        // A gather copies bits: any difference is an error.
        Tolerance::EXACT
    }

    fn work(&self, inputs: &InputSet) -> Work {
        let [d, b, l] = ["D", "B", "L"].map(|k| inputs.count(k) as f64);
        let (Ok(indices), Ok(lengths)) = (inputs.i64s("indices"), inputs.i64s("lengths")) else {
            return Work::default();
        };
        let starts = exclusive_sums(&lengths);
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
            gathered: Some(crate::oracle::Gathered {
                row_bytes: d * 2.0,
                distinct_bytes: distinct * d * 2.0,
                lookup_bytes: kept * d * 2.0,
            }),
        }
    }

    fn input_stats(&self, inputs: &InputSet) -> serde_json::Value {
        let l = inputs.count("L") as i64;
        let Ok(lengths) = inputs.i64s("lengths") else {
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
            arange_with_index("pos", "L"),
            per_slot("aten_ge_outer_i64", &["pad", "pos", "lengths", "B", "L"]),
            per_slot("aten_add_outer_i64", &["src", "starts", "pos", "B", "L"]),
            per_slot("aten_masked_fill_i64", &["src", "pad", "0", "B * L"]),
            per_slot("aten_index_i64", &["rows", "indices", "src", "B * L"]),
            gather_rows16(
                "B * L",
                "D * 2",
                &["out", "weight", "rows", "D * 2", "D * 2", "D * 2"],
            ),
            // The mask broadcasts over D: ATen's non-vectorized elementwise kernel.
            elementwise(
                "aten_masked_fill_bcast_u16",
                "B * L * D",
                &["out", "pad", "0", "B * L", "D"],
            ),
        ]);
        plan
    }

    fn reference_scratch(&self) -> Vec<ScratchSpec> {
        scratch_of(&[
            ("scan_status", &scan_status_bytes("B")),
            ("cum", "B * 8"),
            ("starts", "B * 8"),
            ("pos", "L * 8"),
            ("pad", "B * L"),
            ("src", "B * L * 8"),
            ("rows", "B * L * 8"),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::ci_set;
    crate::selftest::self_test_case!(SequenceGatherPaddedBf16);

    #[test]
    fn inputs_hold_the_edge_sequences_and_are_deterministic() {
        let p = SequenceGatherPaddedBf16;
        let set = ci_set(&p, 5);
        let lengths = set.i64s("lengths").unwrap();
        let indices = set.i64s("indices").unwrap();
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
        assert_eq!(ci_set(&p, 5).tensors, set.tensors);
        for edge in p.edge_sizes(Preset::Ci) {
            let s = p.generate(Preset::Ci, &edge, 9.into()).unwrap();
            assert!(s.sizes["N"] >= 1, "the Model needs an id to read");
        }
    }

    #[test]
    fn oracle_copies_rows_cuts_at_l_and_pads_with_zeros() {
        let p = SequenceGatherPaddedBf16;
        let set = ci_set(&p, 3);
        let w = set.tensors.get("weight").unwrap().to_bf16_vec().unwrap();
        let idx = set.i64s("indices").unwrap();
        let lengths = set.i64s("lengths").unwrap();
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
        let set = ci_set(&p, 3);
        let lengths = set.i64s("lengths").unwrap();
        let kept: i64 = lengths.iter().map(|&x| x.min(16)).sum();
        let w = p.work(&set);
        let fixed = (12 * 16 * 24 * 2 + kept * 8 + 12 * 8) as f64;
        assert_eq!(w.logical_bytes, (kept * 24 * 2) as f64 + fixed);
        assert!(w.compulsory_bytes < w.logical_bytes, "hot rows repeat");
    }
}
