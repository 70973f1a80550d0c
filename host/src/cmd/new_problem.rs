//! `dlrm-bench new-problem NAME --like EXISTING`: writes a new problem's three files from a
//! sibling's (problem module, kernel module, KernelBench file), names replaced, and registers
//! it everywhere a problem is registered: its line in `bench-problems/src/problems/mod.rs`'s
//! `catalog!`, its `pub mod` in `gpu-kernels/src/kernels/mod.rs` (kernels register with the
//! emulator themselves), a stub entry in `tools/torch_peer.py`'s `PROBLEMS` and its name in
//! `tools/kernel_classes.py`'s `PROBLEMS` (the workload profiler's). The consistency test (`host/tests/consistency.rs`) then proves nothing was forgotten.
//!
//! Names are replaced as text: the sibling's snake-case name (which also prefixes its kernels,
//! `embedding_bag_sum_reference` → `embedding_bag_max_reference`) and its type name. A kernel of
//! the sibling's kernel module whose name lacks that prefix (`aten_ge_outer_i64`) gets the new
//! name as a prefix, so the PTX never holds two entries of one name.
//!
//! It also writes a candidate's skeleton: [`candidate_template`] is a `candidate.toml` for a
//! problem whose one launch passes every tensor, size and scalar ([`template_params`], in that
//! order), and [`TemplateParam::cuda_decl`] the matching kernel parameters (`dlrm-bench prompt`
//! prints both).
use anyhow::{bail, ensure, Context};
use bench_problems::{Problem, Role, TensorSpec};
use data_gen::DType;
use std::path::{Path, PathBuf};

/// What `new-problem` writes and changes.
#[derive(Debug)]
pub struct Scaffold {
    /// Files written (new).
    pub written: Vec<PathBuf>,
    /// Files where the problem was registered.
    pub registered: Vec<PathBuf>,
}

/// `embedding_bag_max` → `EmbeddingBagMax`.
pub(crate) fn type_name(snake: &str) -> String {
    snake
        .split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

fn valid_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !name.contains("__")
        && !name.ends_with('_')
}

fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

fn write_new(path: &Path, text: &str) -> anyhow::Result<()> {
    ensure!(!path.exists(), "{} exists already", path.display());
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// The kernels a kernel module declares with `kernel!` (`pub unsafe fn NAME(` inside one).
fn declared_kernels(source: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut in_kernel = false;
    for line in source.lines() {
        let t = line.trim_start();
        if t.starts_with("kernel!") {
            in_kernel = true;
        } else if in_kernel {
            if let Some(rest) = t.strip_prefix("pub unsafe fn ") {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                names.push(name);
                in_kernel = false;
            }
        }
    }
    names
}

/// Replaces whole identifiers `from` by `to` (no identifier character on either side).
fn replace_ident(text: &str, from: &str, to: &str) -> String {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(from) {
        let before = rest[..i].chars().next_back();
        let after = rest[i + from.len()..].chars().next();
        out.push_str(&rest[..i]);
        if before.is_some_and(is_ident) || after.is_some_and(is_ident) {
            out.push_str(from);
        } else {
            out.push_str(to);
        }
        rest = &rest[i + from.len()..];
    }
    out.push_str(rest);
    out
}

/// Sets the catalog number in the module's `problem_identity!(NUMBER, ...)`.
fn set_number(module: &str, number: u32) -> anyhow::Result<String> {
    let start = module
        .find("problem_identity!(")
        .context("the sibling's module has no `problem_identity!(..)`")?
        + "problem_identity!(".len();
    let comma = start
        + module[start..]
            .find(',')
            .context("`problem_identity!` has no number")?;
    let indent: String = module[start..comma]
        .chars()
        .take_while(|c| c.is_whitespace())
        .collect();
    Ok(format!(
        "{}{indent}{number}{}",
        &module[..start],
        &module[comma..]
    ))
}

/// Adds `line` to the `catalog! { ... }` invocation of `problems/mod.rs`.
fn register_in_catalog(mod_rs: &str, line: &str) -> anyhow::Result<String> {
    let at = mod_rs
        .find("\ncatalog! {\n")
        .context("no `catalog! {` invocation")?;
    let end = at
        + 1
        + mod_rs[at + 1..]
            .find("\n}")
            .context("`catalog!` is not closed")?;
    Ok(format!("{}\n{line}{}", &mod_rs[..end], &mod_rs[end..]))
}

/// Adds `pub mod NAME;` to the sorted run of `pub mod` lines of `kernels/mod.rs`.
fn register_kernel_module(mod_rs: &str, name: &str) -> String {
    let mut lines: Vec<String> = mod_rs.lines().map(str::to_string).collect();
    let first = lines.iter().position(|l| l.starts_with("pub mod "));
    let Some(first) = first else {
        return format!("{mod_rs}pub mod {name};\n");
    };
    let count = lines[first..]
        .iter()
        .take_while(|l| l.starts_with("pub mod "))
        .count();
    let mut block: Vec<String> = lines.drain(first..first + count).collect();
    block.push(format!("pub mod {name};"));
    block.sort();
    for (k, l) in block.into_iter().enumerate() {
        lines.insert(first + k, l);
    }
    lines.join("\n") + "\n"
}

/// Adds `name` at the end of the `PROBLEMS` tuple of `tools/kernel_classes.py` (the workload
/// profiler's problems, in the catalog's order: a new problem has the last number).
fn register_problem_class(classes: &str, name: &str) -> anyhow::Result<String> {
    let start = classes
        .find("PROBLEMS = (\n")
        .context("no `PROBLEMS = (` tuple")?;
    let end = start
        + classes[start..]
            .find("\n)")
            .context("the PROBLEMS tuple is not closed")?
        + 1;
    Ok(format!(
        "{}    \"{name}\",\n{}",
        &classes[..end],
        &classes[end..]
    ))
}

/// Copies the sibling's entry of `PROBLEMS` in `torch_peer.py` as a stub for `name`.
fn register_peer(peer: &str, like: &str, name: &str) -> anyhow::Result<String> {
    let key = format!("    \"{like}\": {{\n");
    let start = peer
        .find(&key)
        .with_context(|| format!("no entry \"{like}\" in PROBLEMS"))?;
    let end = start
        + peer[start..]
            .find("\n    },\n")
            .context("the sibling's entry is not closed")?
        + "\n    },\n".len();
    let body = &peer[start + key.len()..end];
    let stub = format!(
        "    \"{name}\": {{\n        # {STUB_MARK} {name} --like {like}`: these are \
         {like}'s;\n        # write {name}'s logical bytes and float64 oracle (or \"error\").\n{body}"
    );
    Ok(format!("{}{stub}{}", &peer[..end], &peer[end..]))
}

/// The start of the line `new-problem` puts in every file it writes or registers in, until the
/// contributor has made it the new problem's (host/tests/consistency.rs fails while one is left).
pub const STUB_MARK: &str = "Stub from `dlrm-bench new-problem";

/// Writes problem `name` (catalog number `number`) from sibling `like` (number `like_number`)
/// under the repository root `repo`.
pub fn new_problem(
    repo: &Path,
    name: &str,
    number: u32,
    like: &str,
    like_number: u32,
) -> anyhow::Result<Scaffold> {
    if !valid_name(name) {
        bail!("`{name}`: a problem name is snake_case (a-z, 0-9, single underscores)");
    }
    ensure!(
        !name.contains(like) && !like.contains(name),
        "`{name}` and `{like}`: one name may not contain the other (names are replaced as text)"
    );
    let problems = repo.join("bench-problems/src/problems");
    let kernels = repo.join("gpu-kernels/src/kernels");
    let kernelbench = repo.join("bench-problems/kernelbench");
    let (like_type, new_type) = (type_name(like), type_name(name));

    let kernel_src = read(&kernels.join(format!("{like}.rs")))?;
    let mut renames: Vec<(String, String)> = declared_kernels(&kernel_src)
        .into_iter()
        .filter(|k| !k.contains(like))
        .map(|k| (k.clone(), format!("{name}_{k}")))
        .collect();
    renames.push((like_type.clone(), new_type.clone()));
    let rename = |text: &str| {
        let mut t = text.replace(like, name);
        for (from, to) in &renames {
            t = replace_ident(&t, from, to);
        }
        renumber(&t, name, like_number, number)
    };

    let module = set_number(
        &rename(&read(&problems.join(format!("{like}.rs")))?),
        number,
    )?;
    let kb_like = kernelbench.join(format!("{like_number:02}_{like}.py"));
    // Each file starts with the stub mark host/tests/consistency.rs fails on until it is gone.
    let mark = |comment: &str, what: &str| {
        format!(
            "{comment} {STUB_MARK} {name} --like {like}`: {like}'s {what}; make them {name}'s, \
             then delete this line.\n"
        )
    };
    let files = [
        (
            problems.join(format!("{name}.rs")),
            mark("//", "signature, sizes, inputs and oracle") + &module,
        ),
        (
            kernels.join(format!("{name}.rs")),
            mark("//", "reference kernels") + &rename(&kernel_src),
        ),
        (
            kernelbench.join(format!("{number:02}_{name}.py")),
            mark("#", "Model and inputs") + &rename(&read(&kb_like)?),
        ),
    ];
    for (path, _) in &files {
        ensure!(!path.exists(), "{} exists already", path.display());
    }
    let catalog = problems.join("mod.rs");
    let catalog_text = register_in_catalog(&read(&catalog)?, &format!("    {name}::{new_type},"))?;
    let kernel_mod = kernels.join("mod.rs");
    let kernel_mod_text = register_kernel_module(&read(&kernel_mod)?, name);
    let peer = repo.join("tools/torch_peer.py");
    let peer_text = register_peer(&read(&peer)?, like, name)?;
    let classes = repo.join("tools/kernel_classes.py");
    let classes_text = register_problem_class(&read(&classes)?, name)?;

    for (path, text) in &files {
        write_new(path, text)?;
    }
    for (path, text) in [
        (&catalog, catalog_text),
        (&kernel_mod, kernel_mod_text),
        (&peer, peer_text),
        (&classes, classes_text),
    ] {
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(Scaffold {
        written: files.into_iter().map(|(p, _)| p).collect(),
        registered: vec![catalog, kernel_mod, peer],
    })
}

/// `dlrm-bench new-problem NAME --like EXISTING [--repo DIR]`: the next catalog number, the
/// sibling from the registry; returns what to tell the user.
pub fn new_problem_command(repo: &Path, name: &str, like: &str) -> anyhow::Result<String> {
    let sibling = bench_problems::find_problem(like)
        .with_context(|| format!("unknown problem `{like}` (see `dlrm-bench list`)"))?;
    ensure!(
        bench_problems::find_problem(name).is_none(),
        "problem `{name}` exists already"
    );
    ensure!(
        repo.join("bench-problems/src/problems/mod.rs").is_file(),
        "{} is not the DLRM-Bench repository (no bench-problems/src/problems/mod.rs); pass --repo",
        repo.display()
    );
    let number = bench_problems::all_problems().len() as u32 + 1;
    let done = new_problem(repo, name, number, like, sibling.number())?;
    let list = |paths: &[PathBuf]| {
        paths
            .iter()
            .map(|p| format!("  {}", p.strip_prefix(repo).unwrap_or(p).display()))
            .collect::<Vec<_>>()
            .join("\n")
    };
    Ok(format!(
        "problem {number}, `{name}`, from `{like}`.\nwritten:\n{}\nregistered in:\n{}\n\
         Now make them compute `{name}` (signature, inputs, oracle, work, reference kernels, \
         the KernelBench Model, the peer's bytes and oracle), then run `cargo test --workspace`; \
         docs/adding-a-problem.md is the guide.",
        list(&done.written),
        list(&done.registered)
    ))
}

/// One parameter of [`candidate_template`]'s kernel, in the order its `args` pass them.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum TemplateParam {
    /// A tensor of the signature: a device pointer.
    Tensor(TensorSpec),
    /// A size symbol, passed as a 64-bit integer; `data_dependent` when each input set gives
    /// its value (`N`, ...) rather than the preset.
    Size { name: String, data_dependent: bool },
    /// A float scalar of the input sets (`lr`, `eps`), passed as an f32; `value` is a `ci`
    /// set's.
    Scalar { name: String, value: f64 },
}

impl TemplateParam {
    /// The name `args` passes it by.
    pub fn name(&self) -> &str {
        match self {
            TemplateParam::Tensor(t) => t.name,
            TemplateParam::Size { name, .. } | TemplateParam::Scalar { name, .. } => name,
        }
    }

    /// Its CUDA C++ declaration: `const float* weight`, `long long B`, `float lr`.
    pub(crate) fn cuda_decl(&self) -> String {
        match self {
            TemplateParam::Tensor(t) => {
                let constness = if t.role == Role::Input { "const " } else { "" };
                format!("{constness}{}* {}", cuda_type(t.dtype), t.name)
            }
            TemplateParam::Size { name, .. } => format!("long long {name}"),
            TemplateParam::Scalar { name, .. } => format!("float {name}"),
        }
    }
}

/// The CUDA C++ element type of `dtype` (`__half` is `<cuda_fp16.h>`'s, `__nv_bfloat16`
/// `<cuda_bf16.h>`'s).
pub(crate) fn cuda_type(dtype: DType) -> &'static str {
    match dtype {
        DType::F64 => "double",
        DType::F32 => "float",
        DType::F16 => "__half",
        DType::BF16 => "__nv_bfloat16",
        DType::I64 => "long long",
        DType::I32 => "int",
        DType::U8 => "unsigned char",
    }
}

/// What a size symbol of a problem is to a kernel.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum SizeKind {
    /// Set by the preset.
    Fixed,
    /// Set by each input set (`N`, a permuted count); a preset value, if it gives one, is only
    /// the expected one.
    DataDependent,
    /// A switch of the input generator that only edge sets turn on (`DISTINCT`, `SAME_ID`),
    /// with the recipe's words for it; no kernel needs it.
    Switch(String),
}

/// A size symbol of a problem and what it is.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SizeSymbol {
    pub name: String,
    pub kind: SizeKind,
}

/// The size symbols of `problem`, found from a `ci` input set: the fixed ones, then the
/// data-dependent ones (absent from the preset's sizes, or given another value by the set),
/// then the generator switches (sizes that the recipe describes in words), each group sorted.
pub(crate) fn size_symbols(problem: &dyn Problem) -> Vec<SizeSymbol> {
    let preset = bench_problems::Preset::Ci;
    let fixed = problem.sizes(preset);
    let recipe = problem.recipe(preset);
    let (sizes, _) = crate::candidate::sample_symbols(problem);
    let mut symbols: Vec<SizeSymbol> = sizes
        .iter()
        .map(|(name, value)| {
            let kind = match recipe.get(name).and_then(|v| v.as_str()) {
                Some(words) => SizeKind::Switch(words.to_string()),
                None if fixed.get(name) == Some(value) => SizeKind::Fixed,
                None => SizeKind::DataDependent,
            };
            SizeSymbol {
                name: name.clone(),
                kind,
            }
        })
        .collect();
    let rank = |k: &SizeKind| match k {
        SizeKind::Fixed => 0,
        SizeKind::DataDependent => 1,
        SizeKind::Switch(_) => 2,
    };
    symbols.sort_by_key(|s| rank(&s.kind));
    symbols
}

/// The parameters of `problem`'s template kernel: its tensors in signature order, then its
/// size symbols ([`size_symbols`], switches left out), then the float scalars of a `ci` input
/// set.
pub(crate) fn template_params(problem: &dyn Problem) -> Vec<TemplateParam> {
    let (_, scalars) = crate::candidate::sample_symbols(problem);
    let mut params: Vec<TemplateParam> = problem
        .tensors()
        .into_iter()
        .map(TemplateParam::Tensor)
        .collect();
    params.extend(size_symbols(problem).into_iter().filter_map(|s| {
        let data_dependent = match s.kind {
            SizeKind::Fixed => false,
            SizeKind::DataDependent => true,
            SizeKind::Switch(_) => return None,
        };
        Some(TemplateParam::Size {
            name: s.name,
            data_dependent,
        })
    }));
    params.extend(scalars.iter().map(|(name, &value)| TemplateParam::Scalar {
        name: name.clone(),
        value,
    }));
    params
}

/// The kernel [`candidate_template`] launches.
pub(crate) fn template_kernel(problem: &dyn Problem) -> String {
    format!("{}_kernel", problem.name())
}

/// A `candidate.toml` for `problem` (CUDA C++, `kernel.cu`): one launch of
/// [`template_kernel`] with a thread per element of the first output (or in-out tensor),
/// passing [`template_params`]. It loads as it is; the kernel is the author's to write.
pub(crate) fn candidate_template(problem: &dyn Problem) -> String {
    let params = template_params(problem);
    let tensors = problem.tensors();
    let first = tensors
        .iter()
        .find(|t| t.role == Role::Output)
        .or_else(|| tensors.iter().find(|t| t.role == Role::InOut));
    let (elements, which) = match first {
        Some(t) => {
            let dims: Vec<String> = t
                .shape
                .iter()
                .map(|d| {
                    if d.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                        d.to_string()
                    } else {
                        format!("({d})")
                    }
                })
                .collect();
            (dims.join(" * "), format!("element of `{}`", t.name))
        }
        None => ("1".to_string(), "block".to_string()),
    };
    let args: Vec<String> = params.iter().map(|p| format!("{:?}", p.name())).collect();
    let decls: Vec<String> = params.iter().map(TemplateParam::cuda_decl).collect();
    let kernel = template_kernel(problem);
    format!(
        "# Candidate for problem {number}, `{name}` (docs/guide/candidates.md).\n\
         # kernel.cu defines the kernel this launch names, with one parameter per `args` entry:\n\
         #   extern \"C\" __global__ void {kernel}(\n\
         {decls})\n\
         # Tensor and scratch names pass device pointers; sizes and scalars pass numbers at the\n\
         # width of the kernel's parameter (4 or 8 bytes). Rename `name`, change the mapping.\n\
         problem = \"{name}\"\n\
         name = \"my_candidate\"\n\
         source = \"kernel.cu\"\n\
         \n\
         # [[scratch]]                  # optional device buffers: poisoned, not zeroed\n\
         # name = \"tmp\"\n\
         # bytes = \"4096\"               # an expression over the sizes, like grid\n\
         \n\
         [[launch]]\n\
         kernel = \"{kernel}\"\n\
         # One thread per {which}.\n\
         grid = [\"ceil_div(max({elements}, 1), 256)\", 1, 1]\n\
         block = [256, 1, 1]\n\
         shared_bytes = 0\n\
         args = [{args}]\n",
        number = problem.number(),
        name = problem.name(),
        decls = decls
            .iter()
            .map(|d| format!("#       {d}"))
            .collect::<Vec<_>>()
            .join(",\n"),
        args = args.join(", "),
    )
}

/// `text` with the sibling's number (`from`) made the new problem's (`to`) where it names the
/// problem: "Problem 6" and "problem 6" (not "problem 60"), and the KernelBench file
/// `06_<name>.py`.
fn renumber(text: &str, name: &str, from: u32, to: u32) -> String {
    let mut t = text.replace(&format!("{from:02}_{name}"), &format!("{to:02}_{name}"));
    for word in ["Problem", "problem"] {
        let pattern = format!("{word} {from}");
        let mut out = String::with_capacity(t.len());
        let mut rest = t.as_str();
        while let Some(at) = rest.find(&pattern) {
            let after = &rest[at + pattern.len()..];
            out.push_str(&rest[..at]);
            if after.starts_with(|c: char| c.is_ascii_digit()) {
                out.push_str(&pattern);
            } else {
                out.push_str(&format!("{word} {to}"));
            }
            rest = after;
        }
        out.push_str(rest);
        t = out;
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sibling_s_number_becomes_the_new_problem_s() {
        let text = "//! Problem 6, `x`: see problem 6 and problem 60 (`kernelbench/06_x.py`).";
        assert_eq!(
            renumber(text, "x", 6, 13),
            "//! Problem 13, `x`: see problem 13 and problem 60 (`kernelbench/13_x.py`)."
        );
    }

    /// A scratch copy of the files `new-problem` reads and changes.
    fn scratch_repo(tag: &str, siblings: &[(&str, u32)]) -> PathBuf {
        let real = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let dir =
            std::env::temp_dir().join(format!("dlrm-bench-scaffold-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut files = vec![
            "bench-problems/src/problems/mod.rs".to_string(),
            "gpu-kernels/src/kernels/mod.rs".into(),
            "tools/torch_peer.py".into(),
            "tools/kernel_classes.py".into(),
        ];
        for (like, n) in siblings {
            files.push(format!("bench-problems/src/problems/{like}.rs"));
            files.push(format!("gpu-kernels/src/kernels/{like}.rs"));
            files.push(format!("bench-problems/kernelbench/{n:02}_{like}.py"));
        }
        for f in files {
            std::fs::create_dir_all(dir.join(&f).parent().unwrap()).unwrap();
            std::fs::copy(real.join(&f), dir.join(&f)).unwrap();
        }
        dir
    }

    #[test]
    fn writes_the_three_files_and_registers_them() {
        let repo = scratch_repo("bag", &[("embedding_bag_sum", 1)]);
        let s = new_problem(&repo, "embedding_bag_max", 13, "embedding_bag_sum", 1).unwrap();
        assert_eq!(s.written.len(), 3);
        let module = read(&repo.join("bench-problems/src/problems/embedding_bag_max.rs")).unwrap();
        assert!(module.contains("pub struct EmbeddingBagMax;"));
        assert!(
            module.contains("problem_identity!(\n        13,\n"),
            "{module}"
        );
        assert!(module.contains("\"embedding_bag_max_reference\""));
        // The first line is the stub mark (naming the sibling); nothing after it does, and no
        // file holds the sibling's number where it names the problem.
        let (mark, body) = module.split_once('\n').unwrap();
        assert!(
            mark.starts_with(&format!("// {STUB_MARK} embedding_bag_max")),
            "{mark}"
        );
        assert!(!body.contains("EmbeddingBagSum") && !body.contains("embedding_bag_sum"));
        assert!(!body.contains("Problem 1,") && !body.contains("01_embedding_bag_max"));
        let kb = read(&repo.join("bench-problems/kernelbench/13_embedding_bag_max.py")).unwrap();
        assert!(
            kb.starts_with(&format!("# {STUB_MARK} embedding_bag_max")),
            "{kb}"
        );
        let kernels = read(&repo.join("gpu-kernels/src/kernels/embedding_bag_max.rs")).unwrap();
        assert!(kernels.contains("pub unsafe fn embedding_bag_max_reference("));
        assert!(repo
            .join("bench-problems/kernelbench/13_embedding_bag_max.py")
            .exists());
        let catalog = read(&repo.join("bench-problems/src/problems/mod.rs")).unwrap();
        let at = catalog
            .find("    embedding_bag_max::EmbeddingBagMax,\n}")
            .unwrap();
        assert!(at > catalog.find("fm_interaction::FmInteraction,").unwrap());
        let kmod = read(&repo.join("gpu-kernels/src/kernels/mod.rs")).unwrap();
        let (a, b) = (
            kmod.find("pub mod embedding_bag_max;").unwrap(),
            kmod.find("pub mod embedding_bag_sum;").unwrap(),
        );
        assert!(a < b, "kept sorted");
        let peer = read(&repo.join("tools/torch_peer.py")).unwrap();
        assert!(peer.contains("    \"embedding_bag_max\": {\n        # Stub"));
        assert!(
            peer.contains("    \"embedding_bag_sum\": {"),
            "the sibling stays"
        );
        let classes = read(&repo.join("tools/kernel_classes.py")).unwrap();
        assert!(
            classes.contains("    \"fm_interaction\",\n    \"embedding_bag_max\",\n)"),
            "last in the profiler's PROBLEMS"
        );
        // Twice is refused, and nothing is half-written.
        let again = new_problem(&repo, "embedding_bag_max", 14, "embedding_bag_sum", 1);
        assert!(again.unwrap_err().to_string().contains("exists already"));
        assert!(!repo
            .join("bench-problems/kernelbench/14_embedding_bag_max.py")
            .exists());
        std::fs::remove_dir_all(repo).unwrap();
    }

    #[test]
    fn kernels_without_the_sibling_prefix_get_the_new_name_as_prefix() {
        let repo = scratch_repo("seq", &[("sequence_gather_padded_bf16", 6)]);
        new_problem(
            &repo,
            "sequence_gather_padded_f32",
            13,
            "sequence_gather_padded_bf16",
            6,
        )
        .unwrap();
        let kernels =
            read(&repo.join("gpu-kernels/src/kernels/sequence_gather_padded_f32.rs")).unwrap();
        assert!(kernels.contains("pub unsafe fn sequence_gather_padded_f32_aten_ge_outer_i64("));
        assert!(!kernels.contains("fn aten_ge_outer_i64("));
        let module =
            read(&repo.join("bench-problems/src/problems/sequence_gather_padded_f32.rs")).unwrap();
        assert!(module.contains("sequence_gather_padded_f32_aten_ge_outer_i64"));
        std::fs::remove_dir_all(repo).unwrap();
    }

    #[test]
    fn bad_names_are_refused_before_anything_is_written() {
        let repo = scratch_repo("bad", &[("embedding_bag_sum", 1)]);
        for bad in [
            "EmbeddingBagMax",
            "bag-max",
            "_x",
            "x__y",
            "embedding_bag_sum_v2",
        ] {
            assert!(
                new_problem(&repo, bad, 13, "embedding_bag_sum", 1).is_err(),
                "{bad}"
            );
        }
        let catalog = read(&repo.join("bench-problems/src/problems/mod.rs")).unwrap();
        assert!(!catalog.contains("13"), "nothing registered");
        std::fs::remove_dir_all(repo).unwrap();
    }

    #[test]
    fn identifiers_are_replaced_whole() {
        assert_eq!(replace_ident("a ab a_b (a)", "a", "z"), "z ab a_b (z)");
        assert_eq!(
            type_name("dot_interaction_backward"),
            "DotInteractionBackward"
        );
    }
}
