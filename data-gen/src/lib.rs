//! DLRM-Bench input generators: realistic skewed recommender inputs (Zipf row indices with
//! scattered hot rows, heavy-tailed pooling factors, dense values) and safetensors I/O.
//!
//! Everything is a deterministic function of a seed, independent of the rayon thread count:
//! random streams are split into fixed-size chunks, each with its own RNG seeded from
//! (seed, stream name, chunk index) through [`seed::derive`].

pub mod dtype;
pub mod error;
pub mod fbgemm;
pub mod indices;
pub mod permutation;
pub mod pooling;
pub mod seed;
pub mod shared;
pub mod stats;
pub mod tables;
pub mod tensor;
pub mod trace;
pub mod values;
pub mod zipf;

pub use error::DataGenError;
pub use fbgemm::{apply_reuse, fbgemm_bag_indices, FbgemmRecipe};
pub use indices::{bag_indices, lookup_indices, IndexRecipe, IndexSampler};
pub use permutation::RowPermutation;
pub use pooling::{offsets_from_lengths, table_lengths, Pooling};
pub use shared::{shared_key, shared_tensor};
pub use stats::{bag_stats, InputStats};
pub use tables::{TableBatch, TableSet, TableSetRecipe, TableSpec};
pub use tensor::{Bytes, DType, HostTensor, TensorSet};
pub use trace::Trace;
pub use values::{fill_uniform_bytes, uniform_bytes, uniform_f32, uniform_f32_at};
pub use zipf::BoundedZipf;
