//! Trace replay: real lookup traces as (indices, offsets) or (indices, lengths), read from a
//! safetensors file or from `.npy` files.
//!
//! Safetensors layout (what `tools/convert_dlrm_trace.py` writes):
//! - `indices`: int64 (or int32) `[N]`, table-major: all of table 0's lookups, then table 1's…;
//!   each index local to its table;
//! - either `offsets`: int64/int32 `[T·B + 1]`, CSR over the `T·B` bags (bag `t·B + b` is sample
//!   `b` of table `t`; the first offset need not be 0), or `lengths`: int64/int32 `[T, B]`
//!   (or `[T·B]`);
//! - metadata (optional): `tables` (T) and `batch_size` (B), needed only when the offsets or a
//!   flat `lengths` hold several tables; `source`, free text.
//!
//! `.npy` form: a directory holding `indices.npy` and `offsets.npy` or `lengths.npy` (same
//! meaning; a 2-D `lengths.npy` gives T and B by its shape), or the two paths given directly.
//! Arrays are read with the `npyz` crate (any integer dtype, either byte order, C or Fortran
//! order).

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::DataGenError;
use crate::tensor::TensorSet;

/// A lookup trace over `tables` tables of `batch` bags each.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    /// Lookups, table-major.
    pub indices: Vec<i64>,
    /// CSR offsets over all `tables × batch` bags, rebased to start at 0.
    pub offsets: Vec<i64>,
    /// T.
    pub tables: usize,
    /// B.
    pub batch: usize,
    /// The file's metadata, when it had any.
    pub metadata: BTreeMap<String, String>,
}

/// Where the bag boundaries come from.
#[derive(Clone, Debug, PartialEq)]
pub enum Bags {
    /// CSR offsets over all bags.
    Offsets(Vec<i64>),
    /// Lengths of all bags, table-major.
    Lengths(Vec<i64>),
}

fn bad(path: &Path, message: impl Into<String>) -> DataGenError {
    DataGenError::InvalidTrace {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

impl Trace {
    /// Build and validate a trace. `tables` and `batch` may be `None` when they follow from
    /// the data (one table; or `Lengths` with known shape, given through `tables`).
    pub fn from_parts(
        indices: Vec<i64>,
        bags: Bags,
        tables: Option<usize>,
        batch: Option<usize>,
        path: &Path,
    ) -> Result<Self, DataGenError> {
        let offsets = match bags {
            Bags::Offsets(o) => {
                if o.is_empty() {
                    return Err(bad(path, "`offsets` are empty (need T·B + 1 entries)"));
                }
                let base = o[0];
                o.into_iter()
                    .map(|x| x.checked_sub(base))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| bad(path, "`offsets` span more than 2^63"))?
            }
            Bags::Lengths(l) => {
                if let Some(&x) = l.iter().find(|&&x| x < 0) {
                    return Err(bad(path, format!("`lengths`: negative bag length {x}")));
                }
                std::iter::once(Some(0))
                    .chain(l.iter().scan(0i64, |acc, &x| {
                        *acc = acc.checked_add(x)?;
                        Some(Some(*acc))
                    }))
                    .collect::<Option<Vec<_>>>()
                    .filter(|o| o.len() == l.len() + 1)
                    .ok_or_else(|| bad(path, "`lengths` add up to more than 2^63"))?
            }
        };
        let bags = offsets.len() - 1;
        if let Some(w) = offsets.windows(2).position(|w| w[1] < w[0]) {
            return Err(bad(path, format!("`offsets` decrease at bag {w}")));
        }
        let last = *offsets.last().unwrap_or(&0);
        if last as usize > indices.len() || last < 0 {
            return Err(bad(
                path,
                format!(
                    "`offsets` end at {last} but there are {} `indices`",
                    indices.len()
                ),
            ));
        }
        let (tables, batch) = match (tables, batch) {
            (Some(t), Some(b)) => (t, b),
            (Some(t), None) => (t, bags.checked_div(t).unwrap_or(0)),
            (None, Some(b)) => (bags.checked_div(b).unwrap_or(0), b),
            (None, None) => (1, bags),
        };
        if tables.checked_mul(batch) != Some(bags) {
            return Err(bad(
                path,
                format!(
                    "{bags} bags is not tables ({tables}) × batch size ({batch}) (metadata \
                     `tables`, `batch_size` or the shape of `lengths`)"
                ),
            ));
        }
        if let Some(&i) = indices.iter().find(|&&i| i < 0) {
            return Err(bad(path, format!("`indices`: negative index {i}")));
        }
        let mut indices = indices;
        indices.truncate(last as usize);
        Ok(Self {
            indices,
            offsets,
            tables,
            batch,
            metadata: BTreeMap::new(),
        })
    }

    /// Read a trace: a `.safetensors` file, a directory of `.npy` files, or an `indices.npy`
    /// whose sibling `offsets.npy` / `lengths.npy` holds the bags.
    pub fn read(path: &Path) -> Result<Self, DataGenError> {
        if path.is_dir() {
            return Self::read_npy_dir(path);
        }
        match path.extension().and_then(|e| e.to_str()) {
            Some("npy") => Self::read_npy_dir(path.parent().unwrap_or(Path::new("."))),
            _ => Self::read_safetensors(path),
        }
    }

    /// Read the safetensors layout described in the module doc.
    pub fn read_safetensors(path: &Path) -> Result<Self, DataGenError> {
        let set = TensorSet::read_required(path, &["indices"])?;
        let meta = |k: &str| -> Result<Option<usize>, DataGenError> {
            set.metadata
                .get(k)
                .map(|v| {
                    v.trim()
                        .parse::<usize>()
                        .map_err(|_| bad(path, format!("metadata `{k}` = `{v}` is not a count")))
                })
                .transpose()
        };
        let (mut tables, batch) = (meta("tables")?, meta("batch_size")?);
        // A tensor as integers, or an error naming the file and the tensor.
        let ints = |name: &str| {
            set.tensors
                .get(name)
                .map(|t| {
                    t.to_i64_vec()
                        .map_err(|e| bad(path, format!("tensor `{name}`: {e}")))
                })
                .transpose()
        };
        let indices = ints("indices")?.unwrap_or_default();
        let bags = if let Some(o) = ints("offsets")? {
            Bags::Offsets(o)
        } else if let Some(l) = ints("lengths")? {
            let shape = &set.tensors["lengths"].shape;
            if shape.len() == 2 {
                tables = tables.or(Some(shape[0]));
            }
            Bags::Lengths(l)
        } else {
            return Err(bad(path, "holds neither `offsets` nor `lengths`"));
        };
        let mut t = Self::from_parts(indices, bags, tables, batch, path)?;
        t.metadata = set.metadata;
        Ok(t)
    }

    /// Read `indices.npy` and `offsets.npy` (or `lengths.npy`) from a directory.
    pub fn read_npy_dir(dir: &Path) -> Result<Self, DataGenError> {
        let indices_path = dir.join("indices.npy");
        let (offsets, lengths) = (dir.join("offsets.npy"), dir.join("lengths.npy"));
        if offsets.exists() {
            Self::read_npy(&indices_path, &offsets, false)
        } else if lengths.exists() {
            Self::read_npy(&indices_path, &lengths, true)
        } else {
            Err(bad(dir, "needs indices.npy and offsets.npy or lengths.npy"))
        }
    }

    /// Read a trace from two `.npy` files; `is_lengths` says whether the second holds lengths
    /// (a 2-D `[T, B]` array fixes T and B) or offsets (one table).
    pub fn read_npy(indices: &Path, bags: &Path, is_lengths: bool) -> Result<Self, DataGenError> {
        let (idx, _) = read_npy_i64(indices)?;
        let (b, shape) = read_npy_i64(bags)?;
        if is_lengths {
            let tables = (shape.len() == 2).then(|| shape[0]);
            Self::from_parts(idx, Bags::Lengths(b), tables, None, bags)
        } else {
            Self::from_parts(idx, Bags::Offsets(b), None, None, bags)
        }
    }

    /// Table `t` alone: its indices and its `B + 1` offsets (rebased to 0).
    pub fn table(&self, t: usize) -> Result<(Vec<i64>, Vec<i64>), DataGenError> {
        if t >= self.tables {
            return Err(DataGenError::invalid(
                "table",
                t,
                "is past the trace's last table",
            ));
        }
        let o = &self.offsets[t * self.batch..=(t + 1) * self.batch];
        let base = o[0];
        Ok((
            self.indices[base as usize..o[self.batch] as usize].to_vec(),
            o.iter().map(|x| x - base).collect(),
        ))
    }

    /// Rows of table `t` as the trace shows them: its largest index + 1.
    pub fn rows_seen(&self, t: usize) -> Result<u64, DataGenError> {
        let (idx, _) = self.table(t)?;
        Ok(idx.iter().max().map_or(1, |&m| m as u64 + 1))
    }

    /// Bags (T·B).
    pub fn bags(&self) -> usize {
        self.offsets.len() - 1
    }
}

/// Read a `.npy` of any integer dtype as i64, with its shape (row-major order).
pub fn read_npy_i64(path: &Path) -> Result<(Vec<i64>, Vec<usize>), DataGenError> {
    let io = |source| DataGenError::Io {
        path: path.to_path_buf(),
        source,
    };
    let bytes = std::fs::read(path).map_err(io)?;
    let npy = npyz::NpyFile::new(&bytes[..]).map_err(io)?;
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    let fortran = npy.order() == npyz::Order::Fortran;
    let dtype = match npy.dtype() {
        npyz::DType::Plain(t) => t.to_string(),
        other => return Err(bad(path, format!("unsupported npy dtype {other:?}"))),
    };
    let kind = dtype.trim_start_matches(['<', '>', '|', '=']);
    let data: Vec<i64> = match kind {
        "i8" => npy.into_vec::<i64>().map_err(io)?,
        "i4" => widen(npy.into_vec::<i32>().map_err(io)?),
        "i2" => widen(npy.into_vec::<i16>().map_err(io)?),
        "i1" => widen(npy.into_vec::<i8>().map_err(io)?),
        "u4" => widen(npy.into_vec::<u32>().map_err(io)?),
        "u2" => widen(npy.into_vec::<u16>().map_err(io)?),
        "u1" => widen(npy.into_vec::<u8>().map_err(io)?),
        "u8" => npy
            .into_vec::<u64>()
            .map_err(io)?
            .into_iter()
            .map(|x| i64::try_from(x).map_err(|_| bad(path, format!("value {x} exceeds i64"))))
            .collect::<Result<_, _>>()?,
        _ => return Err(bad(path, format!("dtype {dtype} is not an integer type"))),
    };
    let data = if fortran && shape.len() == 2 {
        // Column-major → row-major.
        let (r, c) = (shape[0], shape[1]);
        (0..r * c).map(|k| data[(k % c) * r + k / c]).collect()
    } else {
        data
    };
    Ok((data, shape))
}

fn widen<T: Into<i64>>(v: Vec<T>) -> Vec<i64> {
    v.into_iter().map(Into::into).collect()
}

#[cfg(test)]
#[path = "trace_properties.rs"]
mod properties;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::{scratch_path, HostTensor};

    /// A minimal .npy writer (format 1.0), independent of the reader under test.
    pub(super) fn write_npy(path: &Path, descr: &str, fortran: bool, shape: &[usize], data: &[u8]) {
        let shape_s = match shape {
            [n] => format!("({n},)"),
            s => format!(
                "({})",
                s.iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let mut header = format!(
            "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape_s}, }}",
            if fortran { "True" } else { "False" }
        );
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(' ');
        }
        header.push('\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        std::fs::write(path, out).unwrap();
    }

    #[test]
    fn safetensors_with_offsets_or_lengths() {
        // Two tables, batch 3: table 0 bags [5 6] [] [7]; table 1 bags [1] [2 3] [4].
        let idx = vec![5i64, 6, 7, 1, 2, 3, 4];
        let path = scratch_path("trace-offsets.safetensors");
        let mut set = TensorSet::new();
        set.insert(
            "indices",
            HostTensor::from_i64(vec![7], idx.clone()).unwrap(),
        );
        set.insert(
            "offsets",
            HostTensor::from_i32(vec![7], vec![10, 12, 12, 13, 14, 16, 17]).unwrap(),
        );
        set.metadata.insert("tables".into(), "2".into());
        set.write(&path).unwrap();
        let t = Trace::read(&path).unwrap();
        assert_eq!((t.tables, t.batch), (2, 3));
        assert_eq!(t.offsets, vec![0, 2, 2, 3, 4, 6, 7]);
        assert_eq!(t.table(1).unwrap(), (vec![1, 2, 3, 4], vec![0, 1, 3, 4]));
        assert_eq!(t.rows_seen(0).unwrap(), 8);
        assert!(t.table(2).is_err());

        let mut set = TensorSet::new();
        set.insert("indices", HostTensor::from_i64(vec![7], idx).unwrap());
        set.insert(
            "lengths",
            HostTensor::from_i64(vec![2, 3], vec![2, 0, 1, 1, 2, 1]).unwrap(),
        );
        set.write(&path).unwrap();
        let u = Trace::read(&path).unwrap();
        assert_eq!((u.tables, u.batch, &u.offsets), (2, 3, &t.offsets));

        // Errors name the file and the problem.
        set.tensors.remove("lengths");
        set.write(&path).unwrap();
        let e = Trace::read(&path).unwrap_err().to_string();
        assert!(e.contains("neither") && e.contains("trace-offsets"), "{e}");
        set.insert(
            "offsets",
            HostTensor::from_i64(vec![3], vec![0, 5, 9]).unwrap(),
        );
        set.write(&path).unwrap();
        let e = Trace::read(&path).unwrap_err().to_string();
        assert!(e.contains("`offsets` end at 9"), "{e}");
        // Issue 13: float indices said "cannot read as integers a tensor of dtype f32" alone.
        set.insert(
            "indices",
            HostTensor::from_f32(vec![7], vec![0.0; 7]).unwrap(),
        );
        set.write(&path).unwrap();
        let e = Trace::read(&path).unwrap_err().to_string();
        assert!(
            e.contains("trace-offsets") && e.contains("`indices`") && e.contains("f32"),
            "{e}"
        );
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn npy_directory_any_int_dtype_and_order() {
        let dir = scratch_path("trace-npy");
        std::fs::create_dir_all(&dir).unwrap();
        let idx: Vec<u8> = [3i32, 1, 4, 1, 5, 9]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        write_npy(&dir.join("indices.npy"), "<i4", false, &[6], &idx);
        // lengths [[1, 2], [0, 3]] stored column-major: 1, 0, 2, 3.
        let len: Vec<u8> = [1i64, 0, 2, 3]
            .iter()
            .flat_map(|x| x.to_be_bytes())
            .collect();
        write_npy(&dir.join("lengths.npy"), ">i8", true, &[2, 2], &len);
        let t = Trace::read(&dir).unwrap();
        assert_eq!((t.tables, t.batch), (2, 2));
        assert_eq!(t.offsets, vec![0, 1, 3, 3, 6]);
        assert_eq!(t.indices, vec![3, 1, 4, 1, 5, 9]);
        // Through the indices file, with offsets instead.
        std::fs::remove_file(dir.join("lengths.npy")).unwrap();
        let off: Vec<u8> = [0u64, 2, 6].iter().flat_map(|x| x.to_le_bytes()).collect();
        write_npy(&dir.join("offsets.npy"), "<u8", false, &[3], &off);
        let t = Trace::read(&dir.join("indices.npy")).unwrap();
        assert_eq!(
            (t.tables, t.batch, t.offsets.clone()),
            (1, 2, vec![0, 2, 6])
        );
        write_npy(&dir.join("offsets.npy"), "<f8", false, &[1], &[0; 8]);
        let e = Trace::read(&dir).unwrap_err().to_string();
        assert!(e.contains("not an integer"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn validation() {
        let p = Path::new("x");
        assert!(Trace::from_parts(vec![0], Bags::Offsets(vec![0, 1, 0]), None, None, p).is_err());
        assert!(Trace::from_parts(vec![-1], Bags::Offsets(vec![0, 1]), None, None, p).is_err());
        assert!(
            Trace::from_parts(vec![0; 3], Bags::Lengths(vec![1, 1, 1]), Some(2), None, p).is_err()
        );
        assert!(Trace::from_parts(vec![0], Bags::Lengths(vec![-1]), None, None, p).is_err());
        let t = Trace::from_parts(vec![0; 4], Bags::Lengths(vec![2, 2]), None, Some(1), p).unwrap();
        assert_eq!((t.tables, t.bags()), (2, 2));
    }

    #[test]
    fn huge_counts_are_errors_not_panics() {
        // Issue 13: `tables` and `batch_size` of 2^32 panicked (their product overflowed).
        let p = Path::new("x");
        let big = 1usize << 32;
        let e = Trace::from_parts(vec![0], Bags::Offsets(vec![0, 1]), Some(big), Some(big), p)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not tables"), "{e}");
        let e = Trace::from_parts(
            vec![0],
            Bags::Offsets(vec![i64::MIN, i64::MAX]),
            None,
            None,
            p,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("2^63"), "{e}");
        let e = Trace::from_parts(vec![0], Bags::Lengths(vec![i64::MAX, 1]), None, None, p)
            .unwrap_err()
            .to_string();
        assert!(e.contains("2^63"), "{e}");
        // Through the file reader: the metadata names the file.
        let dir = std::env::temp_dir().join(format!("dlrm-trace-huge-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.safetensors");
        let mut set = TensorSet::new();
        set.insert("indices", HostTensor::from_i64(vec![1], vec![0]).unwrap());
        set.insert(
            "offsets",
            HostTensor::from_i64(vec![2], vec![0, 1]).unwrap(),
        );
        set.metadata.insert("tables".into(), big.to_string());
        set.metadata.insert("batch_size".into(), big.to_string());
        set.write(&path).unwrap();
        let e = Trace::read(&path).unwrap_err().to_string();
        assert!(
            e.contains("t.safetensors") && e.contains("is not tables"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
