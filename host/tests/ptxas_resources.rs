//! The embedded PTX through NVIDIA's assembler, without a GPU: `ptxas -arch=sm_90 -v` must
//! accept every kernel (the PTX build alone never checks that its inline assembly is valid for
//! Hopper), and no kernel of a tuned candidate may use local memory: no spills and no stack
//! frame (the register budget is where those kernels' speed comes from; a spill, or an array
//! indexed at run time and so kept in local memory, is a regression that only a GPU run would
//! otherwise show: problem 3's and 5's tuned kernels had such arrays until ptxas showed them). The table of registers, stack and spills per kernel is
//! printed (`cargo test --test ptxas_resources -- --nocapture`).
//!
//! ptxas comes from `DLRM_BENCH_PTXAS`, else the `nvidia-cuda-nvcc` wheel that `.ci/run`
//! unpacks to `target/nvrtc`, else a CUDA toolkit (`$CUDA_HOME`, `/usr/local/cuda`), else
//! `PATH`. Without one the test skips and says so.
use dlrm_bench::candidate::ModuleSource;
use dlrm_bench::ptx::GPU_KERNELS_PTX;
use dlrm_bench::runner::load_all;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The first ptxas that runs, from the places the module doc lists.
fn find_ptxas() -> Option<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(p) = std::env::var_os("DLRM_BENCH_PTXAS") {
        candidates.push(PathBuf::from(p));
    }
    candidates.push(repo().join("target/nvrtc/nvidia/cu13/bin/ptxas"));
    if let Some(home) = std::env::var_os("CUDA_HOME") {
        candidates.push(Path::new(&home).join("bin/ptxas"));
    }
    candidates.push(PathBuf::from("/usr/local/cuda/bin/ptxas"));
    candidates.push(PathBuf::from("ptxas"));
    candidates.into_iter().find(|p| {
        Command::new(p)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// What ptxas reports for one entry.
#[derive(Debug, Default, PartialEq)]
struct Resources {
    registers: u32,
    stack_bytes: u32,
    spill_stores: u32,
    spill_loads: u32,
}

/// The number just before `unit` in `line` (`"24 bytes spill stores"` → 24 for
/// `"bytes spill stores"`).
fn count_before(line: &str, unit: &str) -> Option<u32> {
    let head = &line[..line.find(unit)?];
    head.split_whitespace().last()?.parse().ok()
}

/// Per entry, from `ptxas -v`'s log: "Compiling entry function 'NAME'" opens an entry, its
/// "N bytes stack frame, N bytes spill stores, N bytes spill loads" and "Used N registers"
/// lines follow.
fn parse_log(log: &str) -> BTreeMap<String, Resources> {
    let mut out = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in log.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or_default().to_string();
            out.insert(name.clone(), Resources::default());
            current = Some(name);
            continue;
        }
        let Some(r) = current.as_ref().and_then(|n| out.get_mut(n)) else {
            continue;
        };
        if let Some(n) = count_before(line, "bytes stack frame") {
            r.stack_bytes = n;
            r.spill_stores = count_before(line, "bytes spill stores").unwrap_or(0);
            r.spill_loads = count_before(line, "bytes spill loads").unwrap_or(0);
        }
        if let Some(n) = count_before(line, "registers") {
            r.registers = n;
        }
    }
    out
}

#[test]
fn the_log_parser_reads_ptxas_lines() {
    let log = "\
ptxas info    : Compiling entry function 'a_kernel' for 'sm_90'
ptxas info    : Function properties for a_kernel
    24 bytes stack frame, 16 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 80 registers, used 1 barriers, 4096 bytes smem
ptxas info    : Compiling entry function 'b_kernel' for 'sm_90'
ptxas info    : Function properties for b_kernel
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 17 registers, used 0 barriers
";
    let parsed = parse_log(log);
    assert_eq!(
        parsed["a_kernel"],
        Resources {
            registers: 80,
            stack_bytes: 24,
            spill_stores: 16,
            spill_loads: 8
        }
    );
    assert_eq!(parsed["b_kernel"].registers, 17);
    assert_eq!(parsed["b_kernel"].spill_stores, 0);
    assert_eq!(parsed.len(), 2);
}

#[test]
fn every_kernel_assembles_for_sm_90_and_tuned_kernels_use_no_local_memory() {
    let Some(ptxas) = find_ptxas() else {
        eprintln!(
            "skipped: no ptxas (set DLRM_BENCH_PTXAS, or let .ci/run unpack the \
             nvidia-cuda-nvcc wheel into target/nvrtc)"
        );
        return;
    };
    let dir = std::env::temp_dir().join(format!("dlrm-bench-ptxas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ptx = dir.join("gpu_kernels.ptx");
    std::fs::write(&ptx, GPU_KERNELS_PTX).unwrap();
    let output = Command::new(&ptxas)
        .args(["-arch=sm_90", "-v", "-o"])
        .arg(dir.join("gpu_kernels.cubin"))
        .arg(&ptx)
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&output.stderr).into_owned();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        output.status.success(),
        "{} rejected the embedded PTX:\n{log}",
        ptxas.display()
    );
    let resources = parse_log(&log);
    let entries = GPU_KERNELS_PTX.matches(".entry ").count();
    assert_eq!(resources.len(), entries, "one report per PTX entry");

    let (candidates, invalid) = load_all(&[repo().join("candidates/tuned")]);
    assert!(invalid.is_empty(), "{invalid:?}");
    let tuned: Vec<&str> = candidates
        .iter()
        .filter(|c| c.source == ModuleSource::Builtin)
        .flat_map(|c| c.launches.iter().map(|l| l.kernel.as_str()))
        .collect();
    assert!(tuned.len() >= 5, "the tuned candidates' kernels: {tuned:?}");

    println!(
        "{:<56} {:>5} {:>6} {:>6}",
        "kernel (ptxas sm_90)", "regs", "stack", "spill"
    );
    for (name, r) in &resources {
        let mark = if tuned.contains(&name.as_str()) {
            " (tuned)"
        } else {
            ""
        };
        println!(
            "{:<56} {:>5} {:>6} {:>6}{mark}",
            name, r.registers, r.stack_bytes, r.spill_stores
        );
    }
    for kernel in tuned {
        let r = resources
            .get(kernel)
            .unwrap_or_else(|| panic!("tuned kernel {kernel} has no ptxas report"));
        assert!(
            r.spill_stores == 0 && r.spill_loads == 0 && r.stack_bytes == 0,
            "tuned kernel {kernel} uses local memory (spills, or an array it indexes at run \
             time): {r:?}"
        );
    }
}
