//! One generated input set (seed, sizes with the data-dependent ones, float scalars, tensors)
//! and the builder every problem's `generate` uses to make one.
use crate::error::ProblemError;
use crate::sizes::Sizes;
use data_gen::{HostTensor, TensorSet};
use std::collections::BTreeMap;

/// The seeds of one input set. `table` draws the embedding tables (and the initial state an
/// in-place update starts from), which every input set of a run shares, as one table serves
/// every batch of a training run: so a run generates, stores and uploads each table once, while
/// everything particular to a set (indices, lengths, per-sample weights, dense inputs) comes from
/// `set`. A single seed (`Seeds::from(seed)`) is both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Seeds {
    pub set: u64,
    pub table: u64,
}

impl From<u64> for Seeds {
    fn from(seed: u64) -> Self {
        Seeds {
            set: seed,
            table: seed,
        }
    }
}

/// Table `tensor` of `problem` with `shape`, made by `make` from `seed` once per process while
/// any input set holds it ([`data_gen::shared_tensor`]): the input sets of a run share its
/// bytes. `make` must depend on nothing but `seed` and `shape`.
pub fn shared_table(
    problem: &str,
    tensor: &str,
    shape: &[usize],
    seed: u64,
    make: impl FnOnce(u64) -> Result<HostTensor, ProblemError>,
) -> Result<HostTensor, ProblemError> {
    let key = format!("{problem}/{tensor}/{shape:?}/{seed}");
    data_gen::shared_tensor(&key, || make(seed))
}

/// One generated input set: its seed, the sizes (with data-dependent ones), float scalars
/// (learning rate, epsilon, ...: passed to kernels as f32 or f64 by the parameter's width), and
/// the tensors (inputs, and the initial value of every in-out tensor).
#[derive(Clone, Debug, Default)]
pub struct InputSet {
    pub seed: u64,
    pub sizes: Sizes,
    pub scalars: BTreeMap<String, f64>,
    pub tensors: TensorSet,
}

impl InputSet {
    /// Starts an input set of `seed` with the preset's `sizes`.
    pub fn builder(seed: u64, sizes: &Sizes) -> InputSetBuilder {
        InputSetBuilder(InputSet {
            seed,
            sizes: sizes.clone(),
            ..InputSet::default()
        })
    }

    /// Tensor `name` as i64 values (any integer dtype).
    pub fn i64s(&self, name: &str) -> Result<Vec<i64>, ProblemError> {
        Ok(self.tensors.get(name)?.to_i64_vec()?)
    }

    /// Tensor `name` as f32 values (any float dtype).
    pub fn f32s(&self, name: &str) -> Result<Vec<f32>, ProblemError> {
        Ok(self.tensors.get(name)?.to_f32_vec())
    }

    /// Size symbol `name` as a count, 0 when it is not set.
    pub fn count(&self, name: &str) -> usize {
        crate::sizes::size_or_zero(&self.sizes, name)
    }
}

/// Builds an [`InputSet`]: sizes, scalars and tensors added by name.
pub struct InputSetBuilder(InputSet);

impl InputSetBuilder {
    /// Sets a (data-dependent) size symbol, e.g. `N`, the number of lookups.
    pub fn size(mut self, name: &str, value: usize) -> Self {
        self.0.sizes.insert(name.into(), value as i64);
        self
    }

    /// Sets a float scalar (`lr`, `eps`).
    pub fn scalar(mut self, name: &str, value: f64) -> Self {
        self.0.scalars.insert(name.into(), value);
        self
    }

    /// Adds a tensor.
    pub fn tensor(mut self, name: &str, tensor: HostTensor) -> Self {
        self.0.tensors.insert(name, tensor);
        self
    }

    /// Adds an i64 tensor of `shape`.
    pub fn i64(self, name: &str, shape: &[usize], v: Vec<i64>) -> Result<Self, ProblemError> {
        Ok(self.tensor(name, HostTensor::from_i64(shape.to_vec(), v)?))
    }

    /// Adds an i32 tensor of `shape`.
    pub fn i32(self, name: &str, shape: &[usize], v: Vec<i32>) -> Result<Self, ProblemError> {
        Ok(self.tensor(name, HostTensor::from_i32(shape.to_vec(), v)?))
    }

    /// Adds an f32 tensor of `shape`.
    pub fn f32(self, name: &str, shape: &[usize], v: Vec<f32>) -> Result<Self, ProblemError> {
        Ok(self.tensor(name, HostTensor::from_f32(shape.to_vec(), v)?))
    }

    /// Adds a bf16 tensor of `shape`.
    pub fn bf16(
        self,
        name: &str,
        shape: &[usize],
        v: Vec<half::bf16>,
    ) -> Result<Self, ProblemError> {
        Ok(self.tensor(name, HostTensor::from_bf16(shape.to_vec(), v)?))
    }

    /// Adds an f16 tensor of `shape`.
    pub fn f16(self, name: &str, shape: &[usize], v: Vec<half::f16>) -> Result<Self, ProblemError> {
        Ok(self.tensor(name, HostTensor::from_f16(shape.to_vec(), v)?))
    }

    /// Adds a u8 tensor of `shape`.
    pub fn u8(self, name: &str, shape: &[usize], v: Vec<u8>) -> Result<Self, ProblemError> {
        Ok(self.tensor(name, HostTensor::from_u8(shape.to_vec(), v)?))
    }

    /// The input set.
    pub fn build(self) -> InputSet {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sizes::sizes_of;

    #[test]
    fn the_builder_sets_sizes_scalars_and_tensors() {
        let set = InputSet::builder(9, &sizes_of(&[("B", 2)]))
            .size("N", 3)
            .scalar("lr", 0.5)
            .i64("indices", &[3], vec![1, 2, 3])
            .unwrap()
            .build();
        assert_eq!(set.seed, 9);
        assert_eq!((set.count("B"), set.count("N"), set.count("X")), (2, 3, 0));
        assert_eq!(set.scalars["lr"], 0.5);
        assert_eq!(set.i64s("indices").unwrap(), vec![1, 2, 3]);
        assert!(set.i64s("offsets").is_err());
    }
}
