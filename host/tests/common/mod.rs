//! What the CLI-level tests of `dlrm-bench run` share: a candidate that never ends, writing a
//! candidate directory into a test's corpus, and reading the records of the one run a test made.
#![allow(dead_code)] // each test crate uses some of these
use std::path::Path;

/// A candidate whose kernel spins forever (problem 1's `out` as its flag).
pub const HANG: &str = r#"
problem = "embedding_bag_sum"
name = "hang"
source = "gpu-kernels"
[[launch]]
kernel = "fault_spin_forever"
grid = [1, 1, 1]
block = [32, 1, 1]
args = ["out"]
"#;

/// Writes `manifest` as `root/corpus/<dir>/candidate.toml`.
pub fn write_candidate(root: &Path, dir: &str, manifest: &str) {
    let d = root.join("corpus").join(dir);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("candidate.toml"), manifest).unwrap();
}

/// The records of the one run directory under `results`.
pub fn run_records(results: &Path) -> Vec<serde_json::Value> {
    let dir = std::fs::read_dir(results)
        .unwrap()
        .next()
        .expect("a run directory")
        .unwrap()
        .path();
    std::fs::read_to_string(dir.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}
