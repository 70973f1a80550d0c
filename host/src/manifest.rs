//! `candidate.toml` as written, and the checks of its fields that need no problem sizes: names
//! (candidate, scratch buffers, kernels), the `expect` status, and grid and block arrays of 1 to
//! 3 values (missing axes are 1). The file is first read into loose TOML values, so that a
//! value of the wrong kind is an error naming its field rather than a serde message about an
//! untagged enum; a TOML syntax or type error is located at its field by its position.
use crate::candidate::CandidateError;
use crate::record::Status;
use bench_problems::{Dim, LaunchSpec, ScratchSpec};
use serde::Deserialize;
use std::path::Path;

/// `candidate.toml`, checked field by field.
#[derive(Clone, Debug)]
pub struct Manifest {
    pub problem: String,
    pub name: String,
    /// `kernel.cu`, `kernel.ptx`, or `gpu-kernels` (a kernel of the project's Rust crate).
    pub source: String,
    pub description: Option<String>,
    /// The status this candidate must end with (the exploit corpus says what each exploit is
    /// caught as); a different status is flagged in the report. One of [`Status::ALL`].
    pub expect: Option<String>,
    pub scratch: Vec<ScratchSpec>,
    pub launches: Vec<LaunchSpec>,
    /// CUDA C++ only: the NVRTC arch (`sm_90a`, `compute_90`, ...; one of
    /// [`crate::nvrtc_flags::ARCHES`]); `None` is the device's.
    pub arch: Option<String>,
    /// CUDA C++ only: NVRTC flags and defines of [`crate::nvrtc_flags::check_option`]'s list.
    pub options: Vec<String>,
    /// CUDA C++ only: include directories, relative to the candidate's directory and inside it.
    pub include: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    problem: String,
    name: String,
    source: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    expect: Option<String>,
    #[serde(default)]
    scratch: Vec<RawScratch>,
    #[serde(rename = "launch", default)]
    launches: Vec<RawLaunch>,
    #[serde(default)]
    arch: Option<String>,
    #[serde(default)]
    options: Vec<String>,
    #[serde(default)]
    include: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScratch {
    name: String,
    bytes: toml::Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLaunch {
    kernel: String,
    grid: Vec<toml::Value>,
    block: Vec<toml::Value>,
    #[serde(default)]
    shared_bytes: Option<toml::Value>,
    args: Vec<String>,
}

/// Parses and checks the text of `file`.
pub fn parse(file: &Path, text: &str) -> Result<Manifest, CandidateError> {
    let raw: RawManifest = toml::from_str(text).map_err(|e| {
        let field = e.span().and_then(|s| field_at(text, s.start, e.message()));
        CandidateError::new(
            file,
            field.as_deref(),
            format!("malformed manifest: {}", e.to_string().trim()),
        )
    })?;
    let err = |field: &str, message: String| CandidateError::new(file, Some(field), message);
    check_name(file, "name", &raw.name)?;
    if let Some(e) = &raw.expect {
        if Status::parse(e).is_none() {
            let allowed: Vec<&str> = Status::ALL.iter().map(|s| s.name()).collect();
            return Err(err(
                "expect",
                format!("`{e}` is not a status (one of: {})", allowed.join(", ")),
            ));
        }
    }
    let mut scratch = Vec::with_capacity(raw.scratch.len());
    for (k, s) in raw.scratch.into_iter().enumerate() {
        check_name(file, &format!("scratch[{k}].name"), &s.name)?;
        let bytes = dim(file, &format!("scratch[{k}].bytes"), &s.bytes)?;
        scratch.push(ScratchSpec::new(&s.name, bytes));
    }
    let mut launches = Vec::with_capacity(raw.launches.len());
    for (i, l) in raw.launches.into_iter().enumerate() {
        check_name(file, &format!("launch[{i}].kernel"), &l.kernel)?;
        let grid = dims(file, &format!("launch[{i}].grid"), &l.grid)?;
        let block = dims(file, &format!("launch[{i}].block"), &l.block)?;
        let shared = match &l.shared_bytes {
            Some(v) => dim(file, &format!("launch[{i}].shared_bytes"), v)?,
            None => Dim::Number(0),
        };
        let args: Vec<&str> = l.args.iter().map(String::as_str).collect();
        launches.push(LaunchSpec::new(&l.kernel, grid, block, &args).with_shared(shared));
    }
    if let Some(a) = &raw.arch {
        if crate::nvrtc_flags::ptx_arch(a).is_none() {
            let sm: Vec<String> = crate::nvrtc_flags::ARCHES
                .iter()
                .map(|a| format!("sm_{a}"))
                .collect();
            return Err(err(
                "arch",
                format!(
                    "`{a}` is not an arch NVRTC is asked for here (one of: {}; or compute_ \
                     for any of them)",
                    sm.join(", ")
                ),
            ));
        }
    }
    for (k, o) in raw.options.iter().enumerate() {
        crate::nvrtc_flags::check_option(o).map_err(|e| err(&format!("options[{k}]"), e))?;
    }
    for (k, d) in raw.include.iter().enumerate() {
        check_include(d).map_err(|e| err(&format!("include[{k}]"), e))?;
    }
    Ok(Manifest {
        problem: raw.problem,
        name: raw.name,
        source: raw.source,
        description: raw.description,
        expect: raw.expect,
        scratch,
        launches,
        arch: raw.arch,
        options: raw.options,
        include: raw.include,
    })
}

/// An `include` entry: a relative path that stays inside the candidate's directory, read
/// lexically (`a/../b` is fine, `../x` and `a/../../x` are not); that it exists, and that no
/// link leads out, is checked where the directory is known ([`crate::candidate`]).
fn check_include(d: &str) -> Result<(), String> {
    use std::path::Component;
    if d.trim().is_empty() {
        return Err("must not be empty (use \".\" for the candidate's directory)".into());
    }
    if d.chars().any(|c| c.is_control()) {
        return Err(format!("{d:?} holds a control character"));
    }
    let mut depth = 0usize;
    for c in Path::new(d).components() {
        match c {
            Component::Prefix(_) | Component::RootDir => {
                return Err(format!(
                    "`{d}` is absolute: name a directory inside the candidate's, relative to it"
                ))
            }
            Component::CurDir => {}
            Component::ParentDir => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| format!("`{d}` leads out of the candidate's directory"))?;
            }
            Component::Normal(_) => depth += 1,
        }
    }
    Ok(())
}

/// A name that goes into paths, tables and summary.md: not empty, and no `/`, `\`, `|` or
/// control character (newlines included).
pub fn check_name(file: &Path, field: &str, name: &str) -> Result<(), CandidateError> {
    let bad = |why: String| Err(CandidateError::new(file, Some(field), why));
    if name.trim().is_empty() {
        return bad("must not be empty".into());
    }
    if let Some(c) = name
        .chars()
        .find(|&c| matches!(c, '/' | '\\' | '|') || c.is_control())
    {
        return bad(format!(
            "{:?} may not contain {c:?} (no `/`, `\\`, `|` or control characters)",
            name
        ));
    }
    Ok(())
}

/// A grid or block: 1 to 3 values (x, y, z), missing ones 1.
fn dims(file: &Path, field: &str, values: &[toml::Value]) -> Result<[Dim; 3], CandidateError> {
    if values.is_empty() || values.len() > 3 {
        return Err(CandidateError::new(
            file,
            Some(field),
            format!(
                "{} values: a grid or block has 1 to 3 (x, y, z; missing ones are 1)",
                values.len()
            ),
        ));
    }
    let mut out = [Dim::Number(1), Dim::Number(1), Dim::Number(1)];
    for (axis, v) in values.iter().enumerate() {
        out[axis] = dim(file, &format!("{field}[{axis}]"), v)?;
    }
    Ok(out)
}

/// An integer or an expression (a string).
fn dim(file: &Path, field: &str, v: &toml::Value) -> Result<Dim, CandidateError> {
    match v {
        toml::Value::Integer(n) => Ok(Dim::Number(*n)),
        toml::Value::String(s) => Ok(Dim::Expr(s.clone())),
        other => Err(CandidateError::new(
            file,
            Some(field),
            format!(
                "expected an integer or an expression string, got a {} ({other})",
                other.type_str()
            ),
        )),
    }
}

/// The field at byte `offset` of `text` (where TOML reports an error), as `launch[1].grid`:
/// the array-of-tables header above it with its index, and the key of its line (or, for
/// `missing field`/`unknown field` errors, the field the message names).
fn field_at(text: &str, offset: usize, message: &str) -> Option<String> {
    let offset = offset.min(text.len());
    let mut table: Option<String> = None;
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    let mut key: Option<String> = None;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if at > offset {
            break;
        }
        let t = line.trim();
        if let Some(name) = t.strip_prefix("[[").and_then(|r| r.split("]]").next()) {
            let name = name.trim().to_string();
            let n = counts.entry(name.clone()).or_insert(0);
            table = Some(format!("{name}[{n}]"));
            *n += 1;
            key = None;
        } else if let Some(name) = t.strip_prefix('[').and_then(|r| r.split(']').next()) {
            table = Some(name.trim().to_string());
            key = None;
        } else if let Some((k, _)) = t.split_once('=') {
            let k = k.trim().trim_matches(['"', '\'']);
            if !k.is_empty() && !k.contains(['[', ']', ',', '#']) {
                key = Some(k.to_string());
            }
        }
        at += line.len();
    }
    let named = ["missing field `", "unknown field `", "duplicate key `"]
        .iter()
        .find_map(|p| message.split(p).nth(1)?.split('`').next());
    let key = named.map(String::from).or(key);
    match (table, key) {
        (Some(t), Some(k)) => Some(format!("{t}.{k}")),
        (Some(t), None) => Some(t),
        (None, k) => k,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
problem = "embedding_bag_sum"
name = "t"
source = "kernel.cu"
[[scratch]]
name = "tmp"
bytes = 64
[[launch]]
kernel = "k"
grid = ["ceil_div(B * 32, 256)", 1, 1]
block = [256, 1, 1]
args = ["weight", "indices", "offsets", "out", "B", "D"]
"#;

    fn error(text: &str) -> String {
        parse(Path::new("dir/candidate.toml"), text)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_good_manifest_parses_and_short_arrays_are_padded() {
        let m = parse(Path::new("x"), GOOD).unwrap();
        assert_eq!(m.launches[0].block, [256.into(), 1.into(), 1.into()]);
        let m = parse(Path::new("x"), &GOOD.replace("[256, 1, 1]", "[256]")).unwrap();
        assert_eq!(m.launches[0].block, [256.into(), 1.into(), 1.into()]);
        assert_eq!(m.scratch[0].bytes, Dim::Number(64));
    }

    #[test]
    fn four_values_in_a_grid_or_block_are_refused() {
        // Issue 13: the fourth value was silently dropped.
        let e = error(&GOOD.replace("[256, 1, 1]", "[256, 1, 1, 7]"));
        assert!(
            e.contains("dir/candidate.toml")
                && e.contains("launch[0].block")
                && e.contains("4 values"),
            "{e}"
        );
        let e = error(&GOOD.replace("\"ceil_div(B * 32, 256)\", 1, 1", ""));
        assert!(
            e.contains("launch[0].grid") && e.contains("0 values"),
            "{e}"
        );
        let e = error(&GOOD.replace("[256, 1, 1]", "[256, 1.5, 1]"));
        assert!(
            e.contains("launch[0].block[1]") && e.contains("float"),
            "{e}"
        );
    }

    #[test]
    fn names_that_break_paths_or_tables_are_refused() {
        let cases = [
            (GOOD.replace("name = \"t\"", "name = \"\""), "`name`"),
            (GOOD.replace("name = \"t\"", "name = \"a/b\""), "`name`"),
            (GOOD.replace("name = \"t\"", "name = \"a|b\""), "`name`"),
            (GOOD.replace("name = \"t\"", "name = \"a\\nb\""), "`name`"),
            (GOOD.replace("name = \"t\"", "name = \"a\\\\b\""), "`name`"),
            (GOOD.replace("\"tmp\"", "\"t\\tmp\""), "scratch[0].name"),
            (GOOD.replace("\"tmp\"", "\" \""), "scratch[0].name"),
            (
                GOOD.replace("kernel = \"k\"", "kernel = \"k|x\""),
                "launch[0].kernel",
            ),
            (
                GOOD.replace("kernel = \"k\"", "kernel = \"\""),
                "launch[0].kernel",
            ),
        ];
        for (text, field) in cases {
            let e = error(&text);
            assert!(e.contains("dir/candidate.toml") && e.contains(field), "{e}");
        }
    }

    #[test]
    fn expect_must_be_a_status() {
        // Issue 13: `expect = "banana"` was accepted.
        let e = error(&GOOD.replace("source", "expect = \"banana\"\nsource"));
        assert!(
            e.contains("field `expect`") && e.contains("banana") && e.contains("runtime_error"),
            "{e}"
        );
        for s in Status::ALL {
            let text = GOOD.replace("source", &format!("expect = \"{}\"\nsource", s.name()));
            assert_eq!(
                parse(Path::new("x"), &text).unwrap().expect.as_deref(),
                Some(s.name())
            );
        }
    }

    #[test]
    fn toml_errors_are_located_at_their_field() {
        let e = error(&GOOD.replace("kernel = \"k\"", "kernel = 3"));
        assert!(e.contains("field `launch[0].kernel`"), "{e}");
        let e = error(&GOOD.replace("args = [", "argz = 1\nargs = ["));
        assert!(e.contains("field `launch[0].argz`"), "{e}");
        let e = error(&GOOD.replace("kernel = \"k\"\n", ""));
        assert!(e.contains("launch[0].kernel"), "{e}");
        let e = error(&GOOD.replace("name = \"t\"", "name = [\"t\"]"));
        assert!(e.contains("field `name`"), "{e}");
        let e = error(&GOOD.replace("bytes = 64", "bytes = true"));
        assert!(e.contains("field `scratch[0].bytes`"), "{e}");
    }

    #[test]
    fn arch_options_and_include_parse_when_allowed() {
        let text = GOOD.replace(
            "source = \"kernel.cu\"",
            "source = \"kernel.cu\"\narch = \"sm_90a\"\noptions = [\"-DTILE=4\", \"--use_fast_math\", \"-std=c++20\"]\ninclude = [\"inc\", \"./third_party/x/../y\"]",
        );
        let m = parse(Path::new("x"), &text).unwrap();
        assert_eq!(m.arch.as_deref(), Some("sm_90a"));
        assert_eq!(m.options, ["-DTILE=4", "--use_fast_math", "-std=c++20"]);
        assert_eq!(m.include, ["inc", "./third_party/x/../y"]);
        let m = parse(Path::new("x"), GOOD).unwrap();
        assert!(m.arch.is_none() && m.options.is_empty() && m.include.is_empty());
    }

    #[test]
    fn bad_arch_options_and_include_name_the_file_and_field() {
        let with = |line: &str| {
            GOOD.replace(
                "source = \"kernel.cu\"",
                &format!("source = \"kernel.cu\"\n{line}"),
            )
        };
        let cases = [
            ("arch = \"sm_91\"", "field `arch`", "sm_90a"),
            ("arch = \"hopper\"", "field `arch`", "not an arch"),
            ("arch = 90", "field `arch`", "malformed"),
            (
                "options = [\"-DOK\", \"-G\"]",
                "field `options[1]`",
                "not allowed",
            ),
            (
                "options = [\"-I/usr/include\"]",
                "field `options[0]`",
                "`include`",
            ),
            (
                "options = [\"-arch=sm_80\"]",
                "field `options[0]`",
                "`arch`",
            ),
            (
                "options = [\"-maxrregcount=1000\"]",
                "field `options[0]`",
                "allow-list",
            ),
            (
                "options = [\"-DA -DB\"]",
                "field `options[0]`",
                "C identifier",
            ),
            ("options = \"-DA\"", "field `options`", "malformed"),
            (
                "include = [\"/usr/include\"]",
                "field `include[0]`",
                "absolute",
            ),
            (
                "include = [\"ok\", \"../other\"]",
                "field `include[1]`",
                "leads out",
            ),
            (
                "include = [\"a/../../b\"]",
                "field `include[0]`",
                "leads out",
            ),
            ("include = [\"\"]", "field `include[0]`", "empty"),
        ];
        for (line, field, why) in cases {
            let e = error(&with(line));
            assert!(
                e.contains("dir/candidate.toml") && e.contains(field) && e.contains(why),
                "{line}: {e}"
            );
        }
    }
}
