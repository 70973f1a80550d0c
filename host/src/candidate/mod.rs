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
pub use crate::backend::{CudaFlags, ModuleSource};
pub use crate::candidate::manifest::{CandidateError, Manifest};
pub use bench_problems::ScratchSpec;
use bench_problems::{find_problem, LaunchSpec};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A loaded candidate (or the reference, which uses the same form).
#[derive(Clone, Debug)]
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
    let problem = find_problem(&manifest.problem).ok_or_else(|| {
        let known: Vec<&str> = bench_problems::all_problems()
            .iter()
            .map(|p| p.name())
            .collect();
        CandidateError::new(
            &file,
            Some("problem"),
            format!(
                "unknown problem `{}` (one of: {})",
                manifest.problem,
                known.join(", ")
            ),
        )
    })?;
    if manifest.launches.is_empty() {
        return Err(CandidateError::new(
            &file,
            Some("launch"),
            "at least one [[launch]] is needed",
        ));
    }
    let tensors = problem.tensors();
    // A small sample input set gives the data-dependent sizes (N, ...) and the float scalars
    // (lr, eps, ...) the expressions may name.
    let (sizes, scalars) = sample_symbols(problem);
    check_scratch_names(&file, &manifest.scratch, problem, &sizes, &scalars)?;
    for (i, l) in manifest.launches.iter().enumerate() {
        for (field, dims) in [("grid", &l.grid), ("block", &l.block)] {
            for (axis, d) in dims.iter().enumerate() {
                check_expr(
                    &file,
                    &format!("launch[{i}].{field}[{axis}]"),
                    d,
                    &sizes,
                    &manifest.scratch,
                )?;
            }
        }
        check_expr(
            &file,
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
                        &file,
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
        check_expr(&file, &format!("scratch[{i}].bytes"), &s.bytes, &sizes, &[])?;
    }
    let source = match manifest.source.as_str() {
        "gpu-kernels" => ModuleSource::Builtin,
        src if is_binary(src) => binary_source(&file, dir, src)?,
        src => {
            let path = dir.join(src);
            let code = std::fs::read_to_string(&path).map_err(|e| {
                CandidateError::new(
                    &file,
                    Some("source"),
                    format!("cannot read {}: {e}", path.display()),
                )
            })?;
            match path.extension().and_then(|e| e.to_str()) {
                Some("cu") => ModuleSource::Cuda {
                    file: path,
                    code,
                    flags: cuda_flags(&file, dir, &manifest)?,
                },
                Some("ptx") => ModuleSource::Ptx { file: path, code },
                Some("py") => {
                    let mut spec = manifest.triton.clone().expect("a .py source has [triton]");
                    check_triton_source(&file, &path, &code, &mut spec)?;
                    ModuleSource::Triton { file: path, spec }
                }
                _ => {
                    return Err(CandidateError::new(
                        &file,
                        Some("source"),
                        format!(
                            "`{src}`: expected a .cu, .ptx, .cubin, .fatbin or .py (Triton) file, or `gpu-kernels`"
                        ),
                    ))
                }
            }
        }
    };
    if !matches!(source, ModuleSource::Cuda { .. }) {
        let set = [
            ("arch", manifest.arch.is_some()),
            ("options", !manifest.options.is_empty()),
            ("include", !manifest.include.is_empty()),
        ];
        if let Some((field, _)) = set.iter().find(|(_, s)| *s) {
            return Err(CandidateError::new(
                &file,
                Some(field),
                format!(
                    "only a CUDA C++ (.cu) source is compiled with NVRTC; `{}` is not",
                    manifest.source
                ),
            ));
        }
    }
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
pub fn python_params(code: &str, function: &str) -> Option<Vec<String>> {
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
pub fn candidate_group(dir: &Path, problem: &str) -> String {
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
        if dir.join("candidate.toml").is_file() {
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
pub fn check_roots(roots: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
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
pub fn discover_all(roots: &[PathBuf]) -> Vec<PathBuf> {
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
mod tests {
    use super::*;

    fn write(dir: &Path, manifest: &str, files: &[(&str, &str)]) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("candidate.toml"), manifest).unwrap();
        for (name, body) in files {
            std::fs::write(dir.join(name), body).unwrap();
        }
    }

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("dlrm-bench-cand-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn candidate_roots_must_hold_candidates_and_are_made_absolute() {
        let root = tmp("roots");
        let empty = root.join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        let file = root.join("plain.toml");
        std::fs::write(&file, "x").unwrap();
        let missing = root.join("missing");
        for (bad, why) in [
            (&missing, "cannot read it"),
            (&empty, "no candidate.toml"),
            (&file, "a file, not a directory"),
        ] {
            let e = check_roots(std::slice::from_ref(bad))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!("--candidates {}", bad.display())) && e.contains(why),
                "{e}"
            );
        }
        write(&root.join("tree/one"), "problem = \"x\"", &[]);
        let back = check_roots(&[root.join("tree/../tree")]).unwrap();
        assert_eq!(back, [std::fs::canonicalize(root.join("tree")).unwrap()]);
        assert!(back[0].is_absolute());
        std::fs::remove_dir_all(&root).unwrap();
    }

    const GOOD: &str = r#"
problem = "embedding_bag_sum"
name = "t"
source = "kernel.cu"
[[launch]]
kernel = "k"
grid = ["ceil_div(B * 32, 256)", 1, 1]
block = [256, 1, 1]
args = ["weight", "indices", "offsets", "out", "B", "D"]
"#;

    #[test]
    fn a_good_manifest_loads() {
        let d = tmp("good").join("examples").join("t");
        write(
            &d,
            GOOD,
            &[("kernel.cu", "extern \"C\" __global__ void k() {}")],
        );
        let c = load_candidate(&d).unwrap();
        assert_eq!(c.group, "examples");
        let group = |p: &str| candidate_group(Path::new(p), "embedding_bag_sum");
        assert_eq!(
            group("candidates/exploits/embedding_bag_sum/zeros"),
            "exploits"
        );
        assert_eq!(group("candidates/examples/embedding_bag_sum"), "examples");
        assert!(matches!(c.source, ModuleSource::Cuda { .. }));
        assert_eq!(c.launches[0].shared_bytes, bench_problems::Dim::Number(0));
    }

    #[test]
    fn errors_name_the_file_and_the_field() {
        let cases = [
            (
                GOOD.replace("embedding_bag_sum", "no_such_problem"),
                "problem",
            ),
            (
                GOOD.replace("ceil_div(B * 32, 256)", "ceil_div(B * 32,"),
                "launch[0].grid[0]",
            ),
            (
                GOOD.replace("\"B\", \"D\"]", "\"B\", \"Q\"]"),
                "launch[0].args[5]",
            ),
            (GOOD.replace("kernel.cu", "missing.cu"), "source"),
            (
                GOOD.replace("block = [256, 1, 1]", "block = [256, 1, 1]\nblok = 3"),
                "blok",
            ),
            ("problem = 3".to_string(), "problem"),
            // Issue 13: a scratch buffer named like a tensor replaced it as an argument.
            (
                GOOD.replace("[[launch]]", "[[scratch]]\nname = \"out\"\nbytes = 8\n[[launch]]"),
                "scratch[0].name",
            ),
            (
                GOOD.replace("[[launch]]", "[[scratch]]\nname = \"B\"\nbytes = 8\n[[launch]]"),
                "scratch[0].name",
            ),
            (
                GOOD.replace(
                    "[[launch]]",
                    "[[scratch]]\nname = \"t\"\nbytes = 8\n[[scratch]]\nname = \"t\"\nbytes = 8\n[[launch]]",
                ),
                "scratch[1].name",
            ),
        ];
        for (i, (manifest, field)) in cases.iter().enumerate() {
            let d = tmp(&format!("bad{i}"));
            write(&d, manifest, &[("kernel.cu", "")]);
            let e = load_candidate(&d).unwrap_err();
            let text = e.to_string();
            assert!(text.contains("candidate.toml"), "case {i}: {text}");
            assert!(
                text.contains(&format!("field `{field}`")),
                "case {i}: expected field {field} in: {text}"
            );
        }
    }

    #[test]
    fn nvrtc_fields_reach_the_source_and_include_is_made_absolute() {
        let d = tmp("nvrtc-fields");
        let text = GOOD.replace(
            "source = \"kernel.cu\"",
            "source = \"kernel.cu\"\narch = \"sm_90a\"\noptions = [\"-DTILE=4\"]\ninclude = [\"inc\", \".\"]",
        );
        write(&d, &text, &[("kernel.cu", "")]);
        std::fs::create_dir_all(d.join("inc")).unwrap();
        let c = load_candidate(&d).unwrap();
        let ModuleSource::Cuda { flags, .. } = &c.source else {
            panic!("{:?}", c.source)
        };
        assert_eq!(flags.arch.as_deref(), Some("sm_90a"));
        assert_eq!(flags.options, ["-DTILE=4"]);
        let root = std::fs::canonicalize(&d).unwrap();
        assert_eq!(flags.include, [root.join("inc"), root.clone()]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn include_directories_must_exist_inside_and_fields_need_a_cu_source() {
        let d = tmp("nvrtc-bad");
        let with = |line: &str| {
            GOOD.replace(
                "source = \"kernel.cu\"",
                &format!("source = \"kernel.cu\"\n{line}"),
            )
        };
        // A link inside the directory that leads out of it.
        std::fs::create_dir_all(&d).unwrap();
        std::os::unix::fs::symlink(std::env::temp_dir(), d.join("out")).unwrap();
        std::fs::write(d.join("plain"), "").unwrap();
        let cases = [
            (with("include = [\"missing\"]"), "include[0]", "cannot read"),
            (
                with("include = [\".\", \"plain\"]"),
                "include[1]",
                "not a directory",
            ),
            (with("include = [\"out\"]"), "include[0]", "leads out"),
            (with("include = [\"../x\"]"), "include[0]", "leads out"),
            (
                with("arch = \"sm_90a\"").replace("kernel.cu", "kernel.ptx"),
                "arch",
                "only a CUDA C++",
            ),
            (
                with("options = [\"-DX\"]").replace("\"kernel.cu\"", "\"gpu-kernels\""),
                "options",
                "only a CUDA C++",
            ),
        ];
        for (i, (manifest, field, why)) in cases.iter().enumerate() {
            write(&d, manifest, &[("kernel.cu", ""), ("kernel.ptx", "")]);
            let e = load_candidate(&d).unwrap_err().to_string();
            assert!(
                e.contains("candidate.toml")
                    && e.contains(&format!("field `{field}`"))
                    && e.contains(why),
                "case {i}: {e}"
            );
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn float_scalars_and_data_dependent_sizes_are_valid_arguments() {
        let manifest = r#"
problem = "embedding_backward_rowwise_adagrad"
name = "t"
source = "kernel.cu"
[[launch]]
kernel = "k"
grid = ["ceil_div(N, 256)", 1, 1]
block = [256, 1, 1]
args = ["lr", "eps", "N"]
"#;
        let d = tmp("scalars");
        write(&d, manifest, &[("kernel.cu", "")]);
        load_candidate(&d).unwrap();
        let d = tmp("scalars-bad");
        write(
            &d,
            &manifest.replace("\"eps\"", "\"epsilon\""),
            &[("kernel.cu", "")],
        );
        let e = load_candidate(&d).unwrap_err().to_string();
        assert!(
            e.contains("launch[0].args[1]") && e.contains("epsilon"),
            "{e}"
        );
    }

    #[test]
    fn links_to_a_parent_do_not_loop_and_a_root_named_twice_counts_once() {
        // Issue 13: two links to a parent made discovery hang (one candidate found 41 times).
        let root = tmp("links");
        write(&root.join("a"), "", &[]);
        write(&root.join("b/c"), "", &[]);
        std::os::unix::fs::symlink(&root, root.join("b/up")).unwrap();
        std::os::unix::fs::symlink(root.join("b"), root.join("a/side")).unwrap();
        let found = discover(&root);
        assert_eq!(found, [root.join("a"), root.join("b/c")]);
        let twice = discover_all(&[root.clone(), root.join("b"), root.clone()]);
        assert_eq!(twice, [root.join("a"), root.join("b/c")]);
        // A root that is itself a link is read.
        let link = tmp("links-root");
        std::os::unix::fs::symlink(&root, &link).unwrap();
        assert_eq!(discover(&link), [link.join("a"), link.join("b/c")]);
        std::fs::remove_file(&link).unwrap();
        std::fs::remove_dir_all(&root).unwrap();
    }

    const TRITON: &str = r#"
problem = "fm_interaction"
name = "t"
source = "kernel.py"
[triton]
function = "fm"
[triton.signature]
out = "*fp32"
x = "*fp32"
B = "i32"
[triton.constexprs]
BLOCK = 32
[[launch]]
kernel = "fm"
grid = ["ceil_div(B, 32)"]
args = ["x", "out", "B"]
"#;

    const TRITON_PY: &str = "import triton\nimport triton.language as tl\n\n@triton.jit\ndef fm(x,  # the input\n       out, B: int,\n       BLOCK: tl.constexpr = 32):\n    pass\n";

    #[test]
    fn a_triton_candidate_loads_with_its_signature_in_the_functions_order() {
        let d = tmp("triton");
        write(&d, TRITON, &[("kernel.py", TRITON_PY)]);
        let c = load_candidate(&d).unwrap();
        let ModuleSource::Triton { spec, file } = &c.source else {
            panic!("{:?}", c.source)
        };
        assert!(file.ends_with("kernel.py"));
        let names: Vec<&str> = spec.signature.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["x", "out", "B"]);
        assert_eq!(c.launches[0].block[0], bench_problems::Dim::Number(128));
        assert_eq!(
            python_params("def  g(a, b=(1, 2), *, c: tl.constexpr):", "g").unwrap(),
            ["a", "b", "c"]
        );
        assert!(python_params("x = fm(1)\n", "fm").is_none());
    }

    #[test]
    fn triton_source_errors_name_the_file_and_the_field() {
        let cases = [
            (
                TRITON_PY.replace("def fm(", "def other("),
                "triton.function",
                "defines no function `fm`",
            ),
            (
                TRITON_PY.replace("@triton.jit\n", ""),
                "triton.function",
                "@triton.jit",
            ),
            (
                TRITON_PY.replace("out, B", "out, y, B"),
                "triton.signature",
                "parameter `y`",
            ),
            (
                TRITON_PY.replace(" B: int,", ""),
                "triton.signature.B",
                "no parameter `B`",
            ),
            (
                TRITON_PY.replace("BLOCK: tl.constexpr = 32", "BLK: tl.constexpr"),
                "triton.signature",
                "`BLK`",
            ),
        ];
        for (i, (py, field, want)) in cases.iter().enumerate() {
            let d = tmp(&format!("triton-bad{i}"));
            write(&d, TRITON, &[("kernel.py", py)]);
            let e = load_candidate(&d).unwrap_err().to_string();
            assert!(
                e.contains("candidate.toml")
                    && e.contains(&format!("field `{field}`"))
                    && e.contains(want),
                "case {i}: {e}"
            );
        }
        let d = tmp("triton-missing");
        write(&d, TRITON, &[]);
        let e = load_candidate(&d).unwrap_err().to_string();
        assert!(
            e.contains("field `source`") && e.contains("kernel.py"),
            "{e}"
        );
    }

    #[test]
    fn a_cubin_is_checked_by_its_magic_and_a_missing_one_says_how_to_build_it() {
        let manifest = GOOD.replace("kernel.cu", "kernel.cubin");
        let d = tmp("cubin-missing");
        write(&d, &manifest, &[]);
        let c = load_candidate(&d).unwrap();
        let ModuleSource::Unavailable { reason, .. } = &c.source else {
            panic!("{:?}", c.source)
        };
        assert!(
            reason.contains("tools/build_cubin.sh") && reason.contains("nvcc"),
            "{reason}"
        );
        let d = tmp("cubin-bad");
        write(
            &d,
            &manifest,
            &[("kernel.cubin", "extern \"C\" __global__ void k() {}")],
        );
        let e = load_candidate(&d).unwrap_err().to_string();
        assert!(
            e.contains("field `source`") && e.contains("neither a cubin"),
            "{e}"
        );
        let mut elf = b"\x7fELF\x02\x01\x01\x33".to_vec();
        elf.resize(18, 0);
        elf.extend_from_slice(&190u16.to_le_bytes());
        elf.resize(64, 0);
        std::fs::write(d.join("kernel.cubin"), &elf).unwrap();
        let c = load_candidate(&d).unwrap();
        assert!(matches!(&c.source, ModuleSource::Binary { image, .. } if image == &elf));
        let fat = GOOD.replace("kernel.cu", "kernel.fatbin");
        write(&d, &fat, &[]);
        std::fs::write(d.join("kernel.fatbin"), 0xBA55_ED50u32.to_le_bytes()).unwrap();
        assert!(matches!(
            load_candidate(&d).unwrap().source,
            ModuleSource::Binary { .. }
        ));
    }

    #[test]
    fn the_shipped_candidates_load() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../candidates");
        let dirs = discover(&root);
        assert!(!dirs.is_empty());
        for d in dirs {
            load_candidate(&d).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}
