//! Host tensors (dtype, shape, little-endian bytes) and named tensor sets stored as one
//! `.safetensors` file with string metadata, the format `dlrm-bench gen` shares with PyTorch.

use rayon::prelude::*;
use std::collections::{BTreeMap, HashMap};
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use half::{bf16, f16};

pub use crate::dtype::DType;
use crate::error::DataGenError;

#[cfg(target_endian = "big")]
compile_error!("data-gen stores tensors as native bytes and assumes a little-endian host");

/// A tensor's bytes, shared: a clone is a reference (the input sets of a run share their
/// embedding tables, gigabytes each), and writing through `DerefMut` first copies bytes that
/// are shared (copy on write), so no holder ever sees another's change.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Bytes(Arc<Vec<u8>>);

impl Bytes {
    /// Whether `self` and `other` are the same bytes in memory (not merely equal).
    pub fn same_as(&self, other: &Bytes) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The bytes as a vector (a copy only when they are shared).
    pub fn into_vec(self) -> Vec<u8> {
        Arc::try_unwrap(self.0).unwrap_or_else(|shared| (*shared).clone())
    }

    /// A handle that does not keep the bytes alive ([`Bytes::upgrade`] gets them back while
    /// anyone still holds them).
    pub fn downgrade(&self) -> std::sync::Weak<Vec<u8>> {
        Arc::downgrade(&self.0)
    }

    /// Whether `weak` refers to these bytes.
    pub fn is(&self, weak: &std::sync::Weak<Vec<u8>>) -> bool {
        std::ptr::eq(weak.as_ptr(), Arc::as_ptr(&self.0))
    }

    /// The bytes behind `weak`, if any holder is left.
    pub fn upgrade(weak: &std::sync::Weak<Vec<u8>>) -> Option<Bytes> {
        weak.upgrade().map(Bytes)
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(v: Vec<u8>) -> Self {
        Bytes(Arc::new(v))
    }
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl DerefMut for Bytes {
    fn deref_mut(&mut self) -> &mut [u8] {
        Arc::make_mut(&mut self.0).as_mut_slice()
    }
}

impl AsRef<[u8]> for Bytes {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl PartialEq<Vec<u8>> for Bytes {
    fn eq(&self, other: &Vec<u8>) -> bool {
        self.0.as_slice() == other.as_slice()
    }
}

impl PartialEq<Bytes> for Vec<u8> {
    fn eq(&self, other: &Bytes) -> bool {
        self.as_slice() == other.0.as_slice()
    }
}

impl std::fmt::Debug for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const SHOWN: usize = 16;
        write!(
            f,
            "Bytes({} bytes: {:?}",
            self.0.len(),
            &self.0[..self.0.len().min(SHOWN)]
        )?;
        if self.0.len() > SHOWN {
            write!(f, " ...")?;
        }
        write!(f, ")")
    }
}

/// A host tensor: dtype, shape, little-endian bytes (row-major). The bytes carry no alignment
/// guarantee, so the typed accessors copy out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostTensor {
    /// Element type.
    pub dtype: DType,
    /// Shape (row-major); `[]` is a scalar.
    pub shape: Vec<usize>,
    /// `numel * dtype.size_bytes()` little-endian bytes.
    pub bytes: Bytes,
}

impl HostTensor {
    /// A tensor from raw bytes, checked against shape and dtype.
    pub fn new(
        dtype: DType,
        shape: Vec<usize>,
        bytes: impl Into<Bytes>,
    ) -> Result<Self, DataGenError> {
        let bytes = bytes.into();
        let expected = shape.iter().product::<usize>() * dtype.size_bytes();
        if bytes.len() != expected {
            return Err(DataGenError::ShapeMismatch {
                shape,
                dtype,
                expected,
                actual: bytes.len(),
            });
        }
        Ok(Self {
            dtype,
            shape,
            bytes,
        })
    }

    /// A zero-filled tensor.
    pub fn zeros(dtype: DType, shape: Vec<usize>) -> Self {
        let len = shape.iter().product::<usize>() * dtype.size_bytes();
        Self {
            dtype,
            shape,
            bytes: vec![0; len].into(),
        }
    }

    /// The bytes of `data`, copied in parallel (tensors of ~1 GB are common: a serial copy
    /// and its page faults take a second), as a tensor of `dtype` (whose element size must
    /// divide them as `shape` says).
    pub fn from_pod<T: bytemuck::Pod>(
        dtype: DType,
        shape: Vec<usize>,
        data: &[T],
    ) -> Result<Self, DataGenError> {
        let data: &[u8] = bytemuck::cast_slice(data);
        let mut bytes = vec![0u8; data.len()];
        bytes
            .par_chunks_mut(CONVERT_CHUNK)
            .zip(data.par_chunks(CONVERT_CHUNK))
            .for_each(|(to, from)| to.copy_from_slice(from));
        Self::new(dtype, shape, bytes)
    }

    /// From f32 values.
    pub fn from_f32(shape: Vec<usize>, data: Vec<f32>) -> Result<Self, DataGenError> {
        Self::from_pod(DType::F32, shape, &data)
    }

    /// From f64 values.
    pub fn from_f64(shape: Vec<usize>, data: Vec<f64>) -> Result<Self, DataGenError> {
        Self::from_pod(DType::F64, shape, &data)
    }

    /// From bf16 values.
    pub fn from_bf16(shape: Vec<usize>, data: Vec<bf16>) -> Result<Self, DataGenError> {
        Self::from_pod(DType::BF16, shape, &data)
    }

    /// From f16 values.
    pub fn from_f16(shape: Vec<usize>, data: Vec<f16>) -> Result<Self, DataGenError> {
        Self::from_pod(DType::F16, shape, &data)
    }

    /// From i64 values.
    pub fn from_i64(shape: Vec<usize>, data: Vec<i64>) -> Result<Self, DataGenError> {
        Self::from_pod(DType::I64, shape, &data)
    }

    /// From i32 values.
    pub fn from_i32(shape: Vec<usize>, data: Vec<i32>) -> Result<Self, DataGenError> {
        Self::from_pod(DType::I32, shape, &data)
    }

    /// From bytes as u8 elements.
    pub fn from_u8(shape: Vec<usize>, data: Vec<u8>) -> Result<Self, DataGenError> {
        Self::new(DType::U8, shape, data)
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Copy the elements out as `T`; the caller has checked that `T` matches the dtype.
    fn pod_vec<T: bytemuck::Pod + Send>(&self) -> Vec<T> {
        self.map_elements(|x: T| x)
    }

    /// `f` of every element read as `S` (the caller has checked that `S` matches the dtype),
    /// in parallel over chunks of the (unaligned) bytes.
    fn map_elements<S: bytemuck::Pod, T: bytemuck::Pod + Send>(
        &self,
        f: impl Fn(S) -> T + Sync,
    ) -> Vec<T> {
        let size = std::mem::size_of::<S>();
        let mut out = vec![T::zeroed(); self.bytes.len() / size];
        let per_task = (CONVERT_CHUNK / size).max(1);
        out.par_chunks_mut(per_task)
            .zip(self.bytes.par_chunks(per_task * size))
            .for_each(|(to, from)| {
                for (x, e) in to.iter_mut().zip(from.chunks_exact(size)) {
                    *x = f(bytemuck::pod_read_unaligned(e));
                }
            });
        out
    }

    /// The elements as f64 (exact for every dtype except i64 beyond 2^53).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        match self.dtype {
            DType::F64 => self.pod_vec(),
            DType::F32 => self.map_elements(|x: f32| f64::from(x)),
            DType::F16 => self.map_elements(|x: f16| f64::from(x)),
            DType::BF16 => self.map_elements(|x: bf16| f64::from(x)),
            DType::I64 => self.map_elements(|x: i64| x as f64),
            DType::I32 => self.map_elements(|x: i32| f64::from(x)),
            DType::U8 => self.map_elements(|x: u8| f64::from(x)),
        }
    }

    /// The elements as f32 (rounded from f64 and large integers).
    pub fn to_f32_vec(&self) -> Vec<f32> {
        match self.dtype {
            DType::F32 => self.pod_vec(),
            DType::F64 => self.map_elements(|x: f64| x as f32),
            DType::F16 => self.map_elements(|x: f16| f32::from(x)),
            DType::BF16 => self.map_elements(|x: bf16| f32::from(x)),
            DType::I64 => self.map_elements(|x: i64| x as f32),
            DType::I32 => self.map_elements(|x: i32| x as f32),
            DType::U8 => self.map_elements(|x: u8| f32::from(x)),
        }
    }

    /// The elements as i64; an error for floating-point dtypes.
    pub fn to_i64_vec(&self) -> Result<Vec<i64>, DataGenError> {
        Ok(match self.dtype {
            DType::I64 => self.pod_vec(),
            DType::I32 => self.map_elements(|x: i32| i64::from(x)),
            DType::U8 => self.map_elements(|x: u8| i64::from(x)),
            dtype => {
                return Err(DataGenError::DTypeMismatch {
                    op: "read as integers",
                    dtype,
                })
            }
        })
    }

    /// The elements as bf16, when the dtype is bf16.
    pub fn to_bf16_vec(&self) -> Result<Vec<bf16>, DataGenError> {
        self.expect(DType::BF16, "read as bf16")?;
        Ok(self.pod_vec())
    }

    /// The elements as f16, when the dtype is f16.
    pub fn to_f16_vec(&self) -> Result<Vec<f16>, DataGenError> {
        self.expect(DType::F16, "read as f16")?;
        Ok(self.pod_vec())
    }

    fn expect(&self, dtype: DType, op: &'static str) -> Result<(), DataGenError> {
        if self.dtype == dtype {
            Ok(())
        } else {
            Err(DataGenError::DTypeMismatch {
                op,
                dtype: self.dtype,
            })
        }
    }
}

/// Bytes each parallel task of the typed copies and conversions of [`HostTensor`] reads (a
/// work grain only: the values do not depend on it).
const CONVERT_CHUNK: usize = 1 << 18;

/// Bytes each parallel task of [`TensorSet::write`] and [`TensorSet::read`] moves.
const IO_CHUNK: usize = 64 << 20;

/// The largest safetensors header [`TensorSet::read`] accepts (the format's own limit).
const MAX_HEADER_BYTES: u64 = 100_000_000;

/// Named tensors + string metadata, written/read as one `.safetensors` file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TensorSet {
    /// Tensors by name.
    pub tensors: BTreeMap<String, HostTensor>,
    /// Free-form string metadata (the file header's `__metadata__`).
    pub metadata: BTreeMap<String, String>,
}

impl TensorSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add or replace a tensor.
    pub fn insert(&mut self, name: impl Into<String>, tensor: HostTensor) {
        self.tensors.insert(name.into(), tensor);
    }

    /// The tensor `name`; the error names it and lists what is there.
    pub fn get(&self, name: &str) -> Result<&HostTensor, DataGenError> {
        self.tensors
            .get(name)
            .ok_or_else(|| self.missing(name, None))
    }

    fn missing(&self, name: &str, file: Option<&Path>) -> DataGenError {
        DataGenError::MissingTensor {
            name: name.to_owned(),
            file: file.map(Path::to_path_buf),
            available: self.tensors.keys().cloned().collect(),
        }
    }

    /// Write the set to `path` (created or truncated): [`write_views`] of its tensors.
    pub fn write(&self, path: &Path) -> Result<(), DataGenError> {
        let views = self
            .tensors
            .iter()
            .map(|(name, t)| {
                let view = TensorView {
                    dtype: t.dtype,
                    shape: t.shape.clone(),
                    bytes: &t.bytes[..],
                };
                (name.clone(), view)
            })
            .collect();
        write_views(path, &views, &self.metadata)
    }

    /// Read a set written by [`TensorSet::write`] (or any safetensors file of supported dtypes).
    /// The header is parsed and checked by `safetensors`; each tensor's bytes are then read from
    /// the file straight into its own buffer (one copy, so gigabyte tables load at file speed).
    pub fn read(path: &Path) -> Result<Self, DataGenError> {
        let file = FileLayout::open(path)?;
        let mut tensors = BTreeMap::new();
        for t in &file.tensors {
            let mut bytes = vec![0u8; t.len];
            file.read_into(t, &mut bytes)?;
            tensors.insert(
                t.name.clone(),
                HostTensor::new(t.dtype, t.shape.clone(), bytes)?,
            );
        }
        Ok(Self {
            tensors,
            metadata: file.metadata,
        })
    }

    /// [`TensorSet::read`], then check that every name in `required` is present; a missing one
    /// is reported with the file's path.
    pub fn read_required(path: &Path, required: &[&str]) -> Result<Self, DataGenError> {
        let set = Self::read(path)?;
        if let Some(name) = required.iter().find(|n| !set.tensors.contains_key(**n)) {
            return Err(set.missing(name, Some(path)));
        }
        Ok(set)
    }
}

/// An I/O error on `path`, for `map_err`.
fn io_error(path: &Path) -> impl Fn(std::io::Error) -> DataGenError + Copy + '_ {
    move |source| DataGenError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A safetensors error on `path`, for `map_err`.
fn safetensors_error(
    path: &Path,
) -> impl Fn(safetensors::SafeTensorError) -> DataGenError + Copy + '_ {
    move |source| DataGenError::Safetensors {
        path: path.to_path_buf(),
        source,
    }
}

/// One tensor of a file ([`FileLayout`]): where its bytes are.
pub struct FileTensor {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// Its first byte's offset in the file, and its length in bytes.
    pub at: u64,
    pub len: usize,
}

/// A safetensors file opened and its header checked (by `safetensors`: the offsets, the data
/// length against the file's): what it holds, to read each tensor into a buffer of the
/// caller's (one copy, from the file straight into, say, a `Vec<f64>`).
pub struct FileLayout {
    file: std::fs::File,
    path: PathBuf,
    pub metadata: BTreeMap<String, String>,
    pub tensors: Vec<FileTensor>,
}

impl FileLayout {
    /// Opens `path` and reads its header.
    pub fn open(path: &Path) -> Result<Self, DataGenError> {
        use std::os::unix::fs::FileExt;
        let (io_err, st_err) = (io_error(path), safetensors_error(path));
        let file = std::fs::File::open(path).map_err(io_err)?;
        let file_len = file.metadata().map_err(io_err)?.len();
        let mut n = [0u8; 8];
        file.read_exact_at(&mut n, 0)
            .map_err(|_| st_err(safetensors::SafeTensorError::HeaderTooSmall))?;
        let n = u64::from_le_bytes(n);
        if n > MAX_HEADER_BYTES || 8 + n > file_len {
            return Err(st_err(safetensors::SafeTensorError::InvalidHeaderLength));
        }
        let mut header = vec![0u8; n as usize];
        file.read_exact_at(&mut header, 8).map_err(io_err)?;
        let header: safetensors::tensor::Metadata =
            serde_json::from_slice(&header).map_err(|e| {
                st_err(safetensors::SafeTensorError::InvalidHeaderDeserialization(
                    e,
                ))
            })?;
        if 8 + n + header.data_len() as u64 != file_len {
            return Err(st_err(
                safetensors::SafeTensorError::MetadataIncompleteBuffer,
            ));
        }
        let metadata = header
            .metadata()
            .as_ref()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        let mut tensors = Vec::new();
        for name in header.offset_keys() {
            let info = header.info(&name).expect("a key of the header");
            let dtype = DType::from_safetensors(info.dtype).ok_or_else(|| {
                DataGenError::UnsupportedDType {
                    tensor: name.clone(),
                    dtype: info.dtype.to_string(),
                    path: path.to_path_buf(),
                }
            })?;
            let (begin, end) = info.data_offsets;
            tensors.push(FileTensor {
                name,
                dtype,
                shape: info.shape.clone(),
                at: 8 + n + begin as u64,
                len: end - begin,
            });
        }
        Ok(FileLayout {
            file,
            path: path.to_path_buf(),
            metadata,
            tensors,
        })
    }

    /// Reads tensor `t`'s bytes into `buf` (exactly `t.len` bytes long), in parallel chunks.
    pub fn read_into(&self, t: &FileTensor, buf: &mut [u8]) -> Result<(), DataGenError> {
        use std::os::unix::fs::FileExt;
        assert_eq!(buf.len(), t.len, "a buffer the size of `{}`", t.name);
        buf.par_chunks_mut(IO_CHUNK)
            .enumerate()
            .try_for_each(|(c, chunk)| self.file.read_exact_at(chunk, t.at + (c * IO_CHUNK) as u64))
            .map_err(|source| DataGenError::Io {
                path: self.path.clone(),
                source,
            })
    }
}

/// A tensor to write whose bytes are borrowed (an oracle's values, written without a copy).
pub struct TensorView<'a> {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub bytes: &'a [u8],
}

/// Writes `tensors` and `metadata` as a safetensors file at `path` (created or truncated). The
/// header is built and checked by `safetensors`; the bytes are then written in parallel chunks
/// at their offsets (a table of gigabytes goes to a memory-backed file at memory speed).
pub fn write_views(
    path: &Path,
    tensors: &BTreeMap<String, TensorView<'_>>,
    metadata: &BTreeMap<String, String>,
) -> Result<(), DataGenError> {
    use std::os::unix::fs::FileExt;
    let (io_err, st_err) = (io_error(path), safetensors_error(path));
    let mut offset = 0;
    let mut infos = Vec::new();
    for (name, t) in tensors {
        let info = safetensors::tensor::TensorInfo {
            dtype: t.dtype.into(),
            shape: t.shape.clone(),
            data_offsets: (offset, offset + t.bytes.len()),
        };
        offset += t.bytes.len();
        infos.push((name.clone(), info));
    }
    let metadata: HashMap<String, String> = metadata
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let header = safetensors::tensor::Metadata::new(Some(metadata), infos).map_err(st_err)?;
    let mut header = serde_json::to_vec(&header).expect("a header serialises");
    // Padded with spaces so the data starts 8-byte aligned, as `safetensors` writes it.
    header.resize(header.len().next_multiple_of(8), b' ');
    let start = 8 + header.len() as u64;
    let file = std::fs::File::create(path).map_err(io_err)?;
    file.set_len(start + offset as u64).map_err(io_err)?;
    file.write_all_at(&(header.len() as u64).to_le_bytes(), 0)
        .map_err(io_err)?;
    file.write_all_at(&header, 8).map_err(io_err)?;
    let mut at = start;
    for t in tensors.values() {
        t.bytes
            .par_chunks(IO_CHUNK)
            .enumerate()
            .try_for_each(|(c, chunk)| file.write_all_at(chunk, at + (c * IO_CHUNK) as u64))
            .map_err(io_err)?;
        at += t.bytes.len() as u64;
    }
    Ok(())
}

/// A path under the system temp dir unique to this process and `tag` (for tests and scratch
/// files).
pub fn scratch_path(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("data-gen-{}-{tag}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::{uniform_bf16, uniform_f32};
    use safetensors::Dtype;

    #[test]
    fn dtype_table() {
        for d in DType::ALL {
            assert_eq!(DType::from_safetensors(d.to_safetensors()), Some(d));
            assert_eq!(DType::from_name(d.name()), Some(d));
            assert_eq!(d.size_bytes() * 8, d.to_safetensors().bitsize());
        }
        assert_eq!(DType::BF16.name(), "bf16");
        assert_eq!(DType::from_safetensors(Dtype::U16), None);
        assert_eq!(serde_json::to_string(&DType::BF16).unwrap(), "\"bf16\"");
    }

    #[test]
    fn constructors_and_conversions() {
        let t = HostTensor::from_f32(vec![2, 2], vec![1.0, -2.5, 3.0, 0.0]).unwrap();
        assert_eq!(t.numel(), 4);
        assert_eq!(t.bytes.len(), 16);
        assert_eq!(t.to_f64_vec(), vec![1.0, -2.5, 3.0, 0.0]);
        assert!(t.to_i64_vec().is_err());
        let e = HostTensor::from_f32(vec![3], vec![1.0]).unwrap_err();
        assert!(e.to_string().contains("needs 12 bytes, got 4"), "{e}");

        let i = HostTensor::from_i64(vec![3], vec![-1, 0, 1 << 40]).unwrap();
        assert_eq!(i.to_i64_vec().unwrap(), vec![-1, 0, 1 << 40]);
        let i = HostTensor::from_i32(vec![2], vec![-7, 9]).unwrap();
        assert_eq!(i.to_i64_vec().unwrap(), vec![-7, 9]);
        assert_eq!(i.to_f32_vec(), vec![-7.0, 9.0]);
        let u = HostTensor::from_u8(vec![2], vec![0, 255]).unwrap();
        assert_eq!(u.to_i64_vec().unwrap(), vec![0, 255]);
        let d = HostTensor::from_f64(vec![1], vec![0.1]).unwrap();
        assert_eq!(d.to_f32_vec(), vec![0.1f32]);
        let b = HostTensor::from_bf16(vec![2], vec![bf16::from_f32(1.5), bf16::from_f32(-3.0)])
            .unwrap();
        assert_eq!(b.to_f32_vec(), vec![1.5, -3.0]);
        assert_eq!(b.bytes, vec![0xC0, 0x3F, 0x40, 0xC0]); // little-endian bf16
        let h = HostTensor::from_f16(vec![1], vec![f16::from_f32(0.5)]).unwrap();
        assert_eq!(h.to_f64_vec(), vec![0.5]);
        assert!(h.to_bf16_vec().is_err());
        let s = HostTensor::from_f32(vec![], vec![4.0]).unwrap();
        assert_eq!(s.numel(), 1);
        assert_eq!(HostTensor::zeros(DType::I32, vec![0, 5]).numel(), 0);
    }

    #[test]
    fn parallel_copies_and_conversions_match_element_by_element() {
        // Several conversion chunks, the last one partial.
        let n = 3 * CONVERT_CHUNK / 8 + 5;
        let ints: Vec<i64> = (0..n as i64).map(|i| i * 7919 - 40_000).collect();
        let t = HostTensor::from_i64(vec![n], ints.clone()).unwrap();
        assert_eq!(&t.bytes[..], bytemuck::cast_slice::<i64, u8>(&ints));
        assert_eq!(t.to_i64_vec().unwrap(), ints);
        let floats: Vec<f64> = ints.iter().map(|&i| i as f64).collect();
        assert_eq!(t.to_f64_vec(), floats);
        let narrow: Vec<i32> = ints.iter().map(|&i| i as i32).collect();
        let t = HostTensor::from_i32(vec![n], narrow.clone()).unwrap();
        let wide: Vec<i64> = narrow.iter().map(|&i| i64::from(i)).collect();
        assert_eq!(t.to_i64_vec().unwrap(), wide);
        let halves: Vec<bf16> = ints.iter().map(|&i| bf16::from_f32(i as f32)).collect();
        let t = HostTensor::from_bf16(vec![n], halves.clone()).unwrap();
        let want: Vec<f32> = halves.iter().map(|&h| f32::from(h)).collect();
        assert_eq!(t.to_f32_vec(), want);
    }

    #[test]
    fn unaligned_bytes_are_read_correctly() {
        // A Vec<u8> view into the middle of a buffer may be misaligned for f32/i64.
        let mut raw = vec![0u8];
        raw.extend_from_slice(bytemuck::cast_slice(&[1.25f32, 2.5]));
        let t = HostTensor::new(DType::F32, vec![2], raw[1..].to_vec()).unwrap();
        assert_eq!(t.to_f32_vec(), vec![1.25, 2.5]);
    }

    #[test]
    fn round_trip() {
        let mut set = TensorSet::new();
        set.insert(
            "weight",
            HostTensor::from_f32(vec![100, 8], uniform_f32(800, 1, -1.0, 1.0)).unwrap(),
        );
        set.insert(
            "indices",
            HostTensor::from_i64(vec![5], vec![0, 7, 99, 7, 3]).unwrap(),
        );
        set.insert(
            "offsets",
            HostTensor::from_i64(vec![3], vec![0, 2, 5]).unwrap(),
        );
        set.insert(
            "w_bf16",
            HostTensor::from_bf16(vec![4, 3], uniform_bf16(12, 2, -2.0, 2.0)).unwrap(),
        );
        set.insert("empty", HostTensor::from_f32(vec![0, 128], vec![]).unwrap());
        set.metadata
            .insert("problem".into(), "embedding_bag_sum".into());
        set.metadata.insert("seed".into(), "42".into());
        let path = scratch_path("round-trip.safetensors");
        set.write(&path).unwrap();
        let back = TensorSet::read(&path).unwrap();
        // The file is plain safetensors: the crate's own reader takes it, 8-byte aligned.
        let raw = std::fs::read(&path).unwrap();
        let st = safetensors::SafeTensors::deserialize(&raw).unwrap();
        assert_eq!(
            st.tensor("indices").unwrap().data(),
            &set.tensors["indices"].bytes[..]
        );
        assert_eq!(u64::from_le_bytes(raw[..8].try_into().unwrap()) % 8, 0);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(back, set);
        assert_eq!(back.get("w_bf16").unwrap().dtype, DType::BF16);
        let e = back.get("out").unwrap_err().to_string();
        assert!(e.contains("`out`") && e.contains("weight"), "{e}");
    }

    #[test]
    fn read_errors_name_the_file() {
        let missing = scratch_path("does-not-exist.safetensors");
        let e = TensorSet::read(&missing).unwrap_err().to_string();
        assert!(e.contains(&missing.display().to_string()), "{e}");

        let corrupt = scratch_path("corrupt.safetensors");
        std::fs::write(
            &corrupt,
            b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}xxxxxx",
        )
        .unwrap();
        let e = TensorSet::read(&corrupt).unwrap_err().to_string();
        assert!(e.contains(&corrupt.display().to_string()), "{e}");
        // A truncated file: a valid header whose data is cut short.
        let mut set = TensorSet::new();
        set.insert("x", HostTensor::from_f32(vec![4], vec![1.0; 4]).unwrap());
        set.write(&corrupt).unwrap();
        let bytes = std::fs::read(&corrupt).unwrap();
        std::fs::write(&corrupt, &bytes[..bytes.len() - 3]).unwrap();
        let e = TensorSet::read(&corrupt).unwrap_err().to_string();
        assert!(e.contains(&corrupt.display().to_string()), "{e}");
        // A required tensor that is absent names the file too.
        set.write(&corrupt).unwrap();
        let e = TensorSet::read_required(&corrupt, &["x", "weight"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`weight`") && e.contains(&corrupt.display().to_string()),
            "{e}"
        );
        std::fs::remove_file(&corrupt).unwrap();

        // Writing into a directory that does not exist names the path.
        let bad = scratch_path("no-such-dir").join("x.safetensors");
        let e = set.write(&bad).unwrap_err().to_string();
        assert!(e.contains(&bad.display().to_string()), "{e}");
    }

    #[test]
    fn unsupported_dtype_names_the_tensor() {
        let path = scratch_path("u16.safetensors");
        let data = [0u8; 4];
        let view = safetensors::tensor::TensorView::new(Dtype::U16, vec![2], &data).unwrap();
        safetensors::serialize_to_file([("odd", view)], None, &path).unwrap();
        let e = TensorSet::read(&path).unwrap_err().to_string();
        std::fs::remove_file(&path).unwrap();
        assert!(e.contains("`odd`") && e.contains("U16"), "{e}");
    }
}
