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
use super::bags::distinct_rows;
use super::bags::{bag_lengths, bag_stats, size};
use crate::launch::LaunchSpec;
use crate::spec::{
    InputSet, OracleOutput, Preset, Problem, ProblemError, Role, Sizes, TensorSpec, Work,
};
use data_gen::seed::{derive_str, mix64, GOLDEN_GAMMA};
use data_gen::{
    bag_indices, offsets_from_lengths, uniform_f32, DType, HostTensor, IndexRecipe, Pooling,
    TensorSet,
};
use rayon::prelude::*;
use serde_json::json;
use std::collections::BTreeMap;

/// The problem.
pub struct EmbeddingBagInt8Rowwise;

const NAME: &str = "embedding_bag_int8_rowwise";
/// Zipf exponent of the row indices (FBGEMM's recommended inference value).
const ALPHA: f64 = 1.09;
/// Bytes of scale and bias after the D quantized bytes of a row.
pub const ROW_TAIL_BYTES: usize = 8;

fn pooling(preset: Preset) -> Pooling {
    match preset {
        Preset::Ci => Pooling::LogNormal {
            mean: 8.0,
            sigma: 1.0,
            max: 64,
        },
        Preset::Small | Preset::Full => Pooling::LogNormal {
            mean: 30.0,
            sigma: 1.0,
            max: 1000,
        },
    }
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
    fn number(&self) -> u32 {
        4
    }

    fn name(&self) -> &'static str {
        NAME
    }

    fn summary(&self) -> &'static str {
        "8-bit row-wise quantized table (D bytes + fp32 scale + fp32 bias per row), sum pooling, fp32 out"
    }

    fn tensors(&self) -> Vec<TensorSpec> {
        vec![
            TensorSpec {
                name: "weight",
                dtype: DType::U8,
                shape: &["E", "D + 8"],
                role: Role::Input,
            },
            TensorSpec {
                name: "indices",
                dtype: DType::I64,
                shape: &["N"],
                role: Role::Input,
            },
            TensorSpec {
                name: "offsets",
                dtype: DType::I64,
                shape: &["B + 1"],
                role: Role::Input,
            },
            TensorSpec {
                name: "out",
                dtype: DType::F32,
                shape: &["B", "D"],
                role: Role::Output,
            },
        ]
    }

    fn sizes(&self, preset: Preset) -> Sizes {
        let (e, d, b): (i64, i64, i64) = match preset {
            // D = 40: a multiple of 4 (PyTorch's requirement) but not of 32.
            Preset::Ci => (4096, 40, 64),
            Preset::Small => (2 << 20, 128, 16384),
            Preset::Full => (16 << 20, 128, 65536),
        };
        [("E", e), ("D", d), ("B", b)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect()
    }

    fn recipe(&self, preset: Preset) -> serde_json::Value {
        json!({
            "indices": {"distribution": "bounded_zipf", "alpha": ALPHA, "scatter_hot_rows": true},
            "pooling": pooling(preset),
            "weight": {
                "layout": "per row: D uint8, fp32 scale, fp32 bias (little-endian); stride D + 8 bytes",
                "q": "uniform over 0..=255",
                "scale": {"distribution": "uniform", "low": 1.0 / 255.0, "high": 2.0 / 255.0},
                "bias": "-128 * scale + uniform[-0.05, 0.05)",
            },
            "edge_cases": ["bag 0 empty", "bag B/2 of the longest length"],
        })
    }

    fn generate(&self, preset: Preset, sizes: &Sizes, seed: u64) -> Result<InputSet, ProblemError> {
        let (e, d, b) = (
            size(sizes, NAME, "E")?,
            size(sizes, NAME, "D")?,
            size(sizes, NAME, "B")?,
        );
        if d % 4 != 0 {
            return Err(ProblemError::Invalid {
                problem: NAME.into(),
                message: format!("D = {d} must be a multiple of 4 (as PyTorch requires)"),
            });
        }
        let lengths = bag_lengths(&pooling(preset), b as usize, seed, 0.0)?;
        let recipe = IndexRecipe {
            rows: e as u64,
            alpha: ALPHA,
            scatter_hot_rows: true,
        };
        let indices = bag_indices(&recipe, &lengths, derive_str(seed, "indices"))?;
        let offsets = offsets_from_lengths(&lengths);
        let n = indices.len();
        let table = quantized_table(e as usize, d as usize, derive_str(seed, "weight"));
        let mut sizes = sizes.clone();
        sizes.insert("N".into(), n as i64);
        let mut tensors = TensorSet::new();
        tensors.insert(
            "weight",
            HostTensor::from_u8(vec![e as usize, d as usize + ROW_TAIL_BYTES], table)?,
        );
        tensors.insert("indices", HostTensor::from_i64(vec![n], indices)?);
        tensors.insert(
            "offsets",
            HostTensor::from_i64(vec![offsets.len()], offsets)?,
        );
        Ok(InputSet {
            seed,
            sizes,
            scalars: BTreeMap::new(),
            tensors,
        })
    }

    fn edge_sizes(&self, preset: Preset) -> Vec<Sizes> {
        let mut one_bag = self.sizes(preset);
        one_bag.insert("B".into(), 1);
        vec![one_bag]
    }

    fn oracle(&self, inputs: &InputSet) -> Result<BTreeMap<String, OracleOutput>, ProblemError> {
        let d = size(&inputs.sizes, NAME, "D")? as usize;
        let stride = d + ROW_TAIL_BYTES;
        let table = &inputs.tensors.get("weight")?.bytes;
        let indices = inputs.tensors.get("indices")?.to_i64_vec()?;
        let offsets = inputs.tensors.get("offsets")?.to_i64_vec()?;
        let bags = offsets.len() - 1;
        let mut out = vec![0.0f64; bags * d];
        out.par_chunks_mut(d)
            .enumerate()
            .for_each(|(bag, row_out)| {
                for &r in &indices[offsets[bag] as usize..offsets[bag + 1] as usize] {
                    let r = r as usize;
                    let (scale, bias) = scale_bias(table, stride, r);
                    let q = &table[r * stride..r * stride + d];
                    for (acc, &q) in row_out.iter_mut().zip(q) {
                        *acc += q as f64 * scale + bias;
                    }
                }
            });
        Ok([("out".to_string(), OracleOutput::Float(out))]
            .into_iter()
            .collect())
    }

    fn work(&self, inputs: &InputSet) -> Work {
        let s = |k: &str| inputs.sizes.get(k).copied().unwrap_or(0) as f64;
        let (e, d, b, n) = (s("E"), s("D"), s("B"), s("N"));
        let distinct = inputs
            .tensors
            .get("indices")
            .ok()
            .and_then(|t| t.to_i64_vec().ok())
            .map(|idx| distinct_rows(&idx, e as usize))
            .unwrap_or(0) as f64;
        let row_bytes = d + ROW_TAIL_BYTES as f64;
        let index_bytes = n * 8.0 + (b + 1.0) * 8.0;
        let out_bytes = b * d * 4.0;
        Work {
            compulsory_bytes: distinct * row_bytes + index_bytes + out_bytes,
            logical_bytes: n * row_bytes + index_bytes + out_bytes,
            flops: 2.0 * n * d,
        }
    }

    fn input_stats(&self, inputs: &InputSet) -> serde_json::Value {
        let rows = inputs.sizes.get("E").copied().unwrap_or(0) as usize;
        match (
            inputs.tensors.get("offsets").map(|t| t.to_i64_vec()),
            inputs.tensors.get("indices").map(|t| t.to_i64_vec()),
        ) {
            (Ok(Ok(offsets)), Ok(Ok(indices))) => bag_stats(&offsets, &indices, rows),
            _ => serde_json::Value::Null,
        }
    }

    fn reference(&self) -> Vec<LaunchSpec> {
        // `embedding_bag_byte_impl`: `embedding_bag_nbits_rowwise_offsets_kernel<index_t, 8>
        // <<<output_size, dim3(1, 1, 1)>>>` — one single-thread block per bag.
        vec![LaunchSpec {
            kernel: "embedding_bag_int8_rowwise_reference".into(),
            grid: ["B".into(), 1.into(), 1.into()],
            block: [1.into(), 1.into(), 1.into()],
            shared_bytes: 0.into(),
            args: ["weight", "indices", "offsets", "out", "B", "D", "D + 8"]
                .map(String::from)
                .to_vec(),
        }]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selftest::self_test;

    #[test]
    fn self_test_rejects_degenerate_outputs() {
        self_test(&EmbeddingBagInt8Rowwise, Preset::Ci).unwrap();
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
    fn oracle_matches_a_direct_dequantized_sum() {
        let p = EmbeddingBagInt8Rowwise;
        let set = p.generate(Preset::Ci, &p.sizes(Preset::Ci), 3).unwrap();
        let w = &set.tensors.get("weight").unwrap().bytes;
        let idx = set.tensors.get("indices").unwrap().to_i64_vec().unwrap();
        let off = set.tensors.get("offsets").unwrap().to_i64_vec().unwrap();
        let OracleOutput::Float(out) = &p.oracle(&set).unwrap()["out"] else {
            panic!()
        };
        let (b, c) = (9usize, 37usize);
        let expect: f64 = (off[b]..off[b + 1])
            .map(|j| {
                let r = idx[j as usize] as usize;
                let row = &w[r * 48..(r + 1) * 48];
                let scale = f32::from_le_bytes(row[40..44].try_into().unwrap()) as f64;
                let bias = f32::from_le_bytes(row[44..48].try_into().unwrap()) as f64;
                row[c] as f64 * scale + bias
            })
            .sum();
        assert!(off[b + 1] > off[b]);
        assert_eq!(out[b * 40 + c], expect);
        assert!(out[..40].iter().all(|&v| v == 0.0), "bag 0 is empty");
    }

    #[test]
    fn odd_widths_are_refused_and_work_counts_fused_rows() {
        let p = EmbeddingBagInt8Rowwise;
        let mut sizes = p.sizes(Preset::Ci);
        sizes.insert("D".into(), 42);
        assert!(p.generate(Preset::Ci, &sizes, 1).is_err());
        let set = p.generate(Preset::Ci, &p.sizes(Preset::Ci), 3).unwrap();
        let w = p.work(&set);
        let n = set.sizes["N"] as f64;
        assert_eq!(
            w.logical_bytes,
            n * 48.0 + n * 8.0 + 65.0 * 8.0 + 64.0 * 40.0 * 4.0
        );
        assert!(w.compulsory_bytes < w.logical_bytes);
    }
}
