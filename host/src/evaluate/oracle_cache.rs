//! Oracles in the input cache: apart from the sets (in `.oracles/`, [`super::cache`]),
//! `<label>-<key>.oracle.safetensors` holds what the problem's oracle said of a set, bit for
//! bit, so a worker that reads the set from the cache (a restarted worker, a resumed run, a run given the cache of an earlier one) does not
//! compute the oracle again — the longest step of preparing a set at `full`. The set's key
//! (problem, preset, label, sizes, seeds, commit) names both files, so an oracle is never read
//! for another set or another build.
//!
//! Tensors: `f:<output>` (f64) for a float output, `i:<output>` (i64) for an integer one,
//! `r:<output>:rows` (i64) and `r:<output>:delta` (f64) for a row update, whose shape and
//! tolerances are the metadata `r:<output>` (JSON).
use bench_problems::{Oracle, OracleOutput, RowUpdate};
use data_gen::tensor::{write_views, FileLayout, FileTensor, TensorView};
use data_gen::DType;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A row update's fields that are not arrays.
#[derive(Serialize, Deserialize)]
struct RowsMeta {
    total_rows: usize,
    width: usize,
    update_rel_l2: f64,
    update_max_scaled: f64,
}

/// A one-dimensional view of `elements` values of `dtype` in `bytes`.
fn view(dtype: DType, bytes: &[u8], elements: usize) -> TensorView<'_> {
    TensorView {
        dtype,
        shape: vec![elements],
        bytes,
    }
}

/// Writes `oracle` to `path` as a tensor file, its values borrowed, not copied (at `full` an
/// oracle is gigabytes: a copy cost more than the write).
pub(super) fn write(oracle: &Oracle, path: &std::path::Path) -> anyhow::Result<()> {
    let mut tensors = BTreeMap::new();
    let mut metadata = BTreeMap::new();
    for (name, out) in oracle {
        match out {
            OracleOutput::Float(v) => {
                let t = view(DType::F64, bytemuck::cast_slice(v), v.len());
                tensors.insert(format!("f:{name}"), t);
            }
            OracleOutput::Int(v) => {
                let t = view(DType::I64, bytemuck::cast_slice(v), v.len());
                tensors.insert(format!("i:{name}"), t);
            }
            OracleOutput::Rows(r) => {
                let rows = view(DType::I64, bytemuck::cast_slice(&r.rows), r.rows.len());
                let delta = view(DType::F64, bytemuck::cast_slice(&r.delta), r.delta.len());
                tensors.insert(format!("r:{name}:rows"), rows);
                tensors.insert(format!("r:{name}:delta"), delta);
                let meta = RowsMeta {
                    total_rows: r.total_rows,
                    width: r.width,
                    update_rel_l2: r.update_rel_l2,
                    update_max_scaled: r.update_max_scaled,
                };
                metadata.insert(format!("r:{name}"), serde_json::to_string(&meta)?);
            }
        }
    }
    Ok(write_views(path, &tensors, &metadata)?)
}

/// The oracle the file at `path` (written by [`write`]) holds, each vector read from the file
/// straight into place (one copy); an error names what is missing or wrong.
pub(super) fn read(path: &std::path::Path) -> anyhow::Result<Oracle> {
    let file = FileLayout::open(path)?;
    let find = |key: &str| file.tensors.iter().find(|t| t.name == key);
    let mut oracle = Oracle::new();
    for t in &file.tensors {
        if let Some(name) = t.name.strip_prefix("f:") {
            oracle.insert(
                name.to_string(),
                OracleOutput::Float(values(&file, t, DType::F64)?),
            );
        } else if let Some(name) = t.name.strip_prefix("i:") {
            oracle.insert(
                name.to_string(),
                OracleOutput::Int(values(&file, t, DType::I64)?),
            );
        } else if let Some(name) = t
            .name
            .strip_prefix("r:")
            .and_then(|k| k.strip_suffix(":rows"))
        {
            let meta: RowsMeta = serde_json::from_str(
                file.metadata
                    .get(&format!("r:{name}"))
                    .ok_or_else(|| anyhow::anyhow!("no metadata `r:{name}`"))?,
            )?;
            let delta = find(&format!("r:{name}:delta"))
                .ok_or_else(|| anyhow::anyhow!("no tensor `r:{name}:delta`"))?;
            oracle.insert(
                name.to_string(),
                OracleOutput::Rows(RowUpdate {
                    total_rows: meta.total_rows,
                    width: meta.width,
                    rows: values(&file, t, DType::I64)?,
                    delta: values(&file, delta, DType::F64)?,
                    update_rel_l2: meta.update_rel_l2,
                    update_max_scaled: meta.update_max_scaled,
                }),
            );
        }
    }
    anyhow::ensure!(!oracle.is_empty(), "no oracle output in the file");
    Ok(oracle)
}

/// Tensor `t` of `file`, of `dtype` (8-byte values), read into a vector of `T`.
fn values<T: bytemuck::Pod>(
    file: &FileLayout,
    t: &FileTensor,
    dtype: DType,
) -> anyhow::Result<Vec<T>> {
    anyhow::ensure!(
        t.dtype == dtype && t.len.is_multiple_of(std::mem::size_of::<T>()),
        "tensor `{}` is {:?}, {} bytes: expected {dtype:?}",
        t.name,
        t.dtype,
        t.len
    );
    let mut v = vec![T::zeroed(); t.len / std::mem::size_of::<T>()];
    file.read_into(t, bytemuck::cast_slice_mut(&mut v))?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_output_round_trips_bit_for_bit() {
        let mut oracle = Oracle::new();
        oracle.insert(
            "out".into(),
            OracleOutput::Float(vec![1.0, -0.0, f64::NAN, f64::INFINITY, 1e-310]),
        );
        oracle.insert("n".into(), OracleOutput::Int(vec![i64::MIN, 0, 7]));
        oracle.insert(
            "weight".into(),
            OracleOutput::Rows(RowUpdate {
                total_rows: 9,
                width: 2,
                rows: vec![1, 5],
                delta: vec![0.5, -0.25, 3.0, f64::MIN_POSITIVE],
                update_rel_l2: 1e-5,
                update_max_scaled: 1e-4,
            }),
        );
        let dir = std::env::temp_dir().join(format!("dlrm-bench-oracle-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("o.safetensors");
        write(&oracle, &path).unwrap();
        let back = read(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let bits = |o: &Oracle| {
            format!(
                "{:?}",
                o.iter().map(|(k, v)| (k, bits_of(v))).collect::<Vec<_>>()
            )
        };
        assert_eq!(bits(&back), bits(&oracle));
    }

    fn bits_of(o: &OracleOutput) -> Vec<u64> {
        match o {
            OracleOutput::Float(v) => v.iter().map(|x| x.to_bits()).collect(),
            OracleOutput::Int(v) => v.iter().map(|&x| x as u64).collect(),
            OracleOutput::Rows(r) => [r.total_rows as u64, r.width as u64]
                .into_iter()
                .chain(r.rows.iter().map(|&x| x as u64))
                .chain(r.delta.iter().map(|x| x.to_bits()))
                .chain([r.update_rel_l2.to_bits(), r.update_max_scaled.to_bits()])
                .collect(),
        }
    }

    #[test]
    fn a_file_without_an_oracle_or_of_another_dtype_is_an_error() {
        let dir = std::env::temp_dir().join(format!("dlrm-bench-oracle-e-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("o.safetensors");
        data_gen::TensorSet::new().write(&path).unwrap();
        assert!(read(&path).is_err());
        let mut f32s = data_gen::TensorSet::new();
        f32s.insert(
            "f:out",
            data_gen::HostTensor::from_f32(vec![2], vec![1.0, 2.0]).unwrap(),
        );
        f32s.write(&path).unwrap();
        let e = read(&path).unwrap_err().to_string();
        assert!(e.contains("`f:out`") && e.contains("expected F64"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
