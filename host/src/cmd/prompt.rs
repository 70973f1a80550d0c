//! `dlrm-bench prompt PROBLEM --format kernelbench|native [--preset P]`: what an LLM pipeline
//! sends to have an answer to one problem written, printed to stdout.
//!
//! - `kernelbench`: a KernelBench-style one-shot prompt (the layout of KernelBench's
//!   `prompts.toml`: task statement, an example architecture with its `ModelNew` answer using an
//!   inline CUDA kernel, the architecture to optimize, a note on inputs and checks, the output
//!   rules; the wording is ours). The architecture is the problem's
//!   `bench-problems/kernelbench/NN_name.py`, verbatim.
//! - `native`: a prompt for a candidate directory (`candidate.toml` plus device code): the
//!   problem's tensors with the preset's sizes, its semantics (the problem module's doc
//!   comment), its output bounds, the kernel parameters the runner passes, a `candidate.toml`
//!   template ([`crate::cmd::new_problem::candidate_template`]) and the rules a candidate must survive.
//!
//! The rules are [`RULES`], the one copy of them in code: a digest of the guide's "What a
//! candidate must survive" (docs/guide/must-survive.md) and docs/design.md §6, which stay the
//! source of truth (a test checks that the chapter still says what each rule claims). Both prompts take their rules from it.
//!
//! The KernelBench files and problem modules are embedded at build time (`build.rs` writes an
//! `include_str!` for every file of `bench-problems/kernelbench/` and
//! `bench-problems/src/problems/`), so the command works from any directory and a problem
//! added with `new-problem` needs no line here.
use crate::cmd::new_problem::{self, SizeKind, TemplateParam};
use bench_problems::{all_problems, Preset, Problem, Role, Sizes};
use std::fmt::Write as _;

mod sources {
    include!(concat!(env!("OUT_DIR"), "/problem_sources.rs"));
}

/// The example architecture of the KernelBench prompt (an add and a ReLU).
pub(crate) const EXAMPLE_MODEL: &str = include_str!("prompt/example_model.py");
/// Its answer: `ModelNew` with the two fused into one inline CUDA kernel.
pub(crate) const EXAMPLE_MODEL_NEW: &str = include_str!("prompt/example_model_new.py");

/// Which prompt to print.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// A KernelBench-style prompt asking for a `ModelNew` with inline CUDA.
    Kernelbench,
    /// A prompt asking for a DLRM-Bench candidate (`candidate.toml` and `kernel.cu`).
    Native,
}

/// Who a rule binds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Applies {
    /// Candidates and KernelBench answers alike.
    Both,
    /// Candidates only (launch plans, guard regions: the runner owns the buffers).
    Native,
}

/// One rule a candidate must survive.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rule {
    /// A short title.
    pub title: &'static str,
    pub text: &'static str,
    pub applies: Applies,
    /// Words docs/guide/must-survive.md says it with (the test `every_rule_is_in_the_guide`
    /// keeps the two together).
    #[cfg_attr(not(test), allow(dead_code))]
    pub readme: &'static [&'static str],
}

/// What a candidate must survive, in the order a run applies it (docs/guide/must-survive.md;
/// docs/design.md §6).
pub(crate) const RULES: &[Rule] = &[
    Rule {
        title: "Poisoned outputs",
        text: "Before every checked run, every output and scratch buffer is filled with poison \
               (NaN for floats, a sentinel for integers); nothing is zeroed for you. Write every \
               element the problem defines on every call: an element still holding poison fails, \
               and so does a 0.3% partial write.",
        applies: Applies::Both,
        readme: &["poisoned (NaN or a sentinel)"],
    },
    Rule {
        title: "Scale-invariant error against a float64 oracle",
        text: "Float outputs are compared with a float64 oracle by a scale-invariant test: the \
               relative L2 error ||out - ref||_2 / ||ref||_2 and the largest error divided by \
               ||ref||_inf must each be within the output's bound (listed with the outputs). \
               Small reference values buy no slack: all zeros or a constant fails, whatever the \
               magnitudes. Accumulate in the precision the problem states (fp32 unless it says \
               otherwise); a lower-precision accumulator misses the bound.",
        applies: Applies::Both,
        readme: &["scale-invariant bound of an f64 oracle"],
    },
    Rule {
        title: "Exact integers",
        text: "Integer outputs, and outputs that copy values rather than compute them (gathers, \
               permutes), must equal the oracle exactly. An output whose length depends on the \
               data is checked over its valid prefix, which must hold no poison; the rest of its \
               buffer is free.",
        applies: Applies::Both,
        readme: &["integers exact"],
    },
    Rule {
        title: "Fresh and secret input sets",
        text: "The answer runs on several input sets: sets from the public seed and edge cases \
               (an empty bag, one bag, the longest bag, special values) before it is timed, and \
               sets from a secret seed drawn when the run starts (published only when it ends), \
               which it first meets in a timed run; for the embedding-bag problems the row ids \
               are relabelled afresh before every timed run. Results must come from each call's \
               inputs: nothing can be precomputed, memoised or carried over from a previous call.",
        applies: Applies::Both,
        readme: &[
            "public input sets and the edge cases",
            "The timing runs on sets no check showed",
        ],
    },
    Rule {
        title: "Every timed run is checked",
        text: "Before every timed run the outputs are filled with a finite canary drawn anew \
               for the run (not the poison) and scratch with a fresh byte; after it the outputs \
               are compared with the reference's outputs on the same inputs. An answer right only \
               while it is being checked, one that keeps what its outputs already hold, or one \
               that writes part of its output fails as `incorrect`, naming the timed run.",
        applies: Applies::Both,
        readme: &["Every timed run is checked", "finite canary"],
    },
    Rule {
        title: "No state survives an execution",
        text: "Every module global variable (`__device__` arrays and scalars) is read when the \
               module loads and compared after every execution: one that changed is put back and \
               the answer fails as `incorrect`. A kernel may use a module global within a launch \
               (a tile counter) if it puts it back before it ends. More than 16 MiB of module \
               globals is refused: memory kept across launches is declared as `[[scratch]]`, \
               which is poisoned before every run. Device-side `malloc` has no heap.",
        applies: Applies::Native,
        readme: &[
            "No state outlives an execution",
            "More than 16 MiB of module globals",
        ],
    },
    Rule {
        title: "Input fingerprints",
        text: "Every input is fingerprinted before a run and compared byte for byte after it: \
               writing to an input (anything but an in-out tensor) fails as `incorrect`.",
        applies: Applies::Both,
        readme: &["every input compared byte for byte afterwards"],
    },
    Rule {
        title: "Guard regions",
        text: "Every buffer the kernels can reach lies between guard regions holding a random \
               pattern of the worker process; a write before or after a buffer, in a checked or a \
               timed run, is `out_of_bounds_write`, naming the buffer.",
        applies: Applies::Native,
        readme: &["guard regions"],
    },
    Rule {
        title: "The physical floor",
        text: "A time below the physical floor, the largest of compulsory bytes / measured HBM \
               bandwidth, logical bytes / measured L2 bandwidth and flops / measured fp32 rate, \
               is impossible and is recorded as `suspect`, never as a win.",
        applies: Applies::Both,
        readme: &["physical floor", "is `suspect`, never a win"],
    },
    Rule {
        title: "Launch checks and isolation",
        text: "A launch is refused before it runs when its `args` do not match the kernel's \
               parameters (count and widths, read from the compiled code), a grid or block axis \
               is zero or past the device's limits, dynamic shared memory is past the limit, or \
               scratch is past free memory; the error names the file and field. Each candidate \
               runs in its own worker process: a crash or an illegal address is \
               `runtime_error`, a hang `timeout`, and the run goes on.",
        applies: Applies::Native,
        readme: &["Launches are refused before they run", "worker process"],
    },
    Rule {
        title: "Winning",
        text: "The reference and the answer run interleaved on the same inputs, L2 flushed before \
               each timed run; a win needs the lower bound of the speedup's 95% confidence \
               interval above 1.",
        applies: Applies::Both,
        readme: &[],
    },
];

/// A problem by catalog name (`embedding_bag_sum`) or number (`1`).
pub fn find(spec: &str) -> anyhow::Result<&'static dyn Problem> {
    let all = all_problems();
    let found = match spec.trim().parse::<u32>() {
        Ok(n) => all.iter().copied().find(|p| p.number() == n),
        Err(_) => bench_problems::find_problem(spec.trim()),
    };
    found.ok_or_else(|| {
        anyhow::anyhow!(
            "unknown problem `{spec}`: give a name or a number 1-{} (see `dlrm-bench list`)",
            all.len()
        )
    })
}

/// The prompt of `format` for the problem named or numbered `spec` at `preset`.
pub fn render(spec: &str, format: Format, preset: Preset) -> anyhow::Result<String> {
    let problem = find(spec)?;
    match format {
        Format::Kernelbench => kernelbench(problem, preset),
        Format::Native => Ok(native(problem, preset)),
    }
}

/// The KernelBench file of `problem` (`NN_name.py`), as embedded.
pub(crate) fn kernelbench_source(problem: &dyn Problem) -> Option<&'static str> {
    let file = format!("{:02}_{}.py", problem.number(), problem.name());
    sources::KERNELBENCH_FILES
        .iter()
        .find(|(name, _)| *name == file)
        .map(|&(_, text)| text)
}

/// The doc comment at the top of `problem`'s module (`bench-problems/src/problems/NAME.rs`),
/// its rustdoc link brackets removed: the problem's semantics in words.
pub fn semantics(problem: &dyn Problem) -> Option<String> {
    let file = format!("{}.rs", problem.name());
    let (_, text) = sources::PROBLEM_MODULES.iter().find(|(n, _)| *n == file)?;
    let doc: Vec<&str> = text
        .lines()
        .map_while(|l| l.strip_prefix("//!"))
        .map(|l| l.strip_prefix(' ').unwrap_or(l))
        .collect();
    Some(doc.join("\n").replace("[`", "`").replace("`]", "`"))
}

/// `[E, D]` of a shape's expressions.
fn symbolic(shape: &[&str]) -> String {
    format!("[{}]", shape.join(", "))
}

/// The shape at `sizes`: each dimension's value, or its expression when it needs a
/// data-dependent size.
fn concrete(shape: &[&str], sizes: &Sizes) -> String {
    let dims: Vec<String> = shape
        .iter()
        .map(|e| match bench_problems::expr::eval(e, sizes) {
            Ok(v) => v.to_string(),
            Err(_) => e.to_string(),
        })
        .collect();
    format!("[{}]", dims.join(", "))
}

fn role(r: Role) -> &'static str {
    match r {
        Role::Input => "input (read only)",
        Role::Output => "output (poisoned before each run)",
        Role::InOut => "in-out (updated in place; reset to its initial value before each run)",
    }
}

/// One line per output (and in-out tensor): its bound, and whether only a prefix is checked.
fn bounds(problem: &dyn Problem) -> String {
    let mut out = String::new();
    for t in problem.tensors().iter().filter(|t| t.role != Role::Input) {
        let tol = problem.tolerance(t);
        let bound = if tol.exact {
            "exact".to_string()
        } else {
            format!(
                "relative L2 error <= {:e}, max error <= {:e} x ||ref||_inf",
                tol.rel_l2, tol.max_scaled
            )
        };
        let prefix = if problem.checked_prefix(t.name) {
            "; only its valid, data-dependent prefix is checked"
        } else {
            ""
        };
        let _ = writeln!(out, "- `{}` ({}): {bound}{prefix}", t.name, t.dtype.name());
    }
    out
}

/// The rules binding answers of `format`, as a numbered list.
fn rules(format: Format) -> String {
    let mut out = String::new();
    let chosen = RULES
        .iter()
        .filter(|r| format == Format::Native || r.applies == Applies::Both);
    for (k, r) in chosen.enumerate() {
        let _ = writeln!(out, "{}. **{}.** {}", k + 1, r.title, r.text);
    }
    out
}

/// The KernelBench-style prompt for `problem`; `preset` names the inputs `get_inputs` loads.
pub fn kernelbench(problem: &dyn Problem, preset: Preset) -> anyhow::Result<String> {
    let source = kernelbench_source(problem).ok_or_else(|| {
        anyhow::anyhow!(
            "problem `{}` has no KernelBench file {:02}_{}.py in bench-problems/kernelbench",
            problem.name(),
            problem.number(),
            problem.name()
        )
    })?;
    let (n, name, p) = (problem.number(), problem.name(), preset.name());
    let mut s = String::new();
    let _ = write!(
        s,
        "You write custom CUDA kernels that replace PyTorch operators of a given architecture, \
         to make it run faster.\n\n\
         Which operators to replace is up to you: one, several or all of them; you may keep some \
         PyTorch calls, fuse several operators into one kernel, or change the algorithm (a \
         different parallel decomposition, one pass over the data instead of several), as long \
         as the outputs stay the same.\n\n\
         Here is an example of the syntax: an architecture, and the same architecture with a \
         custom CUDA kernel compiled inline with `torch.utils.cpp_extension.load_inline`.\n\n\
         Example architecture:\n\n```python\n{EXAMPLE_MODEL}```\n\n\
         The example optimized with a custom CUDA kernel:\n\n```python\n{EXAMPLE_MODEL_NEW}```\n\n\
         The architecture to optimize is problem {n} of DLRM-Bench, `{name}` \
         (`bench-problems/kernelbench/{n:02}_{name}.py`):\n\n```python\n{source}```\n\n\
         Inputs and checks:\n\n\
         - The inputs are what `get_inputs()` of this file returns. It draws no random data: it \
         loads the suite's generated tensors (`dlrm-bench gen {name} --preset {p}`, the file \
         named by `DLRM_BENCH_INPUTS`), the same tensors the suite's reference kernel is timed \
         on. `get_init_inputs()` gives the constructor's arguments. Both come from this file, \
         not from your answer.\n\
         - `ModelNew` must take the same constructor and `forward` arguments as `Model` and \
         return the same outputs: same order, dtypes, shapes and contiguous layout.\n\
         - The outputs and their bounds:\n{bounds}\n\
         The checks your answer must survive:\n\n{rules}\n\
         Optimize the architecture named `Model` with custom CUDA kernels. Name the optimized \
         architecture `ModelNew`. Reply with exactly one ```python code block holding the \
         complete new file: the imports, the CUDA source and its `load_inline` call, and \
         `ModelNew`. Write real code that compiles and runs, not pseudocode; no other text, and \
         no testing code.\n",
        bounds = indent(&bounds(problem), "  "),
        rules = rules(Format::Kernelbench),
    );
    Ok(s)
}

fn indent(text: &str, by: &str) -> String {
    text.lines().map(|l| format!("{by}{l}\n")).collect()
}

/// The native prompt for `problem` at `preset`: everything a candidate's author needs.
pub fn native(problem: &dyn Problem, preset: Preset) -> String {
    let (n, name, p) = (problem.number(), problem.name(), preset.name());
    let sizes = problem.sizes(preset);
    let params = new_problem::template_params(problem);
    let symbols = new_problem::size_symbols(problem);
    // Shapes are given in numbers for the fixed sizes only.
    let mut shape_sizes = sizes.clone();
    for sym in symbols.iter().filter(|s| s.kind == SizeKind::DataDependent) {
        shape_sizes.remove(&sym.name);
    }
    let mut s = String::new();
    let _ = write!(
        s,
        "# DLRM-Bench problem {n}: `{name}` (preset `{p}`)\n\n\
         You write GPU kernels for DLRM-Bench, a benchmark of recommender-system kernels. Your \
         answer is a candidate: a `candidate.toml` that names the device code and describes \
         its launches, and the device code itself (CUDA C++, compiled with NVRTC). The runner \
         allocates every buffer, launches your kernels exactly as the manifest says on its own \
         stream, checks the outputs and times the launches against the suite's reference \
         kernel. It never runs host code of yours.\n\n\
         ## What it computes\n\n{summary}.\n\n{semantics}\n\n",
        summary = problem.summary(),
        semantics = semantics(problem).unwrap_or_default(),
    );
    native_tensors(&mut s, problem, p, &shape_sizes);
    native_sizes(&mut s, problem, p, &sizes, &symbols, &params);
    native_kernel_parameters(&mut s, problem, &params);
    native_manifest(&mut s, problem);
    native_answer(&mut s, name, p);
    s
}

/// The native prompt's "Tensors" table, with each shape at preset `p` (`shape_sizes`: the
/// fixed sizes only).
fn native_tensors(s: &mut String, problem: &dyn Problem, p: &str, shape_sizes: &Sizes) {
    let _ = write!(
        s,
        "## Tensors\n\nIn signature order; every tensor is contiguous and row-major.\n\n\
         | tensor | role | dtype | shape | shape at `{p}` |\n| --- | --- | --- | --- | --- |\n"
    );
    for t in problem.tensors() {
        let _ = writeln!(
            s,
            "| `{}` | {} | {} (`{}`) | {} | {} |",
            t.name,
            role(t.role),
            t.dtype.name(),
            new_problem::cuda_type(t.dtype),
            symbolic(t.shape),
            concrete(t.shape, shape_sizes)
        );
    }
}

/// The native prompt's sizes at preset `p` (fixed, data-dependent, generator switches), its
/// scalars and its outputs' bounds.
fn native_sizes(
    s: &mut String,
    problem: &dyn Problem,
    p: &str,
    sizes: &Sizes,
    symbols: &[new_problem::SizeSymbol],
    params: &[TemplateParam],
) {
    let mut fixed = Vec::new();
    let mut dependent = Vec::new();
    let mut switches = Vec::new();
    for sym in symbols {
        let at_preset = sizes.get(&sym.name);
        match (&sym.kind, at_preset) {
            (SizeKind::Fixed, Some(v)) => fixed.push(format!("{} = {v}", sym.name)),
            (SizeKind::Fixed, None) => {}
            (SizeKind::DataDependent, Some(v)) => {
                dependent.push(format!("{} (about {v} at `{p}`)", sym.name))
            }
            (SizeKind::DataDependent, None) => dependent.push(sym.name.clone()),
            (SizeKind::Switch(words), v) => switches.push(format!(
                "{} = {} ({words})",
                sym.name,
                v.copied().unwrap_or(0)
            )),
        }
    }
    let _ = write!(s, "\nSizes at `{p}`: {}.\n", fixed.join(", "));
    let others: Vec<String> = problem
        .shapes(Preset::parse(p).unwrap_or(Preset::Full))
        .into_iter()
        .skip(1)
        .map(|shape| {
            let changed: Vec<String> = bench_problems::shapes::changed_from(&shape.sizes, sizes)
                .into_iter()
                .map(|(k, v)| format!("{k} = {v}"))
                .collect();
            format!("`{}` ({}: {})", shape.name, changed.join(", "), shape.about)
        })
        .collect();
    if !others.is_empty() {
        let _ = writeln!(
            s,
            "The candidate is also checked and timed at these shapes (sizes as above but for \
             the ones named): {}. It must be correct at every shape; its score is the geometric \
             mean of its speedups over them, so a kernel tuned to one shape alone does not \
             score well.",
            others.join("; ")
        );
    }
    if !dependent.is_empty() {
        let _ = writeln!(
            s,
            "Data-dependent sizes: {}. Each input set has its own value, known at launch; use \
             it like any size.",
            dependent.join(", ")
        );
    }
    if !switches.is_empty() {
        let _ = writeln!(
            s,
            "Input-generator switches, set only by edge sets and not for kernels: {}.",
            switches.join(", ")
        );
    }
    let scalars: Vec<String> = params
        .iter()
        .filter_map(|q| match q {
            TemplateParam::Scalar { name, value } => Some(format!("{name} = {value}")),
            _ => None,
        })
        .collect();
    if !scalars.is_empty() {
        let _ = writeln!(s, "Scalars: {}.", scalars.join(", "));
    }
    let _ = write!(s, "\nOutputs and their bounds:\n\n{}\n", bounds(problem));
}

/// The native prompt's "Kernel parameters" section: what the runner passes and the template
/// kernel's parameter list (`params`).
fn native_kernel_parameters(s: &mut String, problem: &dyn Problem, params: &[TemplateParam]) {
    let decls: Vec<String> = params
        .iter()
        .map(|q| format!("    {}", q.cuda_decl()))
        .collect();
    let _ = write!(
        s,
        "## Kernel parameters\n\n\
         The runner passes each launch's `args`, in their order, and nothing else: a tensor or \
         scratch name as a device pointer (8 bytes, the buffer at least 256-byte aligned), an \
         integer expression over the sizes at the width the kernel's parameter declares (4 or 8 \
         bytes), a float scalar as an f32 (4 bytes) or f64 (8 bytes). The kernel's parameter \
         list must match its `args` one for one. The template below passes every tensor in \
         signature order, then every size, then every scalar, so its kernel is:\n\n\
         ```cuda\nextern \"C\" __global__ void {kernel}(\n{decls});\n```\n\n\
         You may pass other arguments (any expression over the sizes, such as \
         `ceil_div(B, 8)`), fewer of them, or use several launches and scratch buffers, as \
         long as each kernel's parameters match its `args`. Declare kernels `extern \"C\"` so \
         their names are not mangled. `__half` needs `<cuda_fp16.h>`, `__nv_bfloat16` \
         `<cuda_bf16.h>` (the CUDA headers, CUB included, are on NVRTC's include path).\n\n",
        kernel = new_problem::template_kernel(problem),
        decls = decls.join(",\n"),
    );
}

/// The native prompt's "candidate.toml" section: the problem's template and what a manifest
/// may say.
fn native_manifest(s: &mut String, problem: &dyn Problem) {
    let _ = write!(
        s,
        "## candidate.toml\n\n```toml\n{template}```\n\n\
         `grid` and `block` take 1 to 3 values (missing axes are 1), each an integer or an \
         expression over the sizes (`+ - * / %`, `ceil_div`, `min`, `max`); `shared_bytes` is \
         dynamic shared memory. `[[scratch]]` buffers (`name`, `bytes`) are poisoned, not \
         zeroed, and may not reuse a tensor, size or scalar name. Launches run in order on one \
         stream. `source` may also be a `.ptx`, a `.cubin`/`.fatbin` or a Triton `.py` (with a \
         `[triton]` table); CUDA C++ may set `arch` (such as `sm_90a`), `options` (NVRTC \
         flags such as `--use_fast_math`, `-DNAME=VALUE`) and `include` (directories inside \
         the candidate's).\n\n",
        template = new_problem::candidate_template(problem),
    );
}

/// The native prompt's closing sections: the rules a candidate must survive and what to reply,
/// with the commands to try problem `name` at preset `p`.
fn native_answer(s: &mut String, name: &str, p: &str) {
    let _ = write!(
        s,
        "## What your candidate must survive\n\n{rules}\n\
         ## Your answer\n\n\
         Reply with the candidate's two files, each in one code block: first `candidate.toml` \
         (```toml), then `kernel.cu` (```cuda) defining every kernel the manifest launches. Device \
         code only: no host code, no `main`, no tests. To try it, put both files in a directory \
         and run `dlrm-bench check DIR` (no GPU needed), then \
         `dlrm-bench run --problem {name} --candidates DIR --preset {p}`.\n",
        rules = rules(Format::Native),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench_problems::TensorSpec;
    use data_gen::DType;

    /// The block of class `class` of a Python file: from `class NAME(` to the next line that
    /// starts a top-level statement.
    fn class_block(source: &str, class: &str) -> String {
        let start = source
            .find(&format!("class {class}("))
            .unwrap_or_else(|| panic!("no class {class}"));
        let rest = &source[start..];
        let mut end = rest.len();
        let mut offset = 0;
        for (k, line) in rest.split_inclusive('\n').enumerate() {
            if k > 0 && !line.trim().is_empty() && !line.starts_with([' ', '\t']) {
                end = offset;
                break;
            }
            offset += line.len();
        }
        rest[..end].trim_end().to_string()
    }

    /// The repository's KernelBench file of `p`, read from disk (not the embedded copy).
    fn kernelbench_file(p: &dyn Problem) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../bench-problems/kernelbench")
            .join(format!("{:02}_{}.py", p.number(), p.name()));
        std::fs::read_to_string(&path).unwrap()
    }

    #[test]
    fn every_problem_renders_a_kernelbench_prompt_with_its_model_and_the_example() {
        let example_new = class_block(EXAMPLE_MODEL_NEW, "ModelNew");
        for p in all_problems() {
            let text = render(p.name(), Format::Kernelbench, Preset::Full).unwrap();
            let file = kernelbench_file(p);
            assert!(
                text.contains(&file),
                "{}: the whole file, verbatim",
                p.name()
            );
            let class = class_block(&file, "Model");
            assert!(class.contains("def forward"), "{}: {class}", p.name());
            assert!(text.contains(&class), "{}", p.name());
            assert!(text.contains(&example_new), "{}", p.name());
            assert!(text.contains("load_inline("), "{}", p.name());
            assert!(text.contains("get_inputs()") && text.contains("float64 oracle"));
            assert!(text.contains("Poisoned outputs") && text.contains("secret seed"));
            assert!(text.contains("Name the optimized architecture `ModelNew`"));
            assert!(text.contains("exactly one ```python code block"));
            assert!(text.contains("--preset full"));
            assert!(
                !text.contains("Guard regions"),
                "{}: native-only rules stay out",
                p.name()
            );
        }
    }

    /// `[8388608, 128]`: a shape at `sizes`, evaluated here from the spec's expressions.
    fn spec_shape(t: &TensorSpec, sizes: &Sizes) -> String {
        let dims: Vec<String> = t
            .shape
            .iter()
            .map(|e| {
                bench_problems::expr::eval(e, sizes)
                    .map(|v| v.to_string())
                    .unwrap_or_else(|_| e.to_string())
            })
            .collect();
        format!("[{}]", dims.join(", "))
    }

    #[test]
    fn every_native_prompt_names_each_tensor_with_its_dtype_and_the_presets_shape() {
        for p in all_problems() {
            // The sizes an input set sets itself (absent from the preset's, or changed by a
            // generated set) stay symbols; every other dimension is a number.
            let base = p.sizes(Preset::Ci);
            let set = p.generate(Preset::Ci, &base, 3.into()).unwrap();
            let per_set: Vec<&String> = set
                .sizes
                .iter()
                .filter(|(k, v)| base.get(*k) != Some(v))
                .map(|(k, _)| k)
                .collect();
            for preset in Preset::ALL {
                let text = render(&p.number().to_string(), Format::Native, preset).unwrap();
                let mut sizes = p.sizes(preset);
                sizes.retain(|k, _| !per_set.contains(&k));
                for t in p.tensors() {
                    let row = text
                        .lines()
                        .find(|l| l.starts_with(&format!("| `{}` |", t.name)))
                        .unwrap_or_else(|| panic!("{}: no row for {}", p.name(), t.name));
                    let cells: Vec<&str> = row.split(" | ").collect();
                    assert!(cells[2].starts_with(t.dtype.name()), "{row}");
                    assert_eq!(
                        cells[4].trim_end_matches(" |"),
                        spec_shape(&t, &sizes),
                        "{}",
                        p.name()
                    );
                }
                for (k, v) in &p.sizes(preset) {
                    assert!(
                        text.contains(&format!("{k} = {v}"))
                            || text.contains(&format!("{k} (about {v} at")),
                        "{} {k}",
                        p.name()
                    );
                }
            }
        }
        let kjt = native(find("kjt_permute").unwrap(), Preset::Full);
        assert!(kjt.contains("| `permuted_values` | output (poisoned before each run) | i64 (`long long`) | [NP] | [NP] |"));
        assert!(
            kjt.contains("| `lengths` | input (read only) | i32 (`int`) | [T, B] | [856, 8192] |")
        );
        let unique = native(find("9").unwrap(), Preset::Full);
        assert!(unique.contains("DISTINCT = 0 (1: the N ids"));
        assert!(
            !unique.contains("long long DISTINCT"),
            "switches are not parameters"
        );
    }

    #[test]
    fn the_full_sizes_of_problem_one_are_designs() {
        // docs/design.md §3: E = 8M, D = 128, B = 131072, fp32 table, int64 indices and offsets.
        let text = native(find("1").unwrap(), Preset::Full);
        for row in [
            "| `weight` | input (read only) | f32 (`float`) | [E, D] | [8388608, 128] |",
            "| `indices` | input (read only) | i64 (`long long`) | [N] | [N] |",
            "| `offsets` | input (read only) | i64 (`long long`) | [B + 1] | [131073] |",
            "| `out` | output (poisoned before each run) | f32 (`float`) | [B, D] | [131072, 128] |",
        ] {
            assert!(text.contains(row), "{row}\n{text}");
        }
        let bf16 = native(find("embedding_bag_weighted_sum_bf16").unwrap(), Preset::Ci);
        assert!(
            bf16.contains("| `out` | output (poisoned before each run) | bf16 (`__nv_bfloat16`)")
        );
        assert_eq!(DType::BF16.name(), "bf16");
    }

    #[test]
    fn every_native_prompt_holds_a_template_the_manifest_parser_and_loader_take() {
        let root = std::env::temp_dir().join(format!("dlrm-bench-prompt-{}", std::process::id()));
        for p in all_problems() {
            let text = native(p, Preset::Small);
            let start = text.find("```toml\n").unwrap() + "```toml\n".len();
            let toml = &text[start..start + text[start..].find("```").unwrap()];
            let file = std::path::Path::new("candidate.toml");
            let m = crate::candidate::manifest::parse(file, toml)
                .unwrap_or_else(|e| panic!("{}: {e}\n{toml}", p.name()));
            assert_eq!(m.problem, p.name());
            assert_eq!(m.launches.len(), 1);
            let args = &m.launches[0].args;
            for t in p.tensors() {
                assert!(args.iter().any(|a| a == t.name), "{} {}", p.name(), t.name);
            }
            // The loader checks every argument names a tensor or is an expression over the
            // problem's sizes and scalars.
            let dir = root.join(p.name());
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("candidate.toml"), toml).unwrap();
            std::fs::write(dir.join("kernel.cu"), "// the author's\n").unwrap();
            crate::candidate::load_candidate(&dir).unwrap_or_else(|e| panic!("{}: {e}", p.name()));
            // The kernel shown has one parameter per argument.
            let kernel = new_problem::template_kernel(p);
            let proto = &text[text.find(&format!("void {kernel}(")).unwrap()..];
            let proto = &proto[..proto.find(");").unwrap()];
            assert_eq!(proto.matches(',').count() + 1, args.len(), "{}", p.name());
        }
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn native_prompts_carry_semantics_bounds_and_every_rule() {
        for p in all_problems() {
            let text = native(p, Preset::Full);
            assert!(text.contains(p.summary()), "{}", p.name());
            let doc = semantics(p).unwrap();
            assert!(
                doc.starts_with(&format!("Problem {}, `{}`", p.number(), p.name())),
                "{doc}"
            );
            assert!(text.contains(&doc));
            for r in RULES {
                assert!(text.contains(r.text), "{}: {}", p.name(), r.title);
            }
            for t in p.tensors().iter().filter(|t| t.role != Role::Input) {
                assert!(text.contains(&format!("- `{}` ({})", t.name, t.dtype.name())));
            }
        }
        let adagrad = native(find("5").unwrap(), Preset::Full);
        assert!(adagrad.contains("Scalars: eps = 0.00000001, lr = 0.01."));
        assert!(adagrad.contains("float lr"), "scalars are f32 parameters");
        let unique = native(find("unique_indices").unwrap(), Preset::Full);
        assert!(unique.contains("- `unique` (i64): exact; only its valid, data-dependent prefix"));
    }

    #[test]
    fn every_rule_is_in_the_guide() {
        let chapter = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/guide/must-survive.md"),
        )
        .unwrap();
        for r in RULES {
            for words in r.readme {
                assert!(
                    chapter.contains(words),
                    "docs/guide/must-survive.md no longer says `{words}` ({})",
                    r.title
                );
            }
        }
    }

    #[test]
    fn problems_resolve_by_name_or_number_and_unknown_ones_are_errors() {
        assert_eq!(find("1").unwrap().name(), "embedding_bag_sum");
        assert_eq!(find("12").unwrap().name(), "fm_interaction");
        assert_eq!(find("kjt_permute").unwrap().number(), 7);
        let past_the_last = (all_problems().len() + 1).to_string();
        for bad in ["0", past_the_last.as_str(), "embedding_bag", "", "-1"] {
            let e = render(bad, Format::Native, Preset::Ci)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("unknown problem") && e.contains("dlrm-bench list"),
                "{e}"
            );
        }
    }

    #[test]
    fn every_problem_has_its_sources_embedded() {
        for p in all_problems() {
            assert_eq!(
                kernelbench_source(p).unwrap(),
                kernelbench_file(p),
                "{}",
                p.name()
            );
            assert!(semantics(p).is_some(), "{}", p.name());
        }
    }
}
