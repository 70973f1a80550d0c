//! `candidate.toml` as written, and the checks of its fields that need no problem sizes: names
//! (candidate, scratch buffers, kernels), the `expect` status, and grid and block arrays of 1 to
//! 3 values (missing axes are 1). The file is first read into loose TOML values, so that a
//! value of the wrong kind is an error naming its field rather than a serde message about an
//! untagged enum; a TOML syntax or type error is located at its field by its position.
use crate::backend::triton::{self, TritonSpec};
use crate::results::record::Status;
use bench_problems::{Dim, LaunchSpec, ScratchSpec};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// A candidate that could not be loaded: the file and what is wrong with it.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{file}: {message}")]
pub struct CandidateError {
    pub file: PathBuf,
    /// The field at fault, when one is.
    pub field: Option<String>,
    pub message: String,
}

impl CandidateError {
    /// An error in `file`, at `field` when there is one (the message then starts with it).
    pub fn new(file: &Path, field: Option<&str>, message: impl Into<String>) -> Self {
        let message = message.into();
        let message = match field {
            Some(f) => format!("field `{f}`: {message}"),
            None => message,
        };
        CandidateError {
            file: file.to_path_buf(),
            field: field.map(String::from),
            message,
        }
    }
}

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
    /// The `[triton]` table of a Triton candidate (a `.py` source).
    pub triton: Option<TritonSpec>,
    /// CUDA C++ only: the NVRTC arch (`sm_90a`, `compute_90`, ...; one of
    /// [`crate::toolchain::nvrtc_flags::ARCHES`]); `None` is the device's.
    pub arch: Option<String>,
    /// CUDA C++ only: NVRTC flags and defines of [`crate::toolchain::nvrtc_flags::check_option`]'s list.
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
    triton: Option<RawTriton>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTriton {
    function: String,
    signature: toml::Table,
    #[serde(default)]
    constexprs: toml::Table,
    #[serde(default)]
    num_warps: Option<toml::Value>,
    #[serde(default)]
    num_stages: Option<toml::Value>,
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
    /// Required, except for a Triton kernel (whose block is `num_warps` × 32).
    #[serde(default)]
    block: Option<Vec<toml::Value>>,
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
    let is_py = Path::new(&raw.source)
        .extension()
        .is_some_and(|e| e == "py");
    let triton = match (raw.triton, is_py) {
        (Some(t), true) => Some(triton_table(file, t)?),
        (None, false) => None,
        (Some(_), false) => {
            return Err(err(
                "triton",
                format!(
                    "a [triton] table goes with a Triton source (a `.py` file), not `{}`",
                    raw.source
                ),
            ))
        }
        (None, true) => {
            return Err(err(
                "triton",
                format!(
                    "`{}` is a Triton source: it needs a [triton] table (function, signature, constexprs, num_warps, num_stages)",
                    raw.source
                ),
            ))
        }
    };
    let mut launches = Vec::with_capacity(raw.launches.len());
    for (i, l) in raw.launches.into_iter().enumerate() {
        check_name(file, &format!("launch[{i}].kernel"), &l.kernel)?;
        let grid = dims(file, &format!("launch[{i}].grid"), &l.grid)?;
        let block_field = format!("launch[{i}].block");
        let block = match (&l.block, &triton) {
            (Some(b), _) => Some(dims(file, &block_field, b)?),
            (None, Some(_)) => None,
            (None, None) => {
                return Err(err(&block_field, "missing field `block`".into()));
            }
        };
        let (block, shared) = match &triton {
            Some(t) => triton_launch(file, i, t, &l, block)?,
            None => {
                let shared = match &l.shared_bytes {
                    Some(v) => dim(file, &format!("launch[{i}].shared_bytes"), v)?,
                    None => Dim::Number(0),
                };
                (block.expect("given"), shared)
            }
        };
        let args: Vec<&str> = l.args.iter().map(String::as_str).collect();
        launches.push(LaunchSpec::new(&l.kernel, grid, block, &args).with_shared(shared));
    }
    if let Some(a) = &raw.arch {
        if crate::toolchain::nvrtc_flags::ptx_arch(a).is_none() {
            let sm: Vec<String> = crate::toolchain::nvrtc_flags::ARCHES
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
        crate::toolchain::nvrtc_flags::check_option(o)
            .map_err(|e| err(&format!("options[{k}]"), e))?;
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
        triton,
    })
}

/// Checks a `[triton]` table: the function's name, each signature entry a type a launch can
/// pass, each constexpr an integer, `num_warps` a power of two up to 32 (1024 threads),
/// `num_stages` 1 to 16; Triton's defaults (4 warps, 3 stages) where they are left out.
fn triton_table(file: &Path, t: RawTriton) -> Result<TritonSpec, CandidateError> {
    let err = |field: &str, message: String| CandidateError::new(file, Some(field), message);
    let identifier = |field: &str, name: &str| {
        let ok = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if ok {
            Ok(())
        } else {
            Err(err(field, format!("`{name}` is not a Python identifier")))
        }
    };
    identifier("triton.function", &t.function)?;
    let mut signature = Vec::with_capacity(t.signature.len());
    for (name, ty) in &t.signature {
        let field = format!("triton.signature.{name}");
        identifier(&field, name)?;
        let ty = ty.as_str().ok_or_else(|| {
            err(
                &field,
                format!("expected a Triton type string such as \"*fp32\" or \"i64\", got {ty}"),
            )
        })?;
        triton::param_width(ty).map_err(|e| err(&field, e))?;
        signature.push((name.clone(), ty.to_string()));
    }
    let mut constexprs = Vec::with_capacity(t.constexprs.len());
    for (name, value) in &t.constexprs {
        let field = format!("triton.constexprs.{name}");
        identifier(&field, name)?;
        if t.signature.contains_key(name) {
            return Err(err(
                &field,
                format!("`{name}` is in the signature too: a parameter is passed at launch or compiled in, not both"),
            ));
        }
        let v = value.as_integer().ok_or_else(|| {
            err(
                &field,
                format!(
                    "a constexpr is an integer, got a {} ({value})",
                    value.type_str()
                ),
            )
        })?;
        constexprs.push((name.clone(), v));
    }
    let small =
        |field: &str, v: &Option<toml::Value>, default: u32, ok: fn(i64) -> bool, rule: &str| {
            match v {
                None => Ok(default),
                Some(toml::Value::Integer(n)) if ok(*n) => Ok(*n as u32),
                Some(other) => Err(err(field, format!("{rule}, got {other}"))),
            }
        };
    let num_warps = small(
        "triton.num_warps",
        &t.num_warps,
        triton::DEFAULT_NUM_WARPS,
        |n| (1..=32).contains(&n) && (n as u64).is_power_of_two(),
        "a power of two from 1 to 32 (the block is num_warps × 32 threads)",
    )?;
    let num_stages = small(
        "triton.num_stages",
        &t.num_stages,
        triton::DEFAULT_NUM_STAGES,
        |n| (1..=16).contains(&n),
        "an integer from 1 to 16",
    )?;
    Ok(TritonSpec {
        function: t.function,
        signature,
        constexprs,
        num_warps,
        num_stages,
    })
}

/// A launch of a Triton kernel: it names the function, passes one argument per signature entry,
/// and leaves the block (`num_warps` × 32, or given equal to it) and the shared memory (from
/// Triton's metadata) to the compiled kernel.
fn triton_launch(
    file: &Path,
    i: usize,
    t: &TritonSpec,
    l: &RawLaunch,
    block: Option<[Dim; 3]>,
) -> Result<([Dim; 3], Dim), CandidateError> {
    let err = |field: &str, message: String| {
        CandidateError::new(file, Some(&format!("launch[{i}].{field}")), message)
    };
    if l.kernel != t.function {
        return Err(err(
            "kernel",
            format!(
                "`{}`: a Triton candidate's launches run its function `{}`",
                l.kernel, t.function
            ),
        ));
    }
    let threads = t.block_threads() as i64;
    let want = [Dim::Number(threads), Dim::Number(1), Dim::Number(1)];
    if let Some(b) = block {
        if b != want {
            return Err(err(
                "block",
                format!(
                    "a Triton kernel's block is num_warps × 32 = {threads} threads (num_warps = {}); leave `block` out, or give [{threads}, 1, 1]",
                    t.num_warps
                ),
            ));
        }
    }
    if l.shared_bytes.is_some() {
        return Err(err(
            "shared_bytes",
            "a Triton kernel's shared memory comes from its compiled metadata; leave `shared_bytes` out".into(),
        ));
    }
    if l.args.len() != t.signature.len() {
        return Err(err(
            "args",
            format!(
                "{} arguments, but [triton.signature] has {} parameters passed at launch (constexprs are compiled in, not passed)",
                l.args.len(),
                t.signature.len()
            ),
        ));
    }
    Ok((want, Dim::Number(0)))
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
pub(crate) fn check_name(file: &Path, field: &str, name: &str) -> Result<(), CandidateError> {
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
mod tests;
