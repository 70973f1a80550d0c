//! `dlrm-bench run` exits non-zero, naming the reference, when a problem's reference fails its
//! own check, and so does `--resume` of that run. A reference is made to fail from the command
//! line by `--public-sets 0`: its worker stops while preparing the inputs (a run needs one
//! public set), so the reference is recorded as `runtime_error`. (Runs whose references pass
//! exit 0: tests/isolation.rs.)
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn dlrm_bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dlrm-bench"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the binary runs")
}

/// The one results directory under `out`.
fn run_dir(out: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

#[test]
fn a_failed_reference_makes_run_and_resume_exit_non_zero() {
    let root = std::env::temp_dir().join(format!("dlrm-bench-exit-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let (candidates, out) = (root.join("none"), root.join("results"));
    std::fs::create_dir_all(&candidates).unwrap();
    let run = dlrm_bench(&[
        "run",
        "--cpu",
        "--problem",
        "embedding_bag_sum",
        "--public-sets",
        "0",
        "--candidates",
        candidates.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    let line = "error: the reference of `embedding_bag_sum` failed its own check (runtime_error)";
    assert!(!run.status.success(), "exit status {}", run.status);
    assert!(stderr.contains(line), "{stderr}");

    let dir = run_dir(&out);
    let resumed = dlrm_bench(&["run", "--resume", dir.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert!(!resumed.status.success(), "exit status {}", resumed.status);
    assert!(stderr.contains(line), "{stderr}");
    assert!(String::from_utf8_lossy(&resumed.stdout).contains("(0 new records)"));
    std::fs::remove_dir_all(&root).ok();
}
