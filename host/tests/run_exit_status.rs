//! `dlrm-bench run` exits non-zero, naming the reference, when a problem's reference fails its
//! own check, and so does `--resume` of that run. A reference is made to fail by the workers'
//! fault injection (`DLRM_BENCH_INJECT_FAULT=prepare`, see `worker.rs`): the worker fails while
//! preparing the inputs, as one whose generator or oracle failed would, so the reference is
//! recorded as `runtime_error` and the candidate is skipped. (Runs whose references pass exit
//! 0: tests/isolation.rs.)
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn dlrm_bench(args: &[&str], fault: bool) -> Output {
    dlrm_bench_with(args, fault.then_some("prepare"))
}

fn dlrm_bench_with(args: &[&str], fault: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dlrm-bench"));
    if let Some(fault) = fault {
        cmd.env(dlrm_bench::runner::worker::FAULT_ENV, fault);
    }
    cmd.args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the binary runs")
}

/// `run --cpu` of problem 1's reference alone at its default shape with worker fault `fault`,
/// under a fresh temporary root: (root, results directory, the run's output).
fn reference_alone_with_fault(fault: &str) -> (PathBuf, PathBuf, Output) {
    let root = std::env::temp_dir().join(format!("dlrm-bench-{fault}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let out = root.join("results");
    let run = dlrm_bench_with(
        &[
            "run",
            "--cpu",
            "--problem",
            "embedding_bag_sum",
            "--no-candidates",
            "--shapes",
            "default",
            "--out",
            out.to_str().unwrap(),
        ],
        Some(fault),
    );
    (root, out, run)
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
    let (candidates, out) = (root.join("corpus"), root.join("results"));
    std::fs::create_dir_all(candidates.join("tuned")).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../candidates/tuned/embedding_bag_sum/candidate.toml"),
        candidates.join("tuned/candidate.toml"),
    )
    .unwrap();
    let run = dlrm_bench(
        &[
            "run",
            "--cpu",
            "--problem",
            "embedding_bag_sum",
            "--candidates",
            candidates.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        true,
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    let line = "error: the reference of `embedding_bag_sum` failed its own check (runtime_error)";
    assert!(!run.status.success(), "exit status {}", run.status);
    assert!(stderr.contains(line), "{stderr}");
    assert!(
        stderr.contains("DLRM_BENCH_INJECT_FAULT: a fault injected"),
        "{stderr}"
    );

    let dir = run_dir(&out);
    let resumed = dlrm_bench(&["run", "--resume", dir.to_str().unwrap()], false);
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert!(!resumed.status.success(), "exit status {}", resumed.status);
    assert!(stderr.contains(line), "{stderr}");
    assert!(String::from_utf8_lossy(&resumed.stdout).contains("(0 new records)"));
    std::fs::remove_dir_all(&root).ok();
}

/// A worker's descriptor 1 is not its event channel: the line a kernel's device `printf` could
/// print there (a forged record saying the reference is `correct`) reaches stderr, not the
/// records, and the reference is recorded as what the worker reported (`runtime_error`).
#[test]
fn an_event_printed_on_the_workers_stdout_is_not_a_record() {
    let (root, out, run) = reference_alone_with_fault("forge");
    assert!(!run.status.success(), "exit status {}", run.status);
    let records = std::fs::read_to_string(run_dir(&out).join("results.jsonl")).unwrap();
    assert_eq!(records.lines().count(), 1, "{records}");
    assert!(records.contains("\"runtime_error\""), "{records}");
    assert!(!records.contains("forged"), "{records}");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("\"forged\""),
        "the forged line went to stderr: {stderr}"
    );
    std::fs::remove_dir_all(&root).ok();
}

/// A reference's event line that does not parse (a serialisation bug, cut here in half by the
/// `garble` fault) is not lost without a word: the reference is recorded `runtime_error` saying
/// its record did not reach the runner and why, and the run exits non-zero.
#[test]
fn a_reference_record_that_cannot_be_read_is_recorded_as_lost() {
    let (root, out, run) = reference_alone_with_fault("garble");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        !run.status.success(),
        "exit status {}: {stderr}",
        run.status
    );
    let records = std::fs::read_to_string(run_dir(&out).join("results.jsonl")).unwrap();
    assert_eq!(records.lines().count(), 1, "{records}");
    let r: serde_json::Value = serde_json::from_str(records.trim()).unwrap();
    assert_eq!(r["candidate"], "reference", "{r}");
    assert_eq!(r["status"], "runtime_error", "{r}");
    let message = r["message"].as_str().unwrap();
    assert!(
        message.contains("its record did not reach the runner")
            && message.contains("could not be read: EOF while parsing"),
        "{message}"
    );
    std::fs::remove_dir_all(&root).ok();
}
