//! One candidate never changes another's verdict: on the CPU emulator a candidate that writes
//! past the end of its output (an existing Rust kernel, `gather_rows`, given arguments that make
//! it write one row per lookup into an output of one row per bag) faults on the guard page after
//! the buffer and is a `runtime_error`; the correct candidate after it, in a fresh worker, is
//! `correct`. Before the guard pages the stray writes landed in the worker's heap, and the next
//! candidate was judged `incorrect` or the worker aborted with "double free or corruption".
mod common;

use common::{run_records, write_candidate};
use std::path::PathBuf;
use std::process::Command;

const OVERRUN: &str = r#"
problem = "embedding_bag_sum"
name = "overrun"
source = "gpu-kernels"
[[launch]]
kernel = "gather_rows"
grid = [4, 1, 1]
block = [64, 1, 1]
args = ["weight", "E", "indices", "N", "D", "out"]
"#;

const CORRECT: &str = r#"
problem = "embedding_bag_sum"
name = "correct_after"
source = "gpu-kernels"
[[launch]]
kernel = "embedding_bag_sum_warp_per_bag"
grid = ["ceil_div(B * 32, 256)", 1, 1]
block = [256, 1, 1]
args = ["weight", "indices", "offsets", "out", "B", "D"]
"#;

#[test]
fn a_write_past_an_output_faults_alone_and_the_next_candidate_is_judged_alone() {
    let root: PathBuf = std::env::temp_dir().join(format!("dlrm-bench-oob-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    write_candidate(&root, "a_overrun", OVERRUN);
    write_candidate(&root, "b_correct", CORRECT);
    let out = Command::new(env!("CARGO_BIN_EXE_dlrm-bench"))
        .args(["run", "--cpu", "--problem", "embedding_bag_sum"])
        .args(["--public-sets", "1", "--secret-sets", "1"])
        .args(["--min-pairs", "3", "--max-pairs", "3"])
        .arg("--candidates")
        .arg(root.join("corpus"))
        .arg("--out")
        .arg(root.join("results"))
        .arg("--input-cache")
        .arg(root.join("cache"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let records = run_records(&root.join("results"));
    let find = |name: &str| {
        records
            .iter()
            .find(|r| r["candidate"] == name)
            .unwrap_or_else(|| panic!("no record of {name}: {stderr}"))
    };
    let overrun = find("overrun");
    assert_eq!(overrun["status"], "runtime_error", "{overrun}");
    assert!(
        overrun["message"].as_str().unwrap().contains("worker died"),
        "{overrun}"
    );
    let correct = find("correct_after");
    assert_eq!(correct["status"], "correct", "{correct}");
    assert!(out.status.success(), "the references passed: {stderr}");
    let _ = std::fs::remove_dir_all(&root);
}
