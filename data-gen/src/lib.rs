//! DLRM-Bench input generators: realistic skewed recommender inputs (Zipf row indices with
//! scattered hot rows, heavy-tailed pooling factors, dense values) and safetensors I/O.
//!
//! Everything is a deterministic function of a seed, independent of the rayon thread count:
//! random streams are split into fixed-size chunks, each with its own RNG seeded from
//! (seed, stream name, chunk index) through [`seed::derive`].

pub mod error;
pub mod indices;
pub mod permutation;
pub mod pooling;
pub mod seed;
pub mod tensor;
pub mod values;
pub mod zipf;

pub use error::DataGenError;
pub use indices::{bag_indices, lookup_indices, IndexRecipe, IndexSampler};
pub use permutation::RowPermutation;
pub use pooling::{offsets_from_lengths, Pooling};
pub use tensor::{DType, HostTensor, TensorSet};
pub use values::{uniform_f32, uniform_f32_at};
pub use zipf::BoundedZipf;
