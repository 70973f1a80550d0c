//! The time limit is the candidate's own device work, never the harness's: on the CPU emulator,
//! with `--timeout-s 1` (well below the seconds the harness spends checking a candidate there
//! and timing it over 2000 pairs), a correct candidate twice as slow as the reference (its plan
//! is the reference's, run twice) ends `correct` with a speedup below 1, while a kernel that never
//! ends is still a `timeout`. The hang comes first, so the slow candidate runs in a fresh worker:
//! that worker reads the input sets the first one cached and generates none.
mod common;

use common::{run_records, write_candidate, HANG};
use std::path::PathBuf;
use std::process::Command;

/// The reference's scratch and one launch of its kernel; the candidate runs the launch twice.
const REFERENCE_SCRATCH: &str = r#"
problem = "embedding_bag_sum"
name = "reference_twice"
source = "gpu-kernels"
[[scratch]]
name = "offset2bag"
bytes = "max(N, 1) * 8"
[[scratch]]
name = "bag_size"
bytes = "(B + 1) * 8"
"#;
const REFERENCE_LAUNCH: &str = r#"
[[launch]]
kernel = "embedding_bag_sum_reference"
grid = ["min(1024, ceil_div(B * ceil_div(D, 32), 8))", 1, 1]
block = [32, 8, 1]
args = ["indices", "offsets", "weight", "out", "offset2bag", "N", "B", "D", "bag_size", "-1", "E"]
"#;

#[test]
fn a_slow_correct_candidate_is_not_killed_but_a_hang_is() {
    let root: PathBuf =
        std::env::temp_dir().join(format!("dlrm-bench-fair-timeout-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let twice = format!("{REFERENCE_SCRATCH}{}", REFERENCE_LAUNCH.repeat(2));
    write_candidate(&root, "a_hang", HANG);
    write_candidate(&root, "b_slow", &twice);
    let started = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_dlrm-bench"))
        .args(["run", "--cpu", "--problem", "embedding_bag_sum"])
        .args([
            "--timeout-s",
            "1",
            "--public-sets",
            "2",
            "--secret-sets",
            "1",
        ])
        .args(["--min-pairs", "2000", "--max-pairs", "2000"])
        .arg("--candidates")
        .arg(root.join("corpus"))
        .arg("--out")
        .arg(root.join("results"))
        .arg("--input-cache")
        .arg(root.join("cache"))
        .output()
        .unwrap();
    let elapsed = started.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let records = run_records(&root.join("results"));
    let find = |name: &str| {
        records
            .iter()
            .find(|r| r["candidate"] == name)
            .unwrap_or_else(|| panic!("no record of {name}: {stderr}"))
    };
    let slow = find("reference_twice");
    assert_eq!(slow["status"], "correct", "{slow}");
    let speedup = slow["speedup"]["median"].as_f64().unwrap();
    assert!(speedup < 1.0, "twice the work is slower: {speedup}");
    let phases = &slow["phases"];
    let harness: f64 = ["load", "check", "time", "recheck"]
        .iter()
        .filter_map(|p| phases[p].as_f64())
        .sum();
    assert!(
        phases["check"].as_f64().is_some(),
        "phases recorded: {slow}"
    );
    let once_s = slow["timing"]["median_ms"].as_f64().unwrap() / 1e3;
    eprintln!(
        "slow candidate: {harness:.1} s in the harness, {once_s:.3} s an execution, limit 1 s, \
         run {elapsed:.1} s"
    );
    // The point of the test: the whole evaluation took longer than the limit.
    assert!(
        harness > 1.0,
        "the harness took only {harness:.1} s: raise the pairs"
    );
    let hang = find("hang");
    assert_eq!(hang["status"], "timeout", "{hang}");
    assert!(
        hang["message"]
            .as_str()
            .unwrap()
            .contains("own device work"),
        "{hang}"
    );
    let reference = records.iter().find(|r| r["group"] == "reference").unwrap();
    for p in ["generate", "oracle", "store", "upload", "check", "time"] {
        assert!(
            reference["phases"][p].as_f64().is_some(),
            "{p}: {reference}"
        );
    }
    // The worker after the hang read every set from the cache and generated none (the oracle
    // is computed again from the cached inputs).
    for p in ["read", "oracle", "upload"] {
        assert!(phases[p].as_f64().is_some(), "{p}: {slow}");
    }
    for p in ["generate", "store"] {
        assert!(phases[p].is_null(), "{p} again after the restart: {slow}");
    }
    assert!(
        !root.join("cache").join("embedding_bag_sum").exists()
            && !root.join("cache/.oracles/embedding_bag_sum").exists(),
        "the problem's cache and oracles are removed once it is done"
    );
    // Every second of the sessions is in a phase (the hang's wait, both workers' starts and
    // ends: `worker`), bar the last worker's end, which no record follows.
    let run_dir = std::fs::read_dir(root.join("results"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("run.json")).unwrap()).unwrap();
    let all = run["phases"]["all_s"].as_f64().unwrap();
    let sessions: f64 = run["phases"]["sessions_s"]
        .as_object()
        .unwrap()
        .values()
        .filter_map(|v| v.as_f64())
        .sum();
    assert!(
        all >= 0.95 * sessions && all <= 1.02 * sessions,
        "phases {all:.2} s of the sessions' {sessions:.2} s: {}",
        run["phases"]
    );
    // The hang's record carries its worker's life: its wait to the 1 s limit among it.
    assert!(
        hang["phases"]["worker"].as_f64().is_some_and(|s| s > 1.0),
        "{hang}"
    );
    std::fs::remove_dir_all(&root).unwrap();
}
