//! Candidates: a directory with `candidate.toml` naming the problem, the device code (CUDA C++
//! compiled by NVRTC, a `.ptx` file, or a kernel of the project's own `gpu-kernels` crate),
//! optional scratch buffers and the launch plan. The runner never executes a candidate's host
//! code. A bad manifest is an error naming the file and the field; it never stops a run.
pub mod launch_limits;
pub mod manifest;
#[cfg(test)]
mod manifest_properties;
pub mod plan;
pub mod set;
pub(crate) use crate::backend::CudaFlags;
pub use crate::backend::ModuleSource;
pub use crate::candidate::manifest::CandidateError;
pub(crate) use crate::candidate::manifest::Manifest;
pub use bench_problems::ScratchSpec;
use bench_problems::{find_problem, LaunchSpec, Problem};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A loaded candidate (or the reference, which uses the same form). The orchestrator loads it
/// once and hands it to workers as it is (serialised in their [`WorkerSpec`]), so a worker runs
/// exactly what was validated.
///
/// [`WorkerSpec`]: crate::runner::worker::WorkerSpec
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Candidate {
    pub name: String,
    pub problem: String,
    /// Directory, or `reference` for the built-in reference.
    pub origin: String,
    /// Group for aggregate metrics: the directory above the candidate (`examples`, `tuned`, ...).
    pub group: String,
    pub source: ModuleSource,
    pub scratch: Vec<ScratchSpec>,
    pub launches: Vec<LaunchSpec>,
    /// The status it must end with, if the manifest says.
    pub expect: Option<String>,
}

/// Reads and validates `dir/candidate.toml` and its source file.
pub fn load_candidate(dir: &Path) -> Result<Candidate, CandidateError> {
    let file = dir.join("candidate.toml");
    let text = std::fs::read_to_string(&file)
        .map_err(|e| CandidateError::new(&file, None, format!("cannot read: {e}")))?;
    let manifest = crate::candidate::manifest::parse(&file, &text)?;
    let problem = known_problem(&file, &manifest.problem)?;
    check_plan(&file, &manifest, problem)?;
    let source = load_source(&file, dir, &manifest)?;
    check_nvrtc_fields(&file, &manifest, &source)?;
    let group = candidate_group(dir, &manifest.problem);
    Ok(Candidate {
        name: manifest.name,
        problem: manifest.problem,
        origin: dir.display().to_string(),
        group,
        source,
        scratch: manifest.scratch,
        launches: manifest.launches,
        expect: manifest.expect,
    })
}

/// The catalog's problem `name`, or an error at `problem` listing the known ones.
fn known_problem(file: &Path, name: &str) -> Result<&'static dyn Problem, CandidateError> {
    find_problem(name).ok_or_else(|| {
        let known: Vec<&str> = bench_problems::all_problems()
            .iter()
            .map(|p| p.name())
            .collect();
        CandidateError::new(
            file,
            Some("problem"),
            format!("unknown problem `{}` (one of: {})", name, known.join(", ")),
        )
    })
}

/// Checks the launch plan and scratch buffers: every grid, block, shared-memory and scratch
/// expression evaluates over the problem's sizes, and every argument names a tensor, a
/// scratch buffer or an expression.
fn check_plan(
    file: &Path,
    manifest: &Manifest,
    problem: &dyn Problem,
) -> Result<(), CandidateError> {
    if manifest.launches.is_empty() {
        return Err(CandidateError::new(
            file,
            Some("launch"),
            "at least one [[launch]] is needed",
        ));
    }
    let tensors = problem.tensors();
    // A small sample input set gives the data-dependent sizes (N, ...) and the float scalars
    // (lr, eps, ...) the expressions may name.
    let (sizes, scalars) = sample_symbols(problem);
    check_scratch_names(file, &manifest.scratch, problem, &sizes, &scalars)?;
    for (i, l) in manifest.launches.iter().enumerate() {
        for (field, dims) in [("grid", &l.grid), ("block", &l.block)] {
            for (axis, d) in dims.iter().enumerate() {
                check_expr(
                    file,
                    &format!("launch[{i}].{field}[{axis}]"),
                    d,
                    &sizes,
                    &manifest.scratch,
                )?;
            }
        }
        check_expr(
            file,
            &format!("launch[{i}].shared_bytes"),
            &l.shared_bytes,
            &sizes,
            &manifest.scratch,
        )?;
        for (j, arg) in l.args.iter().enumerate() {
            let known = tensors.iter().any(|t| t.name == arg)
                || manifest.scratch.iter().any(|s| &s.name == arg);
            if !known {
                bench_problems::expr::eval_number(arg, &sizes, &scalars).map_err(|e| {
                    CandidateError::new(
                        file,
                        Some(&format!("launch[{i}].args[{j}]")),
                        format!(
                            "`{arg}` is neither a tensor of {}, a scratch buffer, nor an expression over its sizes and scalars ({e})",
                            problem.name()
                        ),
                    )
                })?;
            }
        }
    }
    for (i, s) in manifest.scratch.iter().enumerate() {
        check_expr(file, &format!("scratch[{i}].bytes"), &s.bytes, &sizes, &[])?;
    }
    Ok(())
}

/// The candidate's kernels: the project's own (`gpu-kernels`), a binary, or a source file read
/// and told apart by its extension.
fn load_source(
    file: &Path,
    dir: &Path,
    manifest: &Manifest,
) -> Result<ModuleSource, CandidateError> {
    if manifest.source != "gpu-kernels" {
        source_inside(file, dir, &manifest.source)?;
    }
    let source = match manifest.source.as_str() {
        "gpu-kernels" => ModuleSource::Builtin,
        src if is_binary(src) => binary_source(file, dir, src)?,
        src => {
            let path = dir.join(src);
            let code = std::fs::read_to_string(&path).map_err(|e| {
                CandidateError::new(
                    file,
                    Some("source"),
                    format!("cannot read {}: {e}", path.display()),
                )
            })?;
            match path.extension().and_then(|e| e.to_str()) {
                Some("cu") => ModuleSource::Cuda {
                    file: path,
                    code,
                    flags: cuda_flags(file, dir, manifest)?,
                },
                Some("ptx") => ModuleSource::Ptx { file: path, code },
                Some("py") => {
                    let mut spec = manifest.triton.clone().expect("a .py source has [triton]");
                    check_triton_source(file, &path, &code, &mut spec)?;
                    ModuleSource::Triton { file: path, spec }
                }
                _ => {
                    return Err(CandidateError::new(
                        file,
                        Some("source"),
                        format!(
                            "`{src}`: expected a .cu, .ptx, .cubin, .fatbin or .py (Triton) file, or `gpu-kernels`"
                        ),
                    ))
                }
            }
        }
    };
    Ok(source)
}

/// The `source` file must lie in the candidate's directory, as `include` must: not above it
/// (`../../x.cu`), not absolute, not through a link that leads out. A binary not built yet
/// (absent) is checked by name only.
fn source_inside(file: &Path, dir: &Path, src: &str) -> Result<(), CandidateError> {
    let bad = |why: String| CandidateError::new(file, Some("source"), why);
    let relative = Path::new(src);
    let lexical = relative.components().all(|c| {
        matches!(
            c,
            std::path::Component::Normal(_) | std::path::Component::CurDir
        )
    });
    if !lexical {
        return Err(bad(format!(
            "`{src}` leads out of the candidate's directory (name a file inside it, relative \
             to it)"
        )));
    }
    let path = dir.join(relative);
    if !path.exists() && is_binary(src) {
        return Ok(());
    }
    let (Ok(root), Ok(real)) = (std::fs::canonicalize(dir), std::fs::canonicalize(&path)) else {
        return Ok(()); // a missing file is reported where it is read
    };
    if !real.starts_with(&root) {
        return Err(bad(format!(
            "`{src}` leads out of the candidate's directory (to {})",
            real.display()
        )));
    }
    Ok(())
}

/// `arch`, `options` and `include` are NVRTC's: refused for any source but CUDA C++.
fn check_nvrtc_fields(
    file: &Path,
    manifest: &Manifest,
    source: &ModuleSource,
) -> Result<(), CandidateError> {
    if !matches!(source, ModuleSource::Cuda { .. }) {
        let set = [
            ("arch", manifest.arch.is_some()),
            ("options", !manifest.options.is_empty()),
            ("include", !manifest.include.is_empty()),
        ];
        if let Some((field, _)) = set.iter().find(|(_, s)| *s) {
            return Err(CandidateError::new(
                file,
                Some(field),
                format!(
                    "only a CUDA C++ (.cu) source is compiled with NVRTC; `{}` is not",
                    manifest.source
                ),
            ));
        }
    }
    Ok(())
}
/// Whether `src` names a binary built offline (`.cubin`, `.fatbin`).
fn is_binary(src: &str) -> bool {
    Path::new(src)
        .extension()
        .is_some_and(|e| e == "cubin" || e == "fatbin")
}

/// A `.cubin` or `.fatbin` source: its bytes, whose magic must be right; a file not built yet is
/// [`ModuleSource::Unavailable`] (the candidate is `skipped`, saying how to build it), so that a
/// fresh clone, which has the `.cu` but not the binary, runs and checks clean.
fn binary_source(file: &Path, dir: &Path, src: &str) -> Result<ModuleSource, CandidateError> {
    let path = dir.join(src);
    if !path.exists() {
        let reason = format!(
            "{} is not built (binaries are not committed): run `tools/build_cubin.sh {}` on a host with nvcc (CUDA 12.4 or newer), then run again",
            path.display(),
            dir.display()
        );
        return Ok(ModuleSource::Unavailable { file: path, reason });
    }
    let image = std::fs::read(&path).map_err(|e| {
        CandidateError::new(
            file,
            Some("source"),
            format!("cannot read {}: {e}", path.display()),
        )
    })?;
    crate::backend::binary::check_image(&image).map_err(|e| {
        CandidateError::new(file, Some("source"), format!("{}: {e}", path.display()))
    })?;
    Ok(ModuleSource::Binary { file: path, image })
}

/// A Triton source must define the manifest's function under `@triton.jit`, and each of its
/// parameters must be in the signature or the constexprs and nothing else there; the signature
/// is put in the function's parameter order (the order of a launch's `args`). Checked on the
/// text: nothing of the candidate's Python runs here.
fn check_triton_source(
    file: &Path,
    path: &Path,
    code: &str,
    spec: &mut crate::backend::triton::TritonSpec,
) -> Result<(), CandidateError> {
    let function = spec.function.as_str();
    let Some(names) = python_params(code, function) else {
        return Err(CandidateError::new(
            file,
            Some("triton.function"),
            format!("{} defines no function `{function}`", path.display()),
        ));
    };
    let err = |field: &str, m: String| Err(CandidateError::new(file, Some(field), m));
    for n in &names {
        let given = spec.signature.iter().any(|(s, _)| s == n)
            || spec.constexprs.iter().any(|(c, _)| c == n);
        if !given {
            return err(
                "triton.signature",
                format!("parameter `{n}` of `{function}` is neither in [triton.signature] (passed at launch) nor in [triton.constexprs] (compiled in)"),
            );
        }
    }
    let extra = |table: &str, name: &str| {
        err(
            &format!("triton.{table}.{name}"),
            format!(
                "`{function}` in {} has no parameter `{name}` (its parameters: {})",
                path.display(),
                names.join(", ")
            ),
        )
    };
    if let Some((n, _)) = spec.signature.iter().find(|(n, _)| !names.contains(n)) {
        return extra("signature", n);
    }
    if let Some((n, _)) = spec.constexprs.iter().find(|(n, _)| !names.contains(n)) {
        return extra("constexprs", n);
    }
    spec.signature
        .sort_by_key(|(n, _)| names.iter().position(|p| p == n));
    if !code.contains("triton.jit") && !code.contains("@jit") {
        return Err(CandidateError::new(
            file,
            Some("triton.function"),
            format!(
                "{}: no `@triton.jit` decorator (a Triton candidate is one @triton.jit function)",
                path.display()
            ),
        ));
    }
    Ok(())
}

/// The parameter names of `def function(...)` in Python source `code` (annotations and
/// defaults dropped; the list may span lines), or `None` if no such definition is found.
pub(crate) fn python_params(code: &str, function: &str) -> Option<Vec<String>> {
    let mut rest = code;
    let open = loop {
        let at = rest.find("def ")?;
        let after = rest[at + 4..].trim_start();
        let line_start = rest[..at].rfind('\n').map_or(0, |i| i + 1);
        let at_line_start = rest[line_start..at].trim().is_empty();
        if let Some(r) = after.strip_prefix(function) {
            let r = r.trim_start();
            if at_line_start && r.starts_with('(') {
                break &r[1..];
            }
        }
        rest = &rest[at + 4..];
    };
    // Up to the matching `)`, splitting on top-level commas; comments dropped first.
    let open: Vec<&str> = open
        .lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .collect();
    let mut depth = 0usize;
    let mut params = vec![String::new()];
    for c in open.join("\n").chars() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' if depth == 0 => break,
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                params.push(String::new());
                continue;
            }
            _ => {}
        }
        params.last_mut().expect("one").push(c);
    }
    Some(
        params
            .iter()
            .map(|p| p.split([':', '=']).next().unwrap_or("").trim().to_string())
            .filter(|p| !p.is_empty() && p != "*" && p != "/")
            .collect(),
    )
}

/// The NVRTC settings of a CUDA C++ candidate in `dir`: its `include` directories must exist
/// and, links resolved, lie inside `dir` (the manifest checked the paths as written); they are
/// passed to NVRTC as absolute paths.
fn cuda_flags(file: &Path, dir: &Path, m: &Manifest) -> Result<CudaFlags, CandidateError> {
    let root = std::fs::canonicalize(dir).map_err(|e| {
        CandidateError::new(file, None, format!("cannot resolve its directory: {e}"))
    })?;
    let mut include = Vec::with_capacity(m.include.len());
    for (k, d) in m.include.iter().enumerate() {
        let bad = |why: String| CandidateError::new(file, Some(&format!("include[{k}]")), why);
        let path = std::fs::canonicalize(dir.join(d))
            .map_err(|e| bad(format!("`{d}`: cannot read {}: {e}", dir.join(d).display())))?;
        if !path.is_dir() {
            return Err(bad(format!("`{d}` is not a directory")));
        }
        if !path.starts_with(&root) {
            return Err(bad(format!(
                "`{d}` leads out of the candidate's directory (to {})",
                path.display()
            )));
        }
        include.push(path);
    }
    Ok(CudaFlags {
        arch: m.arch.clone(),
        options: m.options.clone(),
        include,
    })
}

/// The group a candidate is reported in: the directory above it (`candidates/examples/<problem>`
/// → `examples`), or the one above that when candidates are filed per problem
/// (`candidates/exploits/<problem>/<name>` → `exploits`).
pub(crate) fn candidate_group(dir: &Path, problem: &str) -> String {
    let name = |p: Option<&Path>| {
        p.and_then(|p| p.file_name())
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let parent = dir.parent();
    if name(parent) == problem {
        name(parent.and_then(Path::parent))
    } else {
        name(parent)
    }
}

/// Scratch names must be unique and may not shadow a tensor, size symbol or scalar of the
/// problem (arguments are looked up as buffers first, so `out` would silently replace the
/// output).
fn check_scratch_names(
    file: &Path,
    scratch: &[ScratchSpec],
    problem: &dyn bench_problems::Problem,
    sizes: &bench_problems::Sizes,
    scalars: &BTreeMap<String, f64>,
) -> Result<(), CandidateError> {
    let tensors = problem.tensors();
    for (k, s) in scratch.iter().enumerate() {
        let clash = if tensors.iter().any(|t| t.name == s.name) {
            Some(format!("a tensor of {}", problem.name()))
        } else if sizes.contains_key(&s.name) || scalars.contains_key(&s.name) {
            Some(format!("a size or scalar of {}", problem.name()))
        } else {
            scratch[..k]
                .iter()
                .position(|o| o.name == s.name)
                .map(|j| format!("scratch[{j}]"))
        };
        if let Some(other) = clash {
            return Err(CandidateError::new(
                file,
                Some(&format!("scratch[{k}].name")),
                format!(
                    "`{}` is already the name of {other}; rename the buffer",
                    s.name
                ),
            ));
        }
    }
    Ok(())
}

/// Size symbols that only exist once inputs are generated (N), set to 1 for static validation.
fn with_data_sizes(sizes: &bench_problems::Sizes) -> bench_problems::Sizes {
    let mut s = sizes.clone();
    s.entry("N".into()).or_insert(1);
    s
}

/// Size symbols (data-dependent ones included) and float scalars of a `ci` input set of
/// `problem`; the static sizes alone if generation fails.
pub(crate) fn sample_symbols(
    problem: &dyn bench_problems::Problem,
) -> (bench_problems::Sizes, BTreeMap<String, f64>) {
    let base = problem.sizes(bench_problems::Preset::Ci);
    match problem.generate(bench_problems::Preset::Ci, &base, 0.into()) {
        Ok(set) => (set.sizes, set.scalars),
        Err(_) => (with_data_sizes(&base), BTreeMap::new()),
    }
}

fn check_expr(
    file: &Path,
    field: &str,
    d: &bench_problems::Dim,
    sizes: &bench_problems::Sizes,
    _scratch: &[ScratchSpec],
) -> Result<(), CandidateError> {
    d.eval(&with_data_sizes(sizes))
        .map(|_| ())
        .map_err(|e| CandidateError::new(file, Some(field), e.to_string()))
}

/// Every directory under `root` (recursively) that holds a `candidate.toml`, sorted. Symbolic
/// links to directories below `root` are not followed (a link to a parent would loop, and a
/// link to a sibling would find its candidates twice); `root` itself may be a link.
pub fn discover(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        if dir.join("candidate.toml").exists() {
            found.push(dir.clone());
        }
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for e in entries.flatten() {
                // `file_type` does not follow links: a link is neither a dir nor a file here.
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push(e.path());
                }
            }
        }
    }
    found.sort();
    found
}

/// The candidate roots (`run --candidates`), each checked and made absolute, so that a
/// `--resume` from another working directory finds them: a root that does not exist, is not
/// a directory, or holds no `candidate.toml` anywhere below it is an error naming it.
pub(crate) fn check_roots(roots: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    roots
        .iter()
        .map(|root| {
            let meta = std::fs::metadata(root).map_err(|e| {
                anyhow::anyhow!("--candidates {}: cannot read it: {e}", root.display())
            })?;
            anyhow::ensure!(
                meta.is_dir(),
                "--candidates {}: a file, not a directory (name directories holding \
                 candidate.toml, or one candidate's directory)",
                root.display()
            );
            anyhow::ensure!(
                !discover(root).is_empty(),
                "--candidates {}: no candidate.toml in it or below it",
                root.display()
            );
            std::fs::canonicalize(root).map_err(|e| {
                anyhow::anyhow!("--candidates {}: cannot resolve it: {e}", root.display())
            })
        })
        .collect()
}

/// The candidate directories under every root, each once however often the roots name it
/// (the same root twice, or one inside another), in the roots' order.
pub(crate) fn discover_all(roots: &[PathBuf]) -> Vec<PathBuf> {
    let mut seen = std::collections::BTreeSet::new();
    roots
        .iter()
        .flat_map(|root| discover(root))
        .filter(|dir| seen.insert(std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone())))
        .collect()
}

/// The reference of a problem as a candidate.
pub fn reference_candidate(problem: &dyn bench_problems::Problem) -> Candidate {
    Candidate {
        name: "reference".into(),
        problem: problem.name().into(),
        origin: "reference".into(),
        group: "reference".into(),
        source: ModuleSource::Builtin,
        scratch: problem.reference_scratch(),
        launches: problem.reference(),
        expect: Some("correct".into()),
    }
}

#[cfg(test)]
mod tests;
