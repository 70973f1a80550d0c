//! Problem 8, `block_bucketize_sparse_features`: shard a keyed jagged tensor's ids row-wise to
//! W ranks (FBGEMM's `block_bucketize_sparse_features`, `sequence=True`).
//!
//! Inputs: the KJT of problem 7 (`lengths` [T, B] int32, `indices` int64 ids, `weights` fp32,
//! feature by feature) and `block_sizes` [T] int64. For an id of feature t with block size s:
//! below W·s the id goes to rank `id / s` as `id - rank·s`; past the last block (FBGEMM's rule)
//! it goes to rank `id % W` as `id / W`. Outputs: `new_lengths` [W, T, B] (ids of each (rank,
//! feature, sample)), `new_indices` and `new_weights` grouped by (rank, feature, sample) with the
//! original order inside each group, and `unbucketize_permute` [N]: id i of the input is at
//! position `unbucketize_permute[i]` of the output (the permutation back). Every id goes to
//! exactly one rank, so the outputs hold N ids. Everything is checked exactly.
//!
//! Block sizes: `ceil(rows / W)` for three features in four, `ceil(rows / 2W)` for the fourth
//! (a table larger than its sharding plan: about half its ids lie past the last block). Edge
//! sets: one feature, and every id equal (`SAME_ID = 1`: every id is 0, so rank 0 gets them all).
//!
//! The reference is the eager `Model` (`kernelbench/08_block_bucketize_sparse_features.py`) launch
//! for launch; see `gpu_kernels::kernels::block_bucketize_sparse_features`.
use crate::problem::problem_identity;
use crate::check::Tolerance;
use crate::families::sparse::{
    arange_with_index,
    apply_grid, elementwise, empty_share, exclusive_sums, kjt_inputs, kjt_max_rows,
    kjt_weights_recipe, repeat_interleave, scratch_of, sizes_in, sort_with_positions, split_by,
    with_sizes,
    CumsumI32, KjtInputs, SortScratch,
};
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
pub struct BlockBucketizeSparseFeatures;

const NAME: &str = "block_bucketize_sparse_features";

/// Block size of a feature with `rows` rows sharded to `w` ranks: every fourth feature's plan
/// covers only half its table.
pub fn block_size(feature: usize, rows: u64, w: u64) -> i64 {
    let shards = if feature % 4 == 3 { 2 * w } else { w };
    rows.div_ceil(shards).max(1) as i64
}

/// FBGEMM's rule: (rank, new id) of `id` with block size `s` over `w` ranks.
pub fn bucketize(id: i64, s: i64, w: i64) -> (i64, i64) {
    if id < w * s {
        (id / s, id - (id / s) * s)
    } else {
        (id % w, id / w)
    }
}

/// The outputs: new lengths [W·T·B], new ids, new weights (as given), and the permutation back.
///
/// In parallel over groups of consecutive segments (feature, sample): rank r's output is its
/// segments in order, so a group's share of it is one contiguous piece, which that group fills
/// alone. The result is the same whatever the thread count.
pub fn bucketize_kjt<W: Copy + Into<f64> + Sync>(
    lengths: &[i64],
    ids: &[i64],
    weights: &[W],
    block_sizes: &[i64],
    t: usize,
    b: usize,
    w: usize,
) -> (Vec<i64>, Vec<i64>, Vec<f64>, Vec<i64>) {
    let tb = t * b;
    let lengths = &lengths[..tb];
    // Group g: segments [g·per_group, (g + 1)·per_group), ids from bounds[its first segment].
    let per_group = tb.div_ceil(SEGMENT_GROUPS).max(1);
    let groups = tb.div_ceil(per_group);
    let segments = |g: usize| g * per_group..((g + 1) * per_group).min(tb);
    let mut bounds = exclusive_sums(lengths);
    bounds.push(lengths.iter().sum());
    let first_id = |g: usize| bounds[(g * per_group).min(tb)] as usize;
    let bucket = |i: usize, seg: usize| bucketize(ids[i], block_sizes[seg / b], w as i64);
    // Pass 1: new_lengths[r·TB + seg]; each group counts into its piece of every rank's row.
    let mut new_lengths = vec![0i64; w * tb];
    let mut counts: Vec<Vec<&mut [i64]>> = (0..groups).map(|_| Vec::with_capacity(w)).collect();
    for rank_row in new_lengths.chunks_mut(tb.max(1)) {
        for (g, piece) in rank_row.chunks_mut(per_group).enumerate() {
            counts[g].push(piece);
        }
    }
    counts.into_par_iter().enumerate().for_each(|(g, mut counts)| {
        let segs = segments(g);
        for seg in segs.clone() {
            for i in bounds[seg] as usize..bounds[seg + 1] as usize {
                counts[bucket(i, seg).0 as usize][seg - segs.start] += 1;
            }
        }
    });
    // Pass 2: rank r's piece of group g holds that group's ids of rank r; the pieces lie in
    // order rank by rank, group by group, so each starts at the sum of the counts before it.
    let piece_lengths: Vec<usize> = new_lengths
        .par_chunks(tb.max(1))
        .flat_map_iter(|rank_row| {
            rank_row
                .chunks(per_group)
                .map(|piece| piece.iter().sum::<i64>() as usize)
        })
        .collect();
    let starts: Vec<usize> = piece_lengths
        .iter()
        .scan(0usize, |sum, &len| {
            let start = *sum;
            *sum += len;
            Some(start)
        })
        .collect();
    let total = bounds[tb] as usize;
    let n = ids.len();
    let (mut new_ids, mut new_weights, mut back) = (vec![0i64; n], vec![0f64; n], vec![0i64; n]);
    let mut id_pieces: Vec<Vec<&mut [i64]>> = (0..groups).map(|_| Vec::with_capacity(w)).collect();
    let mut weight_pieces: Vec<Vec<&mut [f64]>> =
        (0..groups).map(|_| Vec::with_capacity(w)).collect();
    let pieces = split_by(&mut new_ids[..total], &piece_lengths)
        .into_iter()
        .zip(split_by(&mut new_weights[..total], &piece_lengths));
    for (k, (ids_piece, weights_piece)) in pieces.enumerate() {
        id_pieces[k % groups].push(ids_piece);
        weight_pieces[k % groups].push(weights_piece);
    }
    let back_lengths: Vec<usize> = (0..groups).map(|g| first_id(g + 1) - first_id(g)).collect();
    let back_pieces = split_by(&mut back, &back_lengths);
    id_pieces
        .into_par_iter()
        .zip(weight_pieces)
        .zip(back_pieces)
        .enumerate()
        .for_each(|(g, ((mut out_ids, mut out_weights), back))| {
            let mut filled = vec![0usize; w];
            let from = first_id(g);
            for seg in segments(g) {
                for i in bounds[seg] as usize..bounds[seg + 1] as usize {
                    let (r, nid) = bucket(i, seg);
                    let (r, c) = (r as usize, &mut filled[r as usize]);
                    out_ids[r][*c] = nid;
                    out_weights[r][*c] = weights[i].into();
                    back[i - from] = (starts[r * groups + g] + *c) as i64;
                    *c += 1;
                }
            }
        });
    (new_lengths, new_ids, new_weights, back)
}

/// At most this many segment groups share [`bucketize_kjt`]'s work.
const SEGMENT_GROUPS: usize = 512;

impl Problem for BlockBucketizeSparseFeatures {
    problem_identity!(
        8,
        NAME,
        "row-wise sharding of a KJT's ids to W ranks (FBGEMM block bucketize, ids past the last block by id % W), with the permutation back"
    );

    fn tensors(&self) -> Vec<TensorSpec> {
        vec![
            TensorSpec::input("lengths", DType::I32, &["T", "B"]),
            TensorSpec::input("indices", DType::I64, &["N"]),
            TensorSpec::input("weights", DType::F32, &["N"]),
            TensorSpec::input("block_sizes", DType::I64, &["T"]),
            TensorSpec::output("new_lengths", DType::I32, &["W", "T", "B"]),
            TensorSpec::output("new_indices", DType::I64, &["N"]),
            TensorSpec::output("new_weights", DType::F32, &["N"]),
            TensorSpec::output("unbucketize_permute", DType::I64, &["N"]),
        ]
    }

    fn sizes(&self, preset: Preset) -> Sizes {
        let (t, b, w): (i64, i64, i64) = match preset {
            Preset::Ci => (5, 12, 4),
            Preset::Small => (128, 2048, 8),
            // docs/design.md §3 says "inputs as in 7" (B = 8192, ~112M ids), but the eager plan takes
            // 24 ms there on an H200 (PyTorch and the reference alike), past the 0.3–15 ms a
            // `full` reference should run; B = 4096 (~56M ids) halves it.
            Preset::Full => (856, 4096, 8),
        };
        sizes_of(&[("T", t), ("B", b), ("W", w), ("SAME_ID", 0)])
    }

    fn shapes(&self, preset: Preset) -> Vec<crate::shapes::Shape> {
        let shapes: &[crate::shapes::Variation] = match preset {
            Preset::Ci => &[("w2", &[("W", 2)], "two ranks")],
            _ => &[
                ("w2", &[("W", 2)], "two ranks"),
                ("w64", &[("W", 64)], "64 ranks"),
                ("criteo-b65536", &[("T", 26), ("B", 65536)], "Criteo's 26 features, B = 65536"),
            ],
        };
        crate::shapes::shapes_of(self.sizes(preset), shapes)
    }

    fn recipe(&self, preset: Preset) -> serde_json::Value {
        json!({
            "kjt": "as kjt_permute (sparse::kjt)",
            "weights": kjt_weights_recipe(),
            "block_sizes": "ceil(rows / W); every 4th feature ceil(rows / 2W) (ids past the last block)",
            "max_rows": kjt_max_rows(preset),
            "SAME_ID": "1: every id is 0 (edge case)",
            "edge_cases": ["one feature", "every id equal"],
        })
    }

    fn generate(&self, preset: Preset, sizes: &Sizes, seeds: Seeds) -> Result<InputSet, ProblemError> {
        let seed = seeds.set;
        let [t, b, w] = sizes_in(sizes, NAME, ["T", "B", "W"])?;
        let same = sizes.get("SAME_ID").copied().unwrap_or(0) != 0;
        if t < 1 || b < 1 || w < 1 {
            return Err(ProblemError::invalid(
                NAME,
                format!("need T, B, W >= 1, got T={t} B={b} W={w}"),
            ));
        }
        let (t, b) = (t as usize, b as usize);
        let KjtInputs { set, rows, .. } =
            kjt_inputs(preset, sizes, seed, (t, b), "indices", same.then_some(0))?;
        let block_sizes: Vec<i64> = rows
            .iter()
            .enumerate()
            .map(|(f, &r)| block_size(f, r, w as u64))
            .collect();
        Ok(set.i64("block_sizes", &[t], block_sizes)?.build())
    }

    fn edge_sizes(&self, preset: Preset) -> Vec<Sizes> {
        let base = self.sizes(preset);
        vec![
            with_sizes(&base, &[("T", 1)]),
            with_sizes(&base, &[("SAME_ID", 1)]),
        ]
    }

    fn oracle(&self, inputs: &InputSet) -> Result<Oracle, ProblemError> {
        let [t, b, w] = sizes_in(&inputs.sizes, NAME, ["T", "B", "W"])?.map(|v| v as usize);
        let (new_lengths, new_ids, new_weights, back) = bucketize_kjt(
            &inputs.i64s("lengths")?,
            &inputs.i64s("indices")?,
            &inputs.f32s("weights")?,
            &inputs.i64s("block_sizes")?,
            t,
            b,
            w,
        );
        Ok(oracle_of([
            ("new_lengths", OracleOutput::Int(new_lengths)),
            ("new_indices", OracleOutput::Int(new_ids)),
            ("new_weights", OracleOutput::Float(new_weights)),
            ("unbucketize_permute", OracleOutput::Int(back)),
        ]))
    }

    fn tolerance(&self, _output: &TensorSpec) -> Tolerance {
        // Integers are exact; weights are copied, not computed: bit-exact.
        Tolerance::EXACT
    }

    fn work(&self, inputs: &InputSet) -> Work {
        let [t, b, w, n] = ["T", "B", "W", "N"].map(|k| inputs.count(k) as f64);
        // Read lengths, ids, weights, block sizes; write the new lengths, ids, weights and the
        // permutation back.
        let bytes = t * b * 4.0 + n * 12.0 + t * 8.0 + w * t * b * 4.0 + n * 12.0 + n * 8.0;
        Work {
            compulsory_bytes: bytes,
            logical_bytes: bytes,
            flops: 0.0,
            gathered: None,
        }
    }

    fn input_stats(&self, inputs: &InputSet) -> serde_json::Value {
        let (Ok(lengths), Ok(ids), Ok(block_sizes)) = (
            inputs.i64s("lengths"),
            inputs.i64s("indices"),
            inputs.i64s("block_sizes"),
        ) else {
            return serde_json::Value::Null;
        };
        let (b, w) = (inputs.count("B").max(1), inputs.count("W").max(1) as i64);
        let mut past = 0usize;
        let mut per_rank = vec![0usize; w as usize];
        let mut pos = 0usize;
        for (seg, &len) in lengths.iter().enumerate() {
            for &id in &ids[pos..pos + len as usize] {
                let s = block_sizes[seg / b];
                past += (id >= w * s) as usize;
                per_rank[bucketize(id, s, w).0 as usize] += 1;
            }
            pos += len as usize;
        }
        json!({
            "N": ids.len(),
            "past_last_block": past as f64 / ids.len().max(1) as f64,
            "ids_per_rank": per_rank,
            "empty_bags": empty_share(&lengths),
        })
    }

    fn reference(&self) -> Vec<LaunchSpec> {
        let mut plan = eager_plan();
        for launch in &mut plan {
            for arg in &mut launch.args {
                if let Some(&(_, buf)) = SHARED_SCRATCH.iter().find(|(name, _)| name == arg) {
                    *arg = buf.to_string();
                }
            }
        }
        plan
    }

    fn reference_scratch(&self) -> Vec<ScratchSpec> {
        let mut s = Vec::from(LENGTHS_CUMSUM.scratch("T * B"));
        s.extend(scratch_of(&[
            ("seg", "max(N, 1) * 4"),
            ("feature", "max(N, 1) * 4"),
            ("small", "max(N, 1)"),
            ("reduce_partials", "1056 * 8"),
            ("key_minmax", "8"),
            ("buf_a", "max(N, 1) * 8"),
            ("buf_c", "max(N, 1) * 8"),
            ("buf_d", "max(N, 1) * 8"),
            ("buf_e", "max(N, 1) * 8"),
            // buf_b also holds the W·T·B bin counts.
            ("buf_b", "max(max(N, W * T * B), 1) * 8"),
        ]));
        s.extend(
            SortScratch::new("sort")
                .specs("N")
                .into_iter()
                .filter(|x| !SHARED_SCRATCH.iter().any(|(name, _)| *name == x.name)),
        );
        s
    }
}

/// The cumsum of the lengths (for `repeat_interleave`).
const LENGTHS_CUMSUM: CumsumI32 = CumsumI32 {
    wide: "lengths64",
    cum: "lengths_cum",
    status: "scan_status",
};

/// The N-sized temporaries of the eager plan share five buffers, as eager PyTorch's caching
/// allocator reuses the blocks of tensors it has freed (at `full` the plan's temporaries would
/// otherwise take 16 GB per input set). Each buffer's tensors live one after the other:
/// `blk → low → key → sort_alt_keys → positions`, `q → high → counts → sort_alt_values`,
/// `rem → qblk → rank_tb → iota → order`, `rank → sorted_rank`, `new_id`.
const SHARED_SCRATCH: &[(&str, &str)] = &[
    ("blk", "buf_a"),
    ("low", "buf_a"),
    ("key", "buf_a"),
    ("sort_alt_keys", "buf_a"),
    ("positions", "buf_a"),
    ("q", "buf_b"),
    ("high", "buf_b"),
    ("counts", "buf_b"),
    ("sort_alt_values", "buf_b"),
    ("rem", "buf_c"),
    ("qblk", "buf_c"),
    ("rank_tb", "buf_c"),
    ("iota", "buf_c"),
    ("order", "buf_c"),
    ("rank", "buf_d"),
    ("sorted_rank", "buf_d"),
    ("new_id", "buf_e"),
];

/// An eager elementwise launch over the N ids (`args` end with the count, N).
fn per_id(kernel: &str, args: &[&str]) -> LaunchSpec {
    elementwise(kernel, "N", args)
}

/// The eager `Model`'s launches, with each temporary under its own name.
fn eager_plan() -> Vec<LaunchSpec> {
    // seg = repeat_interleave(lengths.view(-1), output_size=N)
    let mut plan = LENGTHS_CUMSUM.plan("lengths", "T * B");
    plan.push(repeat_interleave(
        "lengths",
        LENGTHS_CUMSUM.cum,
        "seg",
        "T * B",
        "N",
    ));
    plan.extend([
        // blk = block_sizes[seg // B]; q = indices // blk; small = q < W
        per_id("aten_floor_divide_scalar_i32", &["feature", "seg", "B", "N"]),
        per_id("aten_index_i64_by_i32", &["blk", "block_sizes", "feature", "N"]),
        per_id("aten_floor_divide_i64", &["q", "indices", "blk", "N"]),
        per_id("aten_lt_scalar_i64", &["small", "q", "W", "N"]),
        // rank = where(small, q, indices % W)
        per_id("aten_remainder_scalar_i64", &["rem", "indices", "W", "N"]),
        per_id("aten_where_i64", &["rank", "small", "q", "rem", "N"]),
        // new_id = where(small, indices - q * blk, indices // W)
        per_id("aten_mul_i64", &["qblk", "q", "blk", "N"]),
        per_id("aten_sub_i64", &["low", "indices", "qblk", "N"]),
        per_id("aten_floor_divide_scalar_i64", &["high", "indices", "W", "N"]),
        per_id("aten_where_i64", &["new_id", "small", "low", "high", "N"]),
        // key = rank * (T * B) + seg
        per_id("aten_mul_scalar_i64", &["rank_tb", "rank", "T * B", "N"]),
        per_id("aten_add_i64_i32", &["key", "rank_tb", "seg", "N"]),
    ]);
    // new_lengths = bincount(key, minlength=W*T*B).to(int32): min() and max() (each a
    // reduction and a copy to the host), zeros, the histogram, the cast.
    let partial_grid = "min(ceil_div(N, 2048), 1056)";
    for op in ["0", "1"] {
        plan.push(LaunchSpec::linear(
            "aten_reduce_partial_i64",
            partial_grid,
            512,
            &["reduce_partials", "key", "N", op],
        ));
        plan.push(LaunchSpec::linear(
            "aten_reduce_final_i64",
            1,
            512,
            &["key_minmax", "reduce_partials", partial_grid, op],
        ));
    }
    plan.extend([
        elementwise("aten_fill_i64", "W * T * B", &["counts", "0", "W * T * B"]),
        apply_grid(
            "aten_histogram_i64",
            "N",
            &["counts", "key", "N", "W * T * B", "0", "W * T * B"],
        ),
        elementwise(
            "aten_cast_i64_to_i32",
            "W * T * B",
            &["new_lengths", "counts", "W * T * B"],
        ),
    ]);
    // order = argsort(rank, stable=True)
    plan.extend(sort_with_positions(
        "rank",
        "iota",
        "sorted_rank",
        "order",
        "N",
        &SortScratch::new("sort"),
    ));
    plan.extend([
        // unbucketize_permute = empty_like(order).scatter_(0, order, arange(N))
        arange_with_index("positions", "N"),
        per_id("aten_scatter_i64", &["unbucketize_permute", "order", "positions", "N"]),
        per_id("aten_index_i64", &["new_indices", "new_id", "order", "N"]),
        per_id("aten_index_f32", &["new_weights", "weights", "order", "N"]),
    ]);
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    crate::selftest::self_test_case!(BlockBucketizeSparseFeatures);

    #[test]
    fn temporaries_sharing_a_buffer_never_overlap_in_time() {
        let plan = eager_plan();
        let span = |name: &str| {
            let uses: Vec<usize> = (0..plan.len())
                .filter(|&i| plan[i].args.iter().any(|a| a == name))
                .collect();
            assert!(!uses.is_empty(), "{name} is used");
            (uses[0], *uses.last().unwrap())
        };
        for (k, &(name, buf)) in SHARED_SCRATCH.iter().enumerate() {
            for &(other, other_buf) in &SHARED_SCRATCH[k + 1..] {
                if buf == other_buf {
                    let (a, b) = (span(name), span(other));
                    assert!(
                        a.1 <= b.0 || b.1 <= a.0,
                        "{name} {a:?} and {other} {b:?} share {buf}"
                    );
                    // Sharing one launch is only allowed when the later tensor is written
                    // by the launch that last reads the earlier one.
                    if a.1 == b.0 {
                        let l = &plan[a.1];
                        let (ia, ib) = (
                            l.args.iter().position(|x| x == name).unwrap(),
                            l.args.iter().position(|x| x == other).unwrap(),
                        );
                        panic!(
                            "{name} and {other} meet in launch {} ({}: args {ia}, {ib})",
                            a.1, l.kernel
                        );
                    }
                }
            }
        }
        let refs = BlockBucketizeSparseFeatures.reference();
        assert!(refs.iter().all(|l| !l
            .args
            .iter()
            .any(|a| SHARED_SCRATCH.iter().any(|(n, _)| n == a))));
    }

    #[test]
    fn fbgemm_rule_below_and_past_the_last_block() {
        // W = 4, block size 10: ids 0..40 by block, then by id % W.
        assert_eq!(bucketize(0, 10, 4), (0, 0));
        assert_eq!(bucketize(9, 10, 4), (0, 9));
        assert_eq!(bucketize(10, 10, 4), (1, 0));
        assert_eq!(bucketize(39, 10, 4), (3, 9));
        assert_eq!(bucketize(40, 10, 4), (0, 10));
        assert_eq!(bucketize(43, 10, 4), (3, 10));
        assert_eq!(block_size(0, 100, 8), 13);
        assert_eq!(block_size(3, 100, 8), 7);
    }

    #[test]
    fn outputs_are_grouped_by_rank_feature_sample_in_original_order() {
        // T = 2, B = 2, W = 2, block sizes 5 and 3: segments (t, b) hold [7, 1], [], [2, 4, 9], [0].
        let lengths = [2, 0, 3, 1];
        let ids = [7, 1, 2, 4, 9, 0];
        let weights = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6];
        let (nl, nid, nw, back) = bucketize_kjt(&lengths, &ids, &weights, &[5, 3], 2, 2, 2);
        // Ranks: 7→(1,2) 1→(0,1) | 2→(0,2) 4→(1,1) 9→(1,4: past 6, 9%2=1, 9/2=4) | 0→(0,0)
        assert_eq!(nl, vec![1, 0, 1, 1, 1, 0, 2, 0]);
        assert_eq!(nid, vec![1, 2, 0, 2, 1, 4]);
        assert_eq!(nw, vec![0.2, 0.3, 0.6, 0.1, 0.4, 0.5]);
        assert_eq!(back, vec![3, 0, 1, 4, 5, 2]);
        for (i, &p) in back.iter().enumerate() {
            assert_eq!(nw[p as usize], weights[i], "the permutation back");
        }
    }

    /// The serial two-pass bucketize the parallel one replaced.
    fn serial_bucketize(
        lengths: &[i64],
        ids: &[i64],
        weights: &[f32],
        block_sizes: &[i64],
        (t, b, w): (usize, usize, usize),
    ) -> (Vec<i64>, Vec<i64>, Vec<f64>, Vec<i64>) {
        let tb = t * b;
        let mut new_lengths = vec![0i64; w * tb];
        let mut pos = 0usize;
        for seg in 0..tb {
            for &id in &ids[pos..pos + lengths[seg] as usize] {
                let (r, _) = bucketize(id, block_sizes[seg / b], w as i64);
                new_lengths[r as usize * tb + seg] += 1;
            }
            pos += lengths[seg] as usize;
        }
        let mut cursor = exclusive_sums(&new_lengths);
        let n = ids.len();
        let (mut new_ids, mut new_weights, mut back) = (vec![0i64; n], vec![0f64; n], vec![0i64; n]);
        let mut i = 0usize;
        for seg in 0..tb {
            for _ in 0..lengths[seg] {
                let (r, nid) = bucketize(ids[i], block_sizes[seg / b], w as i64);
                let c = &mut cursor[r as usize * tb + seg];
                new_ids[*c as usize] = nid;
                new_weights[*c as usize] = weights[i].into();
                back[i] = *c;
                *c += 1;
                i += 1;
            }
        }
        (new_lengths, new_ids, new_weights, back)
    }

    #[test]
    fn the_parallel_bucketize_is_the_serial_one() {
        let p = BlockBucketizeSparseFeatures;
        // 2000 and 6000 segments: several segments per group, a partial last group.
        for (t, b, w) in [(5, 400, 4), (3, 2000, 3), (1, 1, 2)] {
            let sizes = with_sizes(&p.sizes(Preset::Ci), &[("T", t), ("B", b), ("W", w)]);
            let set = p.generate(Preset::Ci, &sizes, 11.into()).unwrap();
            let (lengths, ids) = (set.i64s("lengths").unwrap(), set.i64s("indices").unwrap());
            let (weights, blocks) = (set.f32s("weights").unwrap(), set.i64s("block_sizes").unwrap());
            let dims = (t as usize, b as usize, w as usize);
            let want = serial_bucketize(&lengths, &ids, &weights, &blocks, dims);
            let got = bucketize_kjt(&lengths, &ids, &weights, &blocks, dims.0, dims.1, dims.2);
            assert_eq!(got, want, "T={t} B={b} W={w}");
        }
    }

    #[test]
    fn inputs_have_ids_past_the_last_block_and_edge_sets_hold() {
        let p = BlockBucketizeSparseFeatures;
        let set = p
            .generate(Preset::Small, &p.sizes(Preset::Small), 3.into())
            .unwrap();
        let stats = p.input_stats(&set);
        let past = stats["past_last_block"].as_f64().unwrap();
        assert!(
            past > 0.02 && past < 0.4,
            "share past the last block: {past}"
        );
        let per_rank: Vec<u64> = serde_json::from_value(stats["ids_per_rank"].clone()).unwrap();
        assert!(per_rank.iter().all(|&c| c > 0));
        let edges = p.edge_sizes(Preset::Ci);
        let same = p.generate(Preset::Ci, &edges[1], 1.into()).unwrap();
        assert!(same.i64s("indices").unwrap().iter().all(|&i| i == 0));
        let one = p.generate(Preset::Ci, &edges[0], 1.into()).unwrap();
        assert_eq!(one.tensors.get("block_sizes").unwrap().numel(), 1);
        let out = p.oracle(&same).unwrap();
        let OracleOutput::Int(nl) = &out["new_lengths"] else {
            panic!()
        };
        let n = same.sizes["N"];
        assert_eq!(nl[..60].iter().sum::<i64>(), n, "rank 0 gets every id");
    }
}
