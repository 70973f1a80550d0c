//! Nothing a problem needs was forgotten: for every problem of the registry (the count is the
//! registry's, never written here) there is one KernelBench file named after its number and
//! name, an entry in the PyTorch peer's table, and every kernel its reference plan (and every
//! Rust candidate's plan) names is in the emulator's list and in the PTX with the same
//! parameters; the emulator's list and the PTX's entries are the same set; no file still holds
//! the stub mark `dlrm-bench new-problem` writes (a sibling's code not yet made the new
//! problem's).
use bench_problems::{all_problems, Problem};
use dlrm_bench::backend::ptx_params::entry_params;
use dlrm_bench::candidate::{Candidate, ModuleSource};
use dlrm_bench::runner::load_all;
use dlrm_bench::toolchain::ptx::GPU_KERNELS_PTX;
use std::collections::BTreeSet;
use std::path::PathBuf;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn kernelbench_file(p: &dyn Problem) -> PathBuf {
    repo()
        .join("bench-problems/kernelbench")
        .join(format!("{:02}_{}.py", p.number(), p.name()))
}

/// Every `.entry NAME(` of the embedded PTX.
fn ptx_entries() -> BTreeSet<String> {
    GPU_KERNELS_PTX
        .lines()
        .filter_map(|l| l.trim().strip_prefix(".visible .entry "))
        .filter_map(|l| l.split('(').next())
        .map(str::to_string)
        .collect()
}

/// Checks one plan's kernels; returns what is wrong.
fn check_plan(what: &str, kernels: impl Iterator<Item = String>) -> Vec<String> {
    let mut wrong = Vec::new();
    for k in kernels {
        let Some(emu) = gpu_kernels::emu_kernel(&k) else {
            wrong.push(format!(
                "{what}: kernel `{k}` is not in the emulator's list"
            ));
            continue;
        };
        match entry_params(GPU_KERNELS_PTX, &k) {
            None => wrong.push(format!("{what}: kernel `{k}` is not in the PTX")),
            Some(ptx) if ptx != emu.param_sizes => wrong.push(format!(
                "{what}: kernel `{k}` takes {ptx:?} in the PTX, {:?} on the emulator",
                emu.param_sizes
            )),
            Some(_) => {}
        }
    }
    wrong
}

#[test]
fn every_registered_problem_has_its_files_entries_and_kernels() {
    let peer = std::fs::read_to_string(repo().join("tools/torch_peer.py")).unwrap();
    let mut wrong = Vec::new();
    for p in all_problems() {
        let kb = kernelbench_file(p);
        match std::fs::read_to_string(&kb) {
            Err(_) => wrong.push(format!(
                "{}: no KernelBench file {}",
                p.name(),
                kb.display()
            )),
            Ok(text) => {
                for needle in ["class Model", "def get_inputs", "def get_init_inputs"] {
                    if !text.contains(needle) {
                        wrong.push(format!("{}: `{needle}` missing", kb.display()));
                    }
                }
            }
        }
        if !peer.contains(&format!("    \"{}\": {{", p.name())) {
            wrong.push(format!(
                "{}: no entry in tools/torch_peer.py's PROBLEMS",
                p.name()
            ));
        }
        let kernels = p.reference().into_iter().map(|l| l.kernel);
        wrong.extend(check_plan(&format!("{} reference", p.name()), kernels));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn no_kernelbench_file_without_a_problem() {
    let names: BTreeSet<PathBuf> = all_problems().into_iter().map(kernelbench_file).collect();
    let dir = repo().join("bench-problems/kernelbench");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = dir.join(entry.unwrap().file_name());
        if path.extension().is_some_and(|e| e == "py") {
            assert!(
                names.contains(&path),
                "{} names no registered problem",
                path.display()
            );
        }
    }
}

#[test]
fn rust_candidates_name_kernels_that_exist() {
    let (candidates, invalid) = load_all(&[repo().join("candidates")]);
    assert!(invalid.is_empty(), "{invalid:?}");
    let rust: Vec<&Candidate> = candidates
        .iter()
        .filter(|c| c.source == ModuleSource::Builtin)
        .collect();
    assert!(!rust.is_empty(), "the tuned candidates are Rust kernels");
    let wrong: Vec<String> = rust
        .iter()
        .flat_map(|c| {
            check_plan(
                &format!("{}/{}", c.problem, c.name),
                c.launches.iter().map(|l| l.kernel.clone()),
            )
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_emulator_runs_exactly_the_kernels_of_the_ptx() {
    let emu: BTreeSet<String> = gpu_kernels::emu_kernels()
        .iter()
        .map(|k| k.name.to_string())
        .collect();
    let ptx = ptx_entries();
    assert!(ptx.len() > 12, "PTX entries found: {ptx:?}");
    let only_ptx: Vec<_> = ptx.difference(&emu).collect();
    let only_emu: Vec<_> = emu.difference(&ptx).collect();
    assert!(
        only_ptx.is_empty() && only_emu.is_empty(),
        "in the PTX only: {only_ptx:?}; on the emulator only: {only_emu:?}"
    );
}

#[test]
fn the_workload_profilers_problem_list_is_the_catalogs() {
    // tools/kernel_classes.py attributes a model step's kernels to the problems by name; a
    // problem missing there would never get a share of a workload profile.
    let text = std::fs::read_to_string(repo().join("tools/kernel_classes.py")).unwrap();
    let start = text.find("PROBLEMS = (").expect("a PROBLEMS tuple");
    let end = start + text[start..].find(')').expect("its end");
    let listed: Vec<&str> = text[start..end].split('"').skip(1).step_by(2).collect();
    let catalog: Vec<&str> = all_problems().into_iter().map(|p| p.name()).collect();
    assert_eq!(
        listed, catalog,
        "tools/kernel_classes.py PROBLEMS, in the catalog's order"
    );
}

/// One rule for the tuned Rust kernels: a `candidates/tuned/PROBLEM/` Rust candidate launches
/// kernels of `gpu-kernels/src/kernels/PROBLEM_tuned.rs` (and shared building blocks, such as
/// the scans), never one of the reference's file `PROBLEM.rs` (so `new-problem --like` copies no
/// tuned kernel).
#[test]
fn tuned_kernels_live_in_their_problems_tuned_file() {
    let (candidates, _) = load_all(&[repo().join("candidates/tuned")]);
    let kernels = repo().join("gpu-kernels/src/kernels");
    let mut wrong = Vec::new();
    let mut seen = 0;
    for c in candidates
        .iter()
        .filter(|c| c.source == ModuleSource::Builtin)
    {
        let tuned = kernels.join(format!("{}_tuned.rs", c.problem));
        let text = std::fs::read_to_string(&tuned).unwrap_or_default();
        let reference =
            std::fs::read_to_string(kernels.join(format!("{}.rs", c.problem))).unwrap_or_default();
        let defined = |t: &str, k: &str| t.contains(&format!("fn {k}("));
        if !c.launches.iter().any(|l| defined(&text, &l.kernel)) {
            wrong.push(format!(
                "{}: none of its kernels is in {}",
                c.name,
                tuned.display()
            ));
        }
        for l in &c.launches {
            if defined(&reference, &l.kernel) {
                wrong.push(format!(
                    "{}: `{}` is in the reference's file",
                    c.name, l.kernel
                ));
            }
        }
        seen += 1;
    }
    assert!(seen >= 12, "only {seen} tuned Rust candidates found");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// `new-problem` marks every file it writes or registers in; a mark left is a sibling's code
/// (its Model, oracle, peer entry) still standing in for the new problem's.
#[test]
fn no_new_problem_stub_is_left() {
    let mut left = Vec::new();
    for (dir, ext) in [
        ("bench-problems/src/problems", "rs"),
        ("gpu-kernels/src/kernels", "rs"),
        ("bench-problems/kernelbench", "py"),
        ("tools", "py"),
    ] {
        for e in std::fs::read_dir(repo().join(dir)).unwrap().flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == ext)
                && std::fs::read_to_string(&p)
                    .unwrap_or_default()
                    .contains(dlrm_bench::cmd::new_problem::STUB_MARK)
            {
                left.push(p.display().to_string());
            }
        }
    }
    assert!(
        left.is_empty(),
        "stubs of `dlrm-bench new-problem` left (make them the new problem's, then delete the \
         mark line): {left:?}"
    );
}
