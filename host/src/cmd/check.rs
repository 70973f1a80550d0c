//! `dlrm-bench check`: validates candidates without running them — the manifest, the source
//! (compiled with NVRTC when it is CUDA C++; needs libnvrtc, not a GPU), and the launch plan
//! under every rule `run` applies ([`plan::resolve`], [`plan::scratch_bytes`]): evaluated on the
//! sizes of every preset and edge set ([`check_sizes`]), against the GPU's limits when there is
//! one and H100/H200-class limits otherwise, with each argument matched against the kernel's
//! parameter list in the PTX. When a ptxas is found ([`crate::toolchain::ptxas`]) the module is assembled
//! for sm_90 too and each launch's line gives its kernel's registers, stack and spills. Each
//! directory is checked once ([`crate::candidate::set`]).
use crate::backend::{
    cuda::compile_cuda,
    ptx_params::{entry_names, entry_params, no_such_kernel},
    Backend, CudaFlags, Launch,
};
use crate::candidate::launch_limits::LaunchLimits;
use crate::candidate::plan;
use crate::candidate::set::load_unique;
use crate::candidate::{load_candidate, Candidate, ModuleSource};
use crate::toolchain::ptxas;
use bench_problems::{find_problem, Preset, Problem, Sizes};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// One set of sizes a plan is checked at: a label (`ci`, `full edge-0`, ...), the size symbols
/// and the float scalars.
pub(crate) type SizeSet = (String, Sizes, BTreeMap<String, f64>);

/// The sizes `run` may evaluate `problem`'s plans at: the `ci` preset, its edge sets and its
/// other shapes as generated (data-dependent sizes such as `N` included), then the `small` and
/// `full` presets, their other shapes and their edge sets, whose data-dependent sizes (which only generating their inputs would
/// give) take the `ci` values.
pub(crate) fn check_sizes(problem: &dyn Problem) -> Vec<SizeSet> {
    let generate = |sizes: &Sizes| {
        problem
            .generate(Preset::Ci, sizes, 0.into())
            .map(|set| (set.sizes, set.scalars))
    };
    let base = problem.sizes(Preset::Ci);
    let (ci, scalars) = generate(&base).unwrap_or_else(|_| {
        let mut s = base.clone();
        s.entry("N".into()).or_insert(1);
        (s, BTreeMap::new())
    });
    let mut out = vec![("ci".to_string(), ci.clone(), scalars.clone())];
    for (k, sizes) in problem.edge_sizes(Preset::Ci).iter().enumerate() {
        if let Ok((sizes, scalars)) = generate(sizes) {
            out.push((format!("ci edge-{k}"), sizes, scalars));
        }
    }
    for shape in problem.shapes(Preset::Ci).into_iter().skip(1) {
        if let Ok((sizes, scalars)) = generate(&shape.sizes) {
            out.push((format!("ci shape {}", shape.name), sizes, scalars));
        }
    }
    let fill = |mut s: Sizes| {
        for (k, v) in &ci {
            s.entry(k.clone()).or_insert(*v);
        }
        s
    };
    for preset in [Preset::Small, Preset::Full] {
        let name = preset.name();
        out.push((name.into(), fill(problem.sizes(preset)), scalars.clone()));
        for shape in problem.shapes(preset).into_iter().skip(1) {
            let label = format!("{name} shape {}", shape.name);
            out.push((label, fill(shape.sizes), scalars.clone()));
        }
        for (k, sizes) in problem.edge_sizes(preset).into_iter().enumerate() {
            out.push((format!("{name} edge-{k}"), fill(sizes), scalars.clone()));
        }
    }
    out
}

/// The sizes [`check_sizes`]' full set takes from ci (data-dependent ones, like the lookups'
/// count N, that the preset does not fix).
fn ci_sizes_at_full(problem: &str) -> Vec<String> {
    let Some(problem) = find_problem(problem) else {
        return Vec::new();
    };
    let full = problem.sizes(Preset::Full);
    check_sizes(problem)
        .into_iter()
        .find(|(label, _, _)| label == "ci")
        .map(|(_, ci, _)| ci.into_keys().filter(|k| !full.contains_key(k)).collect())
        .unwrap_or_default()
}

/// Checks one candidate directory with the default limits; `Ok` holds one line per launch,
/// `Err` says what is wrong.
pub fn check_candidate(dir: &Path, arch: &str) -> Result<Vec<String>, String> {
    let cand = load_candidate(dir).map_err(|e| e.to_string())?;
    check_loaded(&cand, arch, &LaunchLimits::H100_CLASS)
}

/// Checks a loaded candidate against `limits`: its module compiles, and its plan keeps every
/// rule of `run` at every size of [`check_sizes`]. One line per launch (its parameters and its
/// grid at full size), or what is wrong and at which sizes.
pub(crate) fn check_loaded(
    cand: &Candidate,
    arch: &str,
    limits: &LaunchLimits,
) -> Result<Vec<String>, String> {
    let (ptx, note) = module_ptx(cand, arch)?;
    let triton_widths = triton_widths(cand);
    let widths = |k: &str| -> Result<Vec<usize>, String> {
        match (&ptx, &triton_widths) {
            // A Triton kernel's PTX also takes the scratch pointers the runner appends.
            (_, Some(w)) => Ok(w.clone()),
            (Some(ptx), None) => {
                entry_params(ptx, k).ok_or_else(|| no_such_kernel(k, &entry_names(ptx)))
            }
            (None, None) => Ok(cand
                .launches
                .iter()
                .find(|l| l.kernel == k)
                .map_or(Vec::new(), |l| vec![8; l.args.len()])),
        }
    };
    let full = resolve_at_every_size(cand, limits, widths)?;
    let mut lines: Vec<String> = Vec::new();
    if let ModuleSource::Cuda { flags, .. } = &cand.source {
        lines.push(nvrtc_line(flags, arch));
    }
    let resources = match &ptx {
        Some(ptx) => ptxas_resources(&cand.source, ptx)?,
        None => None,
    };
    lines.extend(full.iter().enumerate().map(|(i, l)| {
        launch_line(
            i,
            l,
            widths(&l.kernel).unwrap_or_default(),
            resources.as_ref(),
        )
    }));
    let borrowed = ci_sizes_at_full(&cand.problem);
    if !borrowed.is_empty() {
        lines.push(format!(
            "note: the grids \"at full size\" take {} from ci: data-dependent sizes are known \
             only with the inputs (a run resolves them)",
            borrowed.join(", ")
        ));
    }
    if resources.is_none() && ptx.is_some() {
        lines.push(
            "note: no ptxas found (DLRM_BENCH_PTXAS, beside libnvrtc, a CUDA toolkit or PATH): \
             registers and spills not reported"
                .into(),
        );
    }
    lines.extend(note);
    Ok(lines)
}

/// The candidate's module as PTX, where the kernels' parameter lists come from, with the note
/// its check ends with: PTX text (CUDA C++ compiled for `arch`), or none for a Triton kernel
/// (its signature gives the list) or without a GPU (a cubin's list is the driver's; then each
/// argument is taken as 8 bytes and only the plan's geometry and expressions are checked, as
/// the note says). An error when the module does not compile or is no valid binary.
fn module_ptx(cand: &Candidate, arch: &str) -> Result<(Option<String>, Option<String>), String> {
    let mut note = None;
    let ptx = match &cand.source {
        ModuleSource::Builtin => Some(crate::toolchain::ptx::GPU_KERNELS_PTX.to_string()),
        ModuleSource::Ptx { code, .. } => Some(code.clone()),
        ModuleSource::Cuda { file, code, flags } => match compile_cuda(file, code, flags, arch) {
            Ok(ptx) => Some(ptx),
            // Without NVRTC the launch plan is still checked, its arguments 8 bytes wide.
            Err(e) if e.to_string().contains(crate::backend::cuda::NVRTC_MISSING) => {
                note = Some(format!(
                    "note: {} not compiled: {e}; the launch plan is checked without the \
                     kernel's parameter widths",
                    file.display()
                ));
                None
            }
            Err(e) => return Err(e.to_string()),
        },
        ModuleSource::Binary { file, image } => {
            let kind = crate::backend::binary::check_image(image)
                .map_err(|e| format!("{}: {e}", file.display()))?;
            note = Some(format!(
                "note: {} is a valid {}; parameter checking needs a GPU (the driver gives a cubin's parameter list): `dlrm-bench run` on one checks every argument",
                file.display(),
                if kind == crate::backend::binary::Kind::Cubin { "cubin" } else { "fatbin" }
            ));
            None
        }
        ModuleSource::Triton { file, spec } => {
            let (ptx, line) = triton_module(file, spec, arch)?;
            note = Some(line);
            ptx
        }
        ModuleSource::Unavailable { reason, .. } => {
            note = Some(format!("skipped: {reason}"));
            None
        }
    };
    Ok((ptx, note))
}

/// Compiles a Triton kernel for `arch` with `tools/triton_compile.py` (no GPU needed) and
/// checks it against the manifest: its PTX (for ptxas's resources) and a line saying what
/// Triton made of it. Where Triton is not installed: no PTX, and a note saying the kernel is
/// compiled when `run` meets it. A kernel Triton refuses is an error with Triton's message.
fn triton_module(
    file: &Path,
    spec: &crate::backend::triton::TritonSpec,
    arch: &str,
) -> Result<(Option<String>, String), String> {
    use crate::backend::triton::{check_against, CompileFailure};
    use crate::backend::triton_tool::{compile, WeakSandbox};
    let digits: String = arch
        .trim_start_matches("compute_")
        .trim_start_matches("sm_")
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    let number = digits
        .parse::<u32>()
        .map_err(|_| format!("--arch {arch}: not compute_NN or sm_NN"))?;
    // The tool runs in a directory of its own: give it the file's absolute path.
    let path = std::path::absolute(file).map_err(|e| format!("{}: {e}", file.display()))?;
    match compile(&path, spec, number, WeakSandbox::Warn) {
        Ok(c) => {
            check_against(spec, &c).map_err(|e| format!("{}: {e}", file.display()))?;
            let line = format!(
                "note: {} compiled by Triton {} for sm_{number}: kernel {}, {} warps, {} bytes of shared memory; parameter widths are those of [triton.signature]",
                file.display(),
                c.triton_version,
                c.kernel,
                c.num_warps,
                c.shared
            );
            Ok((c.ptx.clone(), line))
        }
        Err(CompileFailure::NoTriton(why) | CompileFailure::Refused(why)) => Ok((
            None,
            format!(
                "note: {} not compiled ({why}); `run` compiles it with tools/triton_compile.py; parameter widths here are those of [triton.signature], block {} threads (num_warps {})",
                file.display(),
                spec.block_threads(),
                spec.num_warps
            ),
        )),
        Err(CompileFailure::Failed(log)) => {
            Err(format!("{}: Triton did not compile it:\n{log}", file.display()))
        }
    }
}

/// A Triton kernel's parameter widths, from its `[triton.signature]` (8 bytes for a type it
/// does not know); `None` for other sources.
fn triton_widths(cand: &Candidate) -> Option<Vec<usize>> {
    match &cand.source {
        ModuleSource::Triton { spec, .. } => Some(
            spec.signature
                .iter()
                .map(|(_, ty)| crate::backend::triton::param_width(ty).unwrap_or(8))
                .collect(),
        ),
        _ => None,
    }
}

/// Resolves the candidate's plan at every size of [`check_sizes`] (its scratch buffers first),
/// with `params` giving each kernel's parameter widths; the launches at `full` size, or the
/// first error, naming the sizes.
fn resolve_at_every_size(
    cand: &Candidate,
    limits: &LaunchLimits,
    mut params: impl FnMut(&str) -> Result<Vec<usize>, String>,
) -> Result<Vec<Launch>, String> {
    let problem = find_problem(&cand.problem).expect("checked by load_candidate");
    let tensors = problem.tensors();
    let pointers: BTreeSet<&str> = tensors
        .iter()
        .map(|t| t.name)
        .chain(cand.scratch.iter().map(|s| s.name.as_str()))
        .collect();
    // Any address will do: only the parameter's width is checked.
    let address = |name: &str| pointers.contains(name).then_some(0u64);
    let mut full = Vec::new();
    for (label, sizes, scalars) in check_sizes(problem) {
        let at = |e: String| format!("{e} (at {label} sizes)");
        for k in 0..cand.scratch.len() {
            plan::scratch_bytes(cand, k, &sizes, limits.memory_bytes).map_err(at)?;
        }
        let launches =
            plan::resolve(cand, &sizes, &scalars, limits, &mut params, &address).map_err(at)?;
        if label == "full" {
            full = launches;
        }
    }
    Ok(full)
}

/// The line saying how NVRTC compiles a CUDA C++ module (`flags`' arch, else `arch`): the PTX
/// target, options and include directories.
fn nvrtc_line(flags: &CudaFlags, arch: &str) -> String {
    let arch = flags.arch.as_deref().unwrap_or(arch);
    let ptx = crate::toolchain::nvrtc_flags::ptx_arch(arch).unwrap_or_default();
    let mut line = format!("NVRTC: arch {arch} (PTX for {ptx})");
    if !flags.options.is_empty() {
        line.push_str(&format!(", options {:?}", flags.options));
    }
    if !flags.include.is_empty() {
        line.push_str(&format!(", include {:?}", flags.include));
    }
    line
}

/// The line of launch `i` (`l`, at full size): its kernel, parameter widths (`params`), grid
/// and block, and the kernel's ptxas resources when `resources` has them.
fn launch_line(
    i: usize,
    l: &Launch,
    params: Vec<usize>,
    resources: Option<&(&'static str, ptxas::ModuleResources)>,
) -> String {
    let mut line = format!(
        "launch[{i}] {}: {} parameters {:?}, grid at full size {:?}, block {:?}",
        l.kernel,
        params.len(),
        params,
        l.grid,
        l.block
    );
    if let Some((arch, r)) = resources.and_then(|(arch, all)| all.get(&l.kernel).map(|r| (arch, r)))
    {
        line.push_str(&format!(
            "; ptxas {arch}: {} registers, {} bytes stack, {} bytes spilled{}",
            r.registers,
            r.stack_bytes,
            r.spill_stores,
            if r.uses_local_memory() {
                " (local memory)"
            } else {
                ""
            }
        ));
    }
    line
}

/// The module's per-kernel resources from ptxas, with the architecture it assembled for, or
/// `None` without a ptxas; an error when ptxas rejects the module (the driver would too). The
/// suite's own PTX is assembled once per process.
fn ptxas_resources(
    source: &ModuleSource,
    ptx: &str,
) -> Result<Option<(&'static str, ptxas::ModuleResources)>, String> {
    static PTXAS: OnceLock<Option<PathBuf>> = OnceLock::new();
    static BUILTIN: OnceLock<Result<BTreeMap<String, ptxas::Resources>, String>> = OnceLock::new();
    let Some(tool) = PTXAS.get_or_init(|| ptxas::find(&[])) else {
        return Ok(None);
    };
    let all = match source {
        ModuleSource::Builtin => BUILTIN.get_or_init(|| ptxas::assemble(tool, ptx)).clone()?,
        _ => ptxas::assemble(tool, ptx)?,
    };
    Ok(Some((ptxas::arch_for(ptx), all)))
}

/// The limits `check` holds plans to: those of CUDA device 0 when there is one, else the
/// H100/H200-class defaults; and a line saying which.
pub(crate) fn check_limits() -> (LaunchLimits, String) {
    match crate::backend::cuda::CudaBackend::new(0) {
        Ok(b) => (
            LaunchLimits::of(b.info()),
            format!("limits of CUDA device 0: {}", b.info().name),
        ),
        Err(e) => (
            LaunchLimits::H100_CLASS,
            format!("limits of an H100/H200-class GPU (no GPU here: {e})"),
        ),
    }
}

/// `dlrm-bench check`: checks each directory once, printing `ok` with a line per launch or
/// `FAIL` with the reason; an error when any failed.
pub fn check_dirs(dirs: &[PathBuf], arch: &str) -> anyhow::Result<()> {
    let (limits, which) = check_limits();
    println!("{which}");
    let loaded = load_unique(dirs);
    let mut failed = 0;
    for (dir, cand) in &loaded {
        let checked = cand
            .as_ref()
            .map_err(|e| e.to_string())
            .and_then(|c| check_loaded(c, arch, &limits));
        match checked {
            Ok(lines) if lines.iter().any(|l| l.starts_with("skipped: ")) => {
                println!("skip {}", dir.display());
                lines.iter().for_each(|l| println!("     {l}"));
            }
            Ok(lines) => {
                println!("ok   {}", dir.display());
                lines.iter().for_each(|l| println!("     {l}"));
            }
            Err(e) => {
                failed += 1;
                println!(
                    "FAIL {}\n     {}",
                    dir.display(),
                    e.replace('\n', "\n     ")
                );
            }
        }
    }
    anyhow::ensure!(
        failed == 0,
        "{failed} of {} candidates failed the check",
        loaded.len()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cuda::NVRTC_MISSING;
    use bench_problems::Dim;

    fn nvrtc_present() -> bool {
        match compile_cuda(
            Path::new("probe.cu"),
            "extern \"C\" __global__ void k() {}",
            &Default::default(),
            "compute_90",
        ) {
            Err(e) if e.to_string().contains(NVRTC_MISSING) => {
                eprintln!("SKIPPED: libnvrtc is not on the loader path (.ci/run installs it)");
                false
            }
            _ => true,
        }
    }

    /// A compile error for a missing header on a machine where no CUDA headers were found.
    fn no_cuda_headers(e: &str) -> bool {
        crate::toolchain::cuda_include::is_missing_header(e)
            && crate::toolchain::cuda_include::current().found_in.is_none()
    }

    /// With a ptxas, each launch line of a Rust candidate carries its kernel's registers; the
    /// numbers are the ones the assembler gives for the suite's PTX.
    #[test]
    fn launch_lines_carry_ptxas_resources_when_a_ptxas_is_found() {
        let Some(tool) = ptxas::find(&[]) else {
            eprintln!("skipped: no ptxas found (see crate::toolchain::ptxas)");
            return;
        };
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../candidates/tuned/dot_interaction");
        let lines = check_candidate(&dir, "compute_90").unwrap();
        let all = ptxas::assemble(&tool, crate::toolchain::ptx::GPU_KERNELS_PTX).unwrap();
        let r = &all["dot_interaction_tuned_warp_per_sample"];
        let want = format!(
            "ptxas sm_90: {} registers, 0 bytes stack, 0 bytes spilled",
            r.registers
        );
        assert!(
            lines
                .iter()
                .any(|l| l.contains("dot_interaction_tuned_warp_per_sample") && l.ends_with(&want)),
            "{lines:?}"
        );
    }

    #[test]
    fn shipped_candidates_compile_and_match_their_kernels() {
        if !nvrtc_present() {
            return;
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../candidates");
        for dir in crate::candidate::discover(&root) {
            if dir.components().any(|c| c.as_os_str() == "exploits")
                && dir.join("EXPECT_COMPILE_ERROR").exists()
            {
                continue;
            }
            match check_candidate(&dir, "compute_90") {
                Ok(_) => {}
                // A candidate that includes CUDA headers needs them; .ci/run installs them.
                Err(e) if no_cuda_headers(&e) => eprintln!(
                    "SKIPPED {}: no CUDA headers here (.ci/run installs them)",
                    dir.display()
                ),
                Err(e) => panic!("{}: {e}", dir.display()),
            }
        }
    }

    #[test]
    fn every_reference_plan_passes_at_every_size() {
        // The sizes and limits `check` uses refuse none of the project's own plans.
        for problem in bench_problems::all_problems() {
            let cand = crate::candidate::reference_candidate(problem);
            check_loaded(&cand, "compute_90", &LaunchLimits::H100_CLASS)
                .unwrap_or_else(|e| panic!("{}: {e}", problem.name()));
        }
    }

    #[test]
    fn shipped_plans_keep_the_limits_at_every_size() {
        // Without NVRTC the kernels' parameter lists are unknown; every argument is taken as
        // 8 bytes, so this checks the geometry and the scratch of each plan.
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../candidates");
        for dir in crate::candidate::discover(&root) {
            let cand = load_candidate(&dir).unwrap();
            let problem = find_problem(&cand.problem).unwrap();
            let limits = LaunchLimits::H100_CLASS;
            let buffers: BTreeSet<String> = problem
                .tensors()
                .iter()
                .map(|t| t.name.to_string())
                .chain(cand.scratch.iter().map(|s| s.name.clone()))
                .collect();
            for (label, sizes, scalars) in check_sizes(problem) {
                let mut params = |k: &str| {
                    let l = cand.launches.iter().find(|l| l.kernel == k).unwrap();
                    Ok(vec![8; l.args.len()])
                };
                let address = |n: &str| buffers.contains(n).then_some(0);
                plan::resolve(&cand, &sizes, &scalars, &limits, &mut params, &address)
                    .unwrap_or_else(|e| panic!("{} at {label}: {e}", dir.display()));
                for k in 0..cand.scratch.len() {
                    plan::scratch_bytes(&cand, k, &sizes, limits.memory_bytes).unwrap();
                }
            }
        }
    }

    #[test]
    fn launches_run_would_refuse_are_refused_naming_the_field() {
        // Issue 13: `check` printed "ok" for all of these, which `run` refuses.
        let problem = find_problem("embedding_bag_sum").unwrap();
        let base = crate::candidate::reference_candidate(problem);
        let l = &base.launches[0];
        type Change = fn(&mut bench_problems::LaunchSpec);
        let cases: [(&str, Change); 6] = [
            ("launch[0].grid[0] = 0", |l| l.grid[0] = Dim::Number(0)),
            ("launch[0].grid[0] = -3", |l| {
                l.grid[0] = Dim::Expr("B - B - 3".into())
            }),
            ("launch[0].grid[1] = 65536", |l| {
                l.grid[1] = Dim::Number(65536)
            }),
            ("launch[0].block[0] = 2048", |l| {
                l.block[0] = Dim::Number(2048)
            }),
            ("launch[0].block: 2048 threads", |l| {
                l.block = [Dim::Number(64), Dim::Number(32), Dim::Number(1)]
            }),
            ("launch[0].shared_bytes = 10000000", |l| {
                l.shared_bytes = Dim::Number(10_000_000)
            }),
        ];
        assert!(
            check_loaded(&base, "compute_90", &LaunchLimits::H100_CLASS).is_ok(),
            "{l:?}"
        );
        for (want, change) in cases {
            let mut cand = base.clone();
            change(&mut cand.launches[0]);
            let e = check_loaded(&cand, "compute_90", &LaunchLimits::H100_CLASS).unwrap_err();
            assert!(
                e.contains(want) && e.contains("(at ci sizes)"),
                "{want}: {e}"
            );
        }
        // A grid fine at ci size but past the limit at full size.
        let mut cand = base.clone();
        cand.launches[0].grid[1] = Dim::Expr("min(B, 70000)".into());
        let e = check_loaded(&cand, "compute_90", &LaunchLimits::H100_CLASS).unwrap_err();
        assert!(
            e.contains("launch[0].grid[1] = 70000") && e.contains("at full sizes"),
            "{e}"
        );
        let mut cand = base.clone();
        cand.scratch
            .push(bench_problems::ScratchSpec::new("neg", "0 - B"));
        let e = check_loaded(&cand, "compute_90", &LaunchLimits::H100_CLASS).unwrap_err();
        assert!(e.contains("scratch[") && e.contains("negative"), "{e}");
    }

    #[test]
    fn compile_errors_carry_the_nvrtc_log() {
        if !nvrtc_present() {
            return;
        }
        let e = compile_cuda(
            Path::new("bad.cu"),
            "extern \"C\" __global__ void k() { undefined_thing; }",
            &Default::default(),
            "compute_90",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("bad.cu") && e.contains("undefined_thing"), "{e}");
    }
}
