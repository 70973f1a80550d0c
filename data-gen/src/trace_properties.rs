//! Property tests of the trace readers (issue 13): small valid traces, written as safetensors
//! or `.npy` files, with their header and tensor bytes mutated, are read without a panic, and
//! every rejection names the file (and, for a trace that is not valid, the tensor or metadata
//! key at fault).
use super::tests::write_npy;
use super::*;
use crate::tensor::{scratch_path, HostTensor};
use proptest::prelude::*;
use proptest::test_runner::Config;

/// A valid trace: `tables × batch` bag lengths and indices for them.
#[derive(Clone, Debug)]
struct Small {
    tables: usize,
    lengths: Vec<i64>,
    indices: Vec<i64>,
    /// Offsets (true) or lengths; i32 (true) or i64 tensors; metadata written.
    offsets: bool,
    narrow: bool,
    metadata: bool,
}

fn small() -> impl Strategy<Value = Small> {
    (1usize..3, 0usize..4, any::<(bool, bool, bool)>())
        .prop_flat_map(|(tables, batch, flags)| {
            let n = tables * batch;
            (prop::collection::vec(0i64..3, n), Just((tables, flags)))
        })
        .prop_flat_map(|(lengths, (tables, flags))| {
            let total = lengths.iter().sum::<i64>() as usize;
            (
                Just(lengths),
                prop::collection::vec(0i64..50, total),
                Just((tables, flags)),
            )
        })
        .prop_map(
            |(lengths, indices, (tables, (offsets, narrow, metadata)))| Small {
                tables,
                lengths,
                indices,
                offsets,
                narrow,
                metadata,
            },
        )
}

fn ints(values: &[i64], shape: Vec<usize>, narrow: bool) -> HostTensor {
    if narrow {
        HostTensor::from_i32(shape, values.iter().map(|&v| v as i32).collect()).unwrap()
    } else {
        HostTensor::from_i64(shape, values.to_vec()).unwrap()
    }
}

/// The trace as safetensors bytes.
fn safetensors_bytes(t: &Small, path: &Path) -> Vec<u8> {
    let mut set = TensorSet::new();
    let n = t.indices.len();
    set.insert("indices", ints(&t.indices, vec![n], t.narrow));
    let batch = t.lengths.len() / t.tables;
    if t.offsets {
        let offsets: Vec<i64> = std::iter::once(0)
            .chain(t.lengths.iter().scan(0, |a, &l| {
                *a += l;
                Some(*a)
            }))
            .collect();
        set.insert("offsets", ints(&offsets, vec![offsets.len()], t.narrow));
    } else {
        set.insert("lengths", ints(&t.lengths, vec![t.tables, batch], t.narrow));
    }
    if t.metadata {
        set.metadata.insert("tables".into(), t.tables.to_string());
        set.metadata.insert("batch_size".into(), batch.to_string());
    }
    set.write(path).unwrap();
    std::fs::read(path).unwrap()
}

/// One change to a file's bytes: overwrite, insert or delete at a position (taken modulo the
/// region it aims at), or cut the file short.
#[derive(Clone, Debug)]
enum Mutation {
    Set(usize, u8),
    Insert(usize, u8),
    Delete(usize),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), any::<u8>()).prop_map(|(p, b)| Mutation::Set(p, b)),
        1 => (any::<usize>(), any::<u8>()).prop_map(|(p, b)| Mutation::Insert(p, b)),
        1 => any::<usize>().prop_map(Mutation::Delete),
        1 => any::<usize>().prop_map(Mutation::Truncate),
    ]
}

/// Applies `m` within `region` of `bytes` (never past its end).
fn apply(bytes: &mut Vec<u8>, region: std::ops::Range<usize>, m: &Mutation) {
    let len = region.len().max(1);
    let at = |p: usize| (region.start + p % len).min(bytes.len());
    match *m {
        Mutation::Set(p, b) => {
            let i = at(p);
            if i < bytes.len() {
                bytes[i] = b;
            }
        }
        Mutation::Insert(p, b) => bytes.insert(at(p), b),
        Mutation::Delete(p) => {
            let i = at(p);
            if i < bytes.len() {
                bytes.remove(i);
            }
        }
        Mutation::Truncate(p) => bytes.truncate(at(p)),
    }
}

/// A header value changed in a structured way: the JSON of the safetensors header with one
/// number replaced (a shape, an offset) or one string replaced (a dtype, a metadata value).
fn mutate_header(bytes: &[u8], which: usize, number: i64, text: &str) -> Vec<u8> {
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&bytes[8..8 + n]).unwrap();
    // Tokens: runs of digits and quoted strings.
    let mut spans = Vec::new();
    let mut chars = header.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c.is_ascii_digit() {
            let mut end = i + 1;
            while let Some(&(j, d)) = chars.peek() {
                if !d.is_ascii_digit() {
                    break;
                }
                end = j + 1;
                chars.next();
            }
            spans.push((i, end, true));
        } else if c == '"' {
            let start = i + 1;
            let mut end = start;
            for (j, d) in chars.by_ref() {
                if d == '"' {
                    end = j;
                    break;
                }
            }
            spans.push((start, end, false));
        }
    }
    let (start, end, numeric) = spans[which % spans.len()];
    let replacement = if numeric {
        number.to_string()
    } else {
        text.to_string()
    };
    let header = format!("{}{}{}", &header[..start], replacement, &header[end..]);
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&bytes[8 + n..]);
    out
}

/// What every rejection must say: the file, and for an invalid trace, what in it is at fault.
fn check_error(e: &DataGenError, path: &Path) -> Result<(), TestCaseError> {
    let text = e.to_string();
    prop_assert!(
        text.contains(&path.display().to_string()),
        "no path in: {}",
        text
    );
    if let DataGenError::InvalidTrace { message, .. } = e {
        let named = [
            "indices",
            "offsets",
            "lengths",
            "tables",
            "batch_size",
            "metadata",
        ]
        .iter()
        .any(|f| message.contains(&format!("`{f}`")));
        prop_assert!(named, "no tensor or key in: {}", text);
    }
    Ok(())
}

/// `cases` cases (or `PROPTEST_CASES`, for a longer search by hand), no regression files.
fn config(cases: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    Config {
        failure_persistence: None,
        ..Config::with_cases(cases)
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn valid_traces_read_back(t in small()) {
        let path = scratch_path("prop-valid.safetensors");
        safetensors_bytes(&t, &path);
        let read = Trace::read(&path).unwrap();
        prop_assert_eq!(&read.indices, &t.indices);
        prop_assert_eq!(read.bags(), t.lengths.len());
    }

    #[test]
    fn mutated_safetensors_never_panic_and_name_the_file(
        t in small(),
        header in prop::collection::vec(mutation(), 0..4),
        data in prop::collection::vec(mutation(), 0..4),
        structured in prop::option::of((any::<usize>(), any::<i64>(), "[a-zA-Z0-9_]{0,6}")),
    ) {
        let path = scratch_path("prop-mutated.safetensors");
        let mut bytes = safetensors_bytes(&t, &path);
        if let Some((which, number, text)) = &structured {
            bytes = mutate_header(&bytes, *which, *number, text);
        }
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let data_at = (8 + n).min(bytes.len());
        for m in &header {
            apply(&mut bytes, 0..data_at, m);
        }
        let end = bytes.len();
        for m in &data {
            apply(&mut bytes, data_at.min(end)..end, m);
        }
        std::fs::write(&path, &bytes).unwrap();
        if let Err(e) = Trace::read(&path) {
            check_error(&e, &path)?;
        }
    }

    #[test]
    fn mutated_npy_files_never_panic_and_name_the_file(
        t in small(),
        target in 0usize..2,
        mutations in prop::collection::vec(mutation(), 1..5),
    ) {
        let dir = scratch_path("prop-npy");
        std::fs::create_dir_all(&dir).unwrap();
        let _ = std::fs::remove_file(dir.join("offsets.npy"));
        let le = |v: &[i64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        write_npy(&dir.join("indices.npy"), "<i8", false, &[t.indices.len()], &le(&t.indices));
        let batch = t.lengths.len() / t.tables;
        write_npy(&dir.join("lengths.npy"), "<i8", false, &[t.tables, batch], &le(&t.lengths));
        let file = dir.join(["indices.npy", "lengths.npy"][target]);
        let mut bytes = std::fs::read(&file).unwrap();
        let end = bytes.len();
        for m in &mutations {
            apply(&mut bytes, 0..end, m);
        }
        std::fs::write(&file, &bytes).unwrap();
        if let Err(e) = Trace::read(&dir) {
            check_error(&e, &dir)?;
        }
    }
}
