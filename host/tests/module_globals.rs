//! The two readers of a candidate's module globals agree on real compiler output, without a GPU:
//! every CUDA C++ candidate of the corpus is compiled with NVRTC, its PTX made visible
//! (`globals::make_visible`, what the CUDA backend loads), assembled for sm_90 with ptxas, and
//! the globals the PTX scan finds must be exactly those the cubin's `.nv.global*` sections name
//! (with every byte of those sections covered by a name). A global declared inside a function body is
//! seen by the body scan and refused from the cubin; the kernels that overwrite thread and block
//! state between a candidate's runs assemble with every store kept. So the rewrite keeps the PTX valid,
//! and neither reader misses what the other sees. Without libnvrtc or ptxas (`.ci/run` installs
//! both) the trial is reported as ignored, saying why: a custom harness (libtest-mimic), so a
//! skip shows as a skip in the test summary, never as a pass.
use dlrm_bench::backend::cuda::{compile_cuda, nvrtc_version};
use dlrm_bench::backend::globals::{body_globals, elf_globals, make_visible, ptx_globals};
use dlrm_bench::candidate::{load_candidate, ModuleSource};
use libtest_mimic::{Arguments, Trial};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn candidates() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../candidates")
}

/// Every candidate directory under `candidates/<group>/<problem>/`.
fn candidate_dirs(group: &str) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    let root = candidates().join(group);
    for problem in std::fs::read_dir(&root).unwrap().flatten() {
        for entry in std::fs::read_dir(problem.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if entry.path().join("candidate.toml").exists() {
                dirs.push(entry.path());
            }
        }
        if problem.path().join("candidate.toml").exists() {
            dirs.push(problem.path());
        }
    }
    dirs.sort();
    dirs
}

/// The cubin ptxas makes of `ptx` for sm_90.
fn assemble(ptxas: &Path, ptx: &str, scratch: &Path, name: &str) -> Result<Vec<u8>, String> {
    let input = scratch.join(format!("{name}.ptx"));
    let output = scratch.join(format!("{name}.cubin"));
    std::fs::write(&input, ptx).unwrap();
    let out = std::process::Command::new(ptxas)
        .args(["-arch=sm_90", "-o"])
        .arg(&output)
        .arg(&input)
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    std::fs::read(&output).map_err(|e| e.to_string())
}

fn main() {
    let args = Arguments::from_args();
    let name = "the_ptx_scan_and_the_cubin_name_the_same_globals_for_every_cuda_candidate";
    let ptxas = dlrm_bench::toolchain::ptxas::find(&[]);
    let missing = match (nvrtc_version(), &ptxas) {
        (None, _) => Some("libnvrtc is not on the loader path (.ci/run installs it)"),
        (_, None) => Some("no ptxas here (.ci/run installs NVIDIA's nvcc wheel)"),
        _ => None,
    };
    if let Some(why) = missing {
        eprintln!("SKIPPED {name}: {why}");
    }
    let hidden = "a_global_declared_in_a_function_body_is_seen_by_both_readers";
    if let Some(why) = missing {
        eprintln!("SKIPPED {hidden}: {why}");
    }
    let scrub = "the_scrub_kernels_assemble_with_every_store_kept";
    if let Some(why) = missing {
        eprintln!("SKIPPED {scrub}: {why}");
    }
    let ptxas2 = ptxas.clone();
    let ptxas3 = ptxas.clone();
    let trials = vec![
        Trial::test(name, move || {
            the_ptx_scan_and_the_cubin_name_the_same_globals(&ptxas.expect("ptxas found"));
            Ok(())
        })
        .with_ignored_flag(missing.is_some()),
        Trial::test(hidden, move || {
            a_global_in_a_function_body_is_seen_by_both_readers(&ptxas2.expect("ptxas found"));
            Ok(())
        })
        .with_ignored_flag(missing.is_some()),
        Trial::test(scrub, move || {
            the_scrub_kernels_assemble(&ptxas3.expect("ptxas found"));
            Ok(())
        })
        .with_ignored_flag(missing.is_some()),
    ];
    libtest_mimic::run(&args, trials).exit();
}

/// The `hidden_global` exploit declares its launch counter by inline asm inside the kernel's
/// body: the module-scope scan does not list it, the body scan does, and the cubin ptxas makes
/// names it with a local `$__` name, which `elf_globals` refuses (the driver cannot look it up).
fn a_global_in_a_function_body_is_seen_by_both_readers(ptxas: &Path) {
    let dir = candidates().join("exploits/embedding_bag_sum/hidden_global");
    let cand = load_candidate(&dir).unwrap();
    let ModuleSource::Cuda { file, code, flags } = &cand.source else {
        panic!("hidden_global is a CUDA C++ candidate");
    };
    let ptx = compile_cuda(file, code, flags, "compute_90").unwrap();
    assert!(ptx_globals(&ptx).is_empty(), "not at module scope");
    assert_eq!(body_globals(&ptx), vec!["g_hidden".to_string()]);
    let scratch = std::env::temp_dir().join(format!("body-globals-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let cubin = assemble(ptxas, &make_visible(&ptx), &scratch, "hidden");
    let _ = std::fs::remove_dir_all(&scratch);
    let err = elf_globals(&cubin.expect("ptxas takes a global in a body")).unwrap_err();
    assert!(err.contains("inside a function body"), "{err}");
}

fn the_ptx_scan_and_the_cubin_name_the_same_globals(ptxas: &Path) {
    let scratch = std::env::temp_dir().join(format!("module-globals-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let mut compared = 0;
    let mut with_globals = Vec::new();
    for dir in ["examples", "exploits", "tripwires"]
        .iter()
        .flat_map(|g| candidate_dirs(g))
    {
        let Ok(cand) = load_candidate(&dir) else {
            continue; // manifests refused on purpose (the bad-input tests' own)
        };
        let ModuleSource::Cuda { file, code, flags } = &cand.source else {
            continue;
        };
        // A candidate whose headers are not here (CUB, cuda_bf16.h) is compiled by
        // nvrtc_candidates.rs when they are.
        let Ok(ptx) = compile_cuda(file, code, flags, "compute_90") else {
            continue;
        };
        if flags
            .arch
            .as_deref()
            .is_some_and(|a| a != "sm_90" && a != "compute_90")
        {
            continue; // sm_90a and others: ptxas is asked for sm_90 here
        }
        if !body_globals(&ptx).is_empty() {
            continue; // refused before it loads: the trial below
        }
        let visible = make_visible(&ptx);
        let from_ptx: BTreeSet<String> = ptx_globals(&visible).into_iter().collect();
        assert_eq!(
            ptx_globals(&ptx).into_iter().collect::<BTreeSet<_>>(),
            from_ptx,
            "{}: making them visible changed the names",
            dir.display()
        );
        let name = format!("c{compared}");
        let cubin = assemble(ptxas, &visible, &scratch, &name)
            .unwrap_or_else(|e| panic!("{}: ptxas refused the visible PTX: {e}", dir.display()));
        let from_cubin: BTreeSet<String> = elf_globals(&cubin)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .into_iter()
            .collect();
        assert_eq!(from_ptx, from_cubin, "{}", dir.display());
        if !from_ptx.is_empty() {
            with_globals.push(dir.clone());
        }
        compared += 1;
    }
    let _ = std::fs::remove_dir_all(&scratch);
    assert!(compared >= 50, "only {compared} candidates compared");
    for needed in [
        "exploits/embedding_bag_sum/timed_skip",
        "exploits/embedding_bag_sum/content_memo_static",
        "examples/embedding_bag_sum/dynamic_tiles",
    ] {
        assert!(
            with_globals.iter().any(|d| d.ends_with(needed)),
            "{needed} has module globals: {with_globals:?}"
        );
    }
}

/// The kernels that overwrite thread and block state between a candidate's executions
/// (`backend::scrub`) assemble for sm_90, the local one keeping its whole frame (ptxas reports
/// it as the stack frame: no store was dropped) with no more than 32 registers, so that 2048
/// threads fit an SM and every thread slot is reached.
fn the_scrub_kernels_assemble(ptxas: &Path) {
    use dlrm_bench::backend::scrub::{frame_bytes, local_ptx, SHARED_PTX};
    let scratch = std::env::temp_dir().join(format!("scrub-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let frame = frame_bytes(2500);
    for (name, ptx) in [
        ("local", local_ptx(frame)),
        ("shared", SHARED_PTX.to_string()),
    ] {
        let input = scratch.join(format!("{name}.ptx"));
        std::fs::write(&input, ptx).unwrap();
        let out = std::process::Command::new(ptxas)
            .args(["-arch=sm_90", "-v", "-o"])
            .arg(scratch.join(format!("{name}.cubin")))
            .arg(&input)
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{name}: {log}");
        let registers: u32 = log
            .split("Used ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{name}: no register count in {log}"));
        assert!(registers <= 32, "{name}: {registers} registers");
        if name == "local" {
            assert!(log.contains(&format!("{frame} bytes stack frame")), "{log}");
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
}
