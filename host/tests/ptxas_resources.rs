//! The embedded PTX through NVIDIA's assembler, without a GPU: `ptxas -arch=sm_90 -v` must
//! accept every kernel (the PTX build alone never checks that its inline assembly is valid for
//! Hopper), and no kernel of a tuned candidate may use local memory: no spills and no stack
//! frame (the register budget is where those kernels' speed comes from; a spill, or an array
//! indexed at run time and so kept in local memory, is a regression that only a GPU run would
//! otherwise show: problem 3's and 5's tuned kernels had such arrays until ptxas showed them).
//! The table of registers, stack and spills per kernel is printed (`cargo test --test
//! ptxas_resources -- --nocapture`). The log parser's own tests are in `host/src/ptxas.rs`.
//!
//! ptxas is found as `dlrm-bench check` finds it ([`dlrm_bench::toolchain::ptxas`]), or where `.ci/run`
//! unpacks the `nvidia-cuda-nvcc` wheel (`target/nvrtc`). Without one the trial is reported as
//! ignored, saying why.
use dlrm_bench::candidate::ModuleSource;
use dlrm_bench::runner::load_all;
use dlrm_bench::toolchain::ptx::GPU_KERNELS_PTX;
use dlrm_bench::toolchain::ptxas;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The trial, reported as ignored (saying why) where no ptxas is found.
fn main() {
    let args = libtest_mimic::Arguments::from_args();
    // Besides the library's search (`dlrm_bench::toolchain::ptxas`), where `.ci/run` unpacks the wheel.
    let unpacked = repo().join("target/nvrtc/nvidia/cu13/bin/ptxas");
    let tool = ptxas::find(&[unpacked]);
    let name = "every_kernel_assembles_for_sm_90_and_tuned_kernels_use_no_local_memory";
    if tool.is_none() {
        eprintln!(
            "SKIPPED {name}: no ptxas (set DLRM_BENCH_PTXAS, or let .ci/run unpack the \
             nvidia-cuda-nvcc wheel into target/nvrtc)"
        );
    }
    let ignored = tool.is_none();
    let trial = libtest_mimic::Trial::test(name, move || {
        every_kernel_assembles_for_sm_90_and_tuned_kernels_use_no_local_memory(
            &tool.expect("not ignored"),
        );
        Ok(())
    })
    .with_ignored_flag(ignored);
    libtest_mimic::run(&args, vec![trial]).exit();
}

fn every_kernel_assembles_for_sm_90_and_tuned_kernels_use_no_local_memory(tool: &Path) {
    let resources = ptxas::assemble(tool, GPU_KERNELS_PTX).unwrap_or_else(|e| panic!("{e}"));
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
            !r.uses_local_memory(),
            "tuned kernel {kernel} uses local memory (spills, or an array it indexes at run \
             time): {r:?}"
        );
    }
}
