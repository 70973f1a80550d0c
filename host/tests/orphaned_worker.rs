//! A worker dies with its orchestrator: after `kill -9` of `dlrm-bench run` while its worker runs
//! a kernel that never ends, the worker is gone within seconds (it watches its stdin, which only
//! the orchestrator holds), instead of computing on and competing with a resumed run.
#![cfg(target_os = "linux")]
mod common;

use common::{write_candidate, HANG};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The `dlrm-bench worker` processes whose parent is `parent`.
fn workers_of(parent: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        // stat: "pid (comm) state ppid ...": the fields after the last ')'.
        let after = stat.rsplit(')').next().unwrap_or("");
        let ppid = after.split_whitespace().nth(1).and_then(|p| p.parse().ok());
        if ppid == Some(parent) && cmdline.split(|&b| b == 0).any(|a| a == b"worker") {
            found.push(pid);
        }
    }
    found
}

/// Whether `pid` still runs (a zombie waiting for its reaper does not).
fn alive(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat
        .rsplit(')')
        .next()
        .and_then(|s| s.split_whitespace().next());
    matches!(state, Some(s) if s != "Z" && s != "X")
}

/// Whether the run in `out` has logged its reference (so the worker is on the candidate).
fn reference_logged(out: &Path) -> bool {
    std::fs::read_dir(out)
        .into_iter()
        .flatten()
        .flatten()
        .any(|d| {
            std::fs::read_to_string(d.path().join("results.jsonl"))
                .is_ok_and(|t| t.contains("\"candidate\":\"reference\""))
        })
}

#[test]
fn a_worker_stops_when_its_orchestrator_is_killed() {
    let root: PathBuf =
        std::env::temp_dir().join(format!("dlrm-bench-orphan-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    write_candidate(&root, "hang", HANG);
    let mut runner = Command::new(env!("CARGO_BIN_EXE_dlrm-bench"))
        .args(["run", "--cpu", "--problem", "embedding_bag_sum"])
        .args(["--public-sets", "1", "--secret-sets", "1"])
        .arg("--candidates")
        .arg(root.join("corpus"))
        .arg("--out")
        .arg(root.join("results"))
        .arg("--input-cache")
        .arg(root.join("cache"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let worker = loop {
        let workers = workers_of(runner.id());
        if reference_logged(&root.join("results")) && workers.len() == 1 {
            break workers[0];
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the worker never reached the candidate"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    std::thread::sleep(Duration::from_millis(500)); // into the endless kernel
    assert!(alive(worker));
    runner.kill().unwrap(); // SIGKILL: no handler of the runner's runs
    runner.wait().unwrap();
    let killed = Instant::now();
    while alive(worker) {
        if killed.elapsed() > Duration::from_secs(10) {
            // Do not leave it spinning on the machine after the test fails.
            let _ = Command::new("kill")
                .args(["-9", &worker.to_string()])
                .status();
            panic!("worker {worker} still ran 10 s after its orchestrator was killed");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::fs::remove_dir_all(&root).ok();
}
