//! Problem 4, `embedding_bag_int8_rowwise`: inference over an 8-bit row-wise quantized table.
//!
//! Each row of `weight` (uint8 [E, D + 8]) is D quantized bytes followed by the row's fp32 scale
//! and fp32 bias, little-endian (PyTorch's "byte rowwise" layout, what
//! `torch.ops.quantized.embedding_bag_byte_prepack` writes; row stride D + 8 bytes).
//! `out[b, d] = Σ_{j ∈ bag b} (q[idx_j, d] · scale[idx_j] + bias[idx_j])`, fp32 [B, D].
//!
//! The eager `Model` calls `torch.ops.quantized.embedding_bag_byte_rowwise_offsets` (which has a
//! CUDA kernel in PyTorch: aten/src/ATen/native/quantized/cuda/EmbeddingBag.cu), so the
//! reference is a port of that kernel with its launch: one block of one thread per bag
//! (`gpu-kernels` `embedding_bag_int8_rowwise_reference`). That kernel is PyTorch's own
//! ("UN-OPTIMIZED kernel, doesn't even avoid warp divergence!" says its source), which is why
//! the speedups on this problem are large: they are measured against what PyTorch eager does.
//!
//! Inputs: Zipf(α = 1.09, FBGEMM's inference value) rows with hot rows scattered; log-normal bag
//! lengths (mean 30, σ = 1), bag 0 empty and bag B/2 of the longest length; quantized bytes
//! uniform in 0..=255; per row a scale uniform in [1/255, 2/255) and a bias of
//! −128·scale + uniform[−0.05, 0.05), so dequantized values lie in about [−1, 1].
use crate::problem::problem_identity;
use crate::families::bags::{self, BagRecipe, BagSizes, Counts};
use crate::launch::LaunchSpec;
use crate::spec::{shared_table, Seeds};
use crate::spec::{InputSet, Oracle, Preset, Problem, ProblemError, Sizes, TensorSpec, Work};
use data_gen::seed::{derive_str, mix64, GOLDEN_GAMMA};
use data_gen::{uniform_f32, DType, HostTensor};
use rayon::prelude::*;
use serde_json::json;

/// The problem.
pub struct EmbeddingBagInt8Rowwise;

const NAME: &str = "embedding_bag_int8_rowwise";
/// Zipf exponent of the row indices (FBGEMM's recommended inference value).
const ALPHA: f64 = 1.09;
/// Bytes of scale and bias after the D quantized bytes of a row.
pub const ROW_TAIL_BYTES: usize = 8;
/// E = 16M, D = 128, B = 65536 at `full` (docs/design.md §3).
const SIZES: BagSizes = BagSizes {
    small: (2 << 20, 128, 16384),
    full: (16 << 20, 128, 65536),
};

fn recipe(preset: Preset) -> BagRecipe {
    BagRecipe::new(preset, ALPHA, 30.0)
}

/// A quantized table of `rows` rows of `dim` bytes plus scale and bias, deterministic in `seed`.
pub fn quantized_table(rows: usize, dim: usize, seed: u64) -> Vec<u8> {
    let stride = dim + ROW_TAIL_BYTES;
    let scale = uniform_f32(rows, derive_str(seed, "scale"), 1.0 / 255.0, 2.0 / 255.0);
    let jitter = uniform_f32(rows, derive_str(seed, "bias"), -0.05, 0.05);
    let key = derive_str(seed, "quantized-bytes");
    let mut table = vec![0u8; rows * stride];
    table
        .par_chunks_mut(stride)
        .enumerate()
        .for_each(|(r, row)| {
            for (c, q) in row[..dim].iter_mut().enumerate() {
                // Byte i of the flat D-byte payloads: byte i % 8 of the i / 8-th hash.
                let i = (r * dim + c) as u64;
                let word = mix64(key.wrapping_add((i / 8 + 1).wrapping_mul(GOLDEN_GAMMA)));
                *q = (word >> (8 * (i % 8))) as u8;
            }
            let bias = -128.0 * scale[r] + jitter[r];
            row[dim..dim + 4].copy_from_slice(&scale[r].to_le_bytes());
            row[dim + 4..].copy_from_slice(&bias.to_le_bytes());
        });
    table
}

/// Scale and bias of row `r` of a quantized table with row stride `stride`.
fn scale_bias(table: &[u8], stride: usize, r: usize) -> (f64, f64) {
    let tail = &table[(r + 1) * stride - ROW_TAIL_BYTES..(r + 1) * stride];
    let f = |b: &[u8]| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64;
    (f(&tail[..4]), f(&tail[4..]))
}

impl Problem for EmbeddingBagInt8Rowwise {
    problem_identity!(
        4,
        NAME,
        "8-bit row-wise quantized table (D bytes + fp32 scale + fp32 bias per row), sum pooling, fp32 out"
    );

    fn tensors(&self) -> Vec<TensorSpec> {
        let weight = TensorSpec::input("weight", DType::U8, &["E", "D + 8"]);
        bags::forward_signature(weight, None, DType::F32)
    }

    fn sizes(&self, preset: Preset) -> Sizes {
        SIZES.of(preset)
    }

    fn shapes(&self, preset: Preset) -> Vec<crate::shapes::Shape> {
        bags::table_shapes(self.sizes(preset), preset)
    }

    fn recipe(&self, preset: Preset) -> serde_json::Value {
        recipe(preset).record(json!({
            "weight": {
                "layout": "per row: D uint8, fp32 scale, fp32 bias (little-endian); stride D + 8 bytes",
                "q": "uniform over 0..=255",
                "scale": {"distribution": "uniform", "low": 1.0 / 255.0, "high": 2.0 / 255.0},
                "bias": "-128 * scale + uniform[-0.05, 0.05)",
            },
        }))
    }

    fn generate(&self, preset: Preset, sizes: &Sizes, seeds: Seeds) -> Result<InputSet, ProblemError> {
        let seed = seeds.set;
        let (e, d) = bags::table_dims(NAME, sizes)?;
        if d % 4 != 0 {
            return Err(ProblemError::invalid(
                NAME,
                format!("D = {d} must be a multiple of 4 (as PyTorch requires)"),
            ));
        }
        let bags = recipe(preset).draw(NAME, sizes, seed)?;
        let shape = [e, d + ROW_TAIL_BYTES];
        let table = shared_table(NAME, "weight", &shape, seeds.table, |seed| {
            let bytes = quantized_table(e, d, derive_str(seed, "weight"));
            Ok(HostTensor::new(DType::U8, shape.to_vec(), bytes)?)
        })?;
        Ok(bags.builder(seed, sizes)?.tensor("weight", table).build())
    }

    fn edge_sizes(&self, preset: Preset) -> Vec<Sizes> {
        vec![bags::one_bag(self.sizes(preset))]
    }

    fn oracle(&self, inputs: &InputSet) -> Result<Oracle, ProblemError> {
        let table = &inputs.tensors.get("weight")?.bytes;
        bags::pooled_oracle(NAME, inputs, |acc, _, r| {
            let (d, stride) = (acc.len(), acc.len() + ROW_TAIL_BYTES);
            let (scale, bias) = scale_bias(table, stride, r);
            for (acc, &q) in acc.iter_mut().zip(&table[r * stride..r * stride + d]) {
                *acc += q as f64 * scale + bias;
            }
        })
    }

    fn work(&self, inputs: &InputSet) -> Work {
        let c = Counts::of(inputs);
        let row_bytes = c.d + ROW_TAIL_BYTES as f64;
        c.forward_work(row_bytes, c.index_bytes(), c.b * c.d * 4.0, 2.0 * c.n * c.d)
    }

    crate::families::bags::bag_table_methods!();

    fn reference(&self) -> Vec<LaunchSpec> {
        // `embedding_bag_byte_impl`: `embedding_bag_nbits_rowwise_offsets_kernel<index_t, 8>
        // <<<output_size, dim3(1, 1, 1)>>>` — one single-thread block per bag (not the
        // `_embedding_bag_cuda` launch of problems 1 and 2).
        // Then the indices accessor's stride (1).
        let args = ["weight", "indices", "offsets", "out", "B", "D", "D + 8", "1"];
        vec![LaunchSpec::linear(
            "embedding_bag_int8_rowwise_reference",
            "B",
            1,
            &args,
        )]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::families::bags::{testing::assert_well_formed, Bags};
    use crate::spec::OracleOutput;
    use crate::testing::ci_set;
    crate::selftest::self_test_case!(EmbeddingBagInt8Rowwise);

    fn ci(seed: u64) -> InputSet {
        ci_set(&EmbeddingBagInt8Rowwise, seed)
    }

    #[test]
    fn rows_carry_their_scale_and_bias_after_the_bytes() {
        let table = quantized_table(1000, 40, 9);
        assert_eq!(table.len(), 1000 * 48);
        assert_eq!(table, quantized_table(1000, 40, 9), "deterministic");
        let mut seen = [0u32; 256];
        for r in 0..1000 {
            for &q in &table[r * 48..r * 48 + 40] {
                seen[q as usize] += 1;
            }
            let (scale, bias) = scale_bias(&table, 48, r);
            assert!((1.0 / 255.0..2.0 / 255.0).contains(&scale), "{scale}");
            assert!((bias + 128.0 * scale).abs() <= 0.05 + 1e-6, "{bias}");
            // Dequantized values stay within about [-1, 1].
            assert!((255.0 * scale + bias) < 1.06 && bias > -1.06);
        }
        // 40 000 bytes over 256 values: about 156 each.
        assert!(seen.iter().all(|&c| (90..230).contains(&c)), "{seen:?}");
    }

    #[test]
    fn inputs_are_well_formed_and_include_the_edge_bags() {
        let s = ci(5);
        assert_well_formed(&s, 64);
        assert_eq!(s.tensors.get("weight").unwrap().shape, vec![4096, 48]);
        assert_eq!(ci(5).tensors, s.tensors, "deterministic for a seed");
    }

    #[test]
    fn oracle_matches_a_direct_dequantized_sum() {
        let set = ci(3);
        let w = &set.tensors.get("weight").unwrap().bytes;
        let Bags { indices, offsets } = Bags::of(&set).unwrap();
        let OracleOutput::Float(out) = &EmbeddingBagInt8Rowwise.oracle(&set).unwrap()["out"] else {
            panic!()
        };
        let (b, c) = (9usize, 37usize);
        let expect: f64 = (offsets[b]..offsets[b + 1])
            .map(|j| {
                let r = indices[j as usize] as usize;
                let row = &w[r * 48..(r + 1) * 48];
                let scale = f32::from_le_bytes(row[40..44].try_into().unwrap()) as f64;
                let bias = f32::from_le_bytes(row[44..48].try_into().unwrap()) as f64;
                row[c] as f64 * scale + bias
            })
            .sum();
        assert!(offsets[b + 1] > offsets[b]);
        assert_eq!(out[b * 40 + c], expect);
        assert!(out[..40].iter().all(|&v| v == 0.0), "bag 0 is empty");
    }

    #[test]
    fn odd_widths_are_refused_and_work_counts_fused_rows() {
        let p = EmbeddingBagInt8Rowwise;
        let mut sizes = p.sizes(Preset::Ci);
        sizes.insert("D".into(), 42);
        assert!(p.generate(Preset::Ci, &sizes, 1.into()).is_err());
        let set = ci(3);
        let w = p.work(&set);
        let n = set.sizes["N"] as f64;
        assert_eq!(
            w.logical_bytes,
            n * 48.0 + n * 8.0 + 65.0 * 8.0 + 64.0 * 40.0 * 4.0
        );
        assert!(w.compulsory_bytes < w.logical_bytes);
    }
}
