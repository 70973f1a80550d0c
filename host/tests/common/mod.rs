//! What the integration tests share: a candidate that never ends, writing a candidate directory
//! into a test's corpus, reading the records of the one run a test made, and an
//! `embedding_bag_sum` candidate running one of the project's Rust kernels, and records compared
//! field by field without what the clock decides.
#![allow(dead_code)] // each test crate uses some of these
use std::path::Path;

use bench_problems::{find_problem, Dim, Problem};
use dlrm_bench::candidate::{reference_candidate, Candidate, ModuleSource};

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

/// `embedding_bag_sum`.
pub fn problem() -> &'static dyn Problem {
    find_problem("embedding_bag_sum").unwrap()
}

/// An `embedding_bag_sum` candidate (group `exploits`) running the project's Rust kernel
/// `kernel` alone, one warp a bag, with the tuned kernel's arguments.
pub fn rust_candidate(name: &str, kernel: &str) -> Candidate {
    let mut c = reference_candidate(problem());
    c.name = name.into();
    c.group = "exploits".into();
    c.origin = format!("test/{name}");
    c.source = ModuleSource::Builtin;
    c.scratch.clear();
    c.launches.truncate(1);
    c.launches[0].kernel = kernel.into();
    c.launches[0].grid = [
        Dim::Expr("ceil_div(B * 32, 256)".into()),
        Dim::Number(1),
        Dim::Number(1),
    ];
    c.launches[0].block = [Dim::Number(256), Dim::Number(1), Dim::Number(1)];
    c.launches[0].args = ["weight", "indices", "offsets", "out", "B", "D"]
        .map(String::from)
        .to_vec();
    c
}

/// What depends on the clock: timings, speedups and wins, phases, the timed calls' count.
pub const TIMED: [&str; 9] = [
    "timing",
    "reference_timing",
    "speedup",
    "speedup_eager",
    "win",
    "phases",
    "timed_runs_checked",
    "pytorch",
    "pytorch_compile",
];

/// Every record field by field, bit for bit, without the fields the clock decides, sorted.
pub fn untimed(records: &[serde_json::Value]) -> Vec<String> {
    let mut rows: Vec<String> = records
        .iter()
        .map(|r| {
            let mut r = r.clone();
            for k in TIMED {
                r.as_object_mut().unwrap().remove(k);
            }
            r.to_string()
        })
        .collect();
    rows.sort();
    rows
}
