//! `dlrm-bench check`: validates candidates without running them — the manifest, the source
//! (compiled with NVRTC when it is CUDA C++; needs libnvrtc, not a GPU), and every launch's
//! argument list against the kernel's parameter list in the PTX.
use crate::backend::{cuda::compile_cuda, ptx_params::entry_params};
use crate::candidate::{load_candidate, ModuleSource};
use bench_problems::{find_problem, Preset};
use std::path::{Path, PathBuf};

/// Checks one candidate directory; `Ok` holds one line per launch, `Err` says what is wrong.
pub fn check_candidate(dir: &Path, arch: &'static str) -> Result<Vec<String>, String> {
    let cand = load_candidate(dir).map_err(|e| e.to_string())?;
    let ptx = match &cand.source {
        ModuleSource::Builtin => crate::ptx::GPU_KERNELS_PTX.to_string(),
        ModuleSource::Ptx { code, .. } => code.clone(),
        ModuleSource::Cuda { file, code } => {
            compile_cuda(file, code, arch).map_err(|e| e.to_string())?
        }
    };
    let problem = find_problem(&cand.problem).expect("checked by load_candidate");
    let tensors = problem.tensors();
    let mut lines = Vec::new();
    for (i, l) in cand.launches.iter().enumerate() {
        let field = format!("{}/candidate.toml: launch[{i}]", dir.display());
        let params = entry_params(&ptx, &l.kernel)
            .ok_or_else(|| format!("{field}.kernel: no kernel `{}` in the module", l.kernel))?;
        if params.len() != l.args.len() {
            return Err(format!(
                "{field}.args: kernel `{}` takes {} parameters, the plan passes {}",
                l.kernel,
                params.len(),
                l.args.len()
            ));
        }
        for (j, (arg, &width)) in l.args.iter().zip(&params).enumerate() {
            let is_pointer = tensors.iter().any(|t| t.name == arg)
                || cand.scratch.iter().any(|s| &s.name == arg);
            if is_pointer && width != 8 {
                return Err(format!(
                    "{field}.args[{j}]: `{arg}` is a pointer but the parameter is {width} bytes"
                ));
            }
        }
        let mut sizes = problem.sizes(Preset::Full);
        sizes.entry("N".into()).or_insert(1);
        let grid: Vec<String> = l
            .grid
            .iter()
            .map(|d| {
                d.eval(&sizes)
                    .map(|v| v.to_string())
                    .unwrap_or_else(|e| e.to_string())
            })
            .collect();
        lines.push(format!(
            "launch[{i}] {}: {} parameters {:?}, grid at full size [{}]",
            l.kernel,
            params.len(),
            params,
            grid.join(", ")
        ));
    }
    Ok(lines)
}

/// `dlrm-bench check`: checks each directory, printing `ok` with a line per launch or `FAIL`
/// with the reason; an error when any failed.
pub fn check_dirs(dirs: &[PathBuf], arch: &str) -> anyhow::Result<()> {
    let arch: &'static str = Box::leak(arch.to_string().into_boxed_str());
    let mut failed = 0;
    for dir in dirs {
        match check_candidate(dir, arch) {
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
        dirs.len()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cuda::NVRTC_MISSING;

    fn nvrtc_present() -> bool {
        match compile_cuda(
            Path::new("probe.cu"),
            "extern \"C\" __global__ void k() {}",
            "compute_90",
        ) {
            Err(e) if e.to_string().contains(NVRTC_MISSING) => {
                eprintln!("SKIPPED: libnvrtc is not on the loader path (.ci/run installs it)");
                false
            }
            _ => true,
        }
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
            check_candidate(&dir, "compute_90")
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        }
    }

    #[test]
    fn compile_errors_carry_the_nvrtc_log() {
        if !nvrtc_present() {
            return;
        }
        let e = compile_cuda(
            Path::new("bad.cu"),
            "extern \"C\" __global__ void k() { undefined_thing; }",
            "compute_90",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("bad.cu") && e.contains("undefined_thing"), "{e}");
    }
}
