//! Native CUDA C++ candidates compiled ahead: at the start of a run on a GPU, the module of
//! every candidate the run will measure is compiled with NVRTC for the device, in parallel on
//! half the CPUs, into the run's PTX
//! cache ([`crate::toolchain::ptx_cache`]), while the first problems' workers prepare their
//! inputs; a worker then loads a candidate's PTX from the cache instead of compiling it (once
//! per shape, and again after every restart). A compile error is left for the worker, which
//! records it as the candidate's `compile_error`.
use crate::backend::ModuleSource;
use crate::candidate::Candidate;
use rayon::prelude::*;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// The PTX cache's folder under the run's input cache.
pub(super) const PTX_DIR: &str = "ptx";

/// Compiles the CUDA C++ modules of `candidates` (the run's, once per distinct source and
/// flags) for a device of compute capability `cc` into `dir`, on half the CPUs (the other half
/// stays with the workers' preparation), stopping between modules once `stop` is set (the units
/// ended); the seconds it took, or `None` when there was nothing to compile. Without libnvrtc
/// each compile fails at once and nothing is cached.
pub(super) fn prebuild(
    candidates: &[&Candidate],
    cc: Option<(i32, i32)>,
    dir: &Path,
    stop: &AtomicBool,
) -> Option<f64> {
    let arch = crate::toolchain::nvrtc_flags::device_arch(cc);
    let mut modules: Vec<&ModuleSource> = Vec::new();
    for c in candidates {
        if let ModuleSource::Cuda { .. } = &c.source {
            if !modules.contains(&&c.source) {
                modules.push(&c.source);
            }
        }
    }
    if modules.is_empty() {
        return None;
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1));
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .ok()?;
    let started = std::time::Instant::now();
    pool.install(|| {
        modules.par_iter().for_each(|m| {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            if let ModuleSource::Cuda { file, code, flags } = m {
                let _ = crate::backend::cuda::compile_cuda_into(file, code, flags, arch, Some(dir));
            }
        })
    });
    Some(started.elapsed().as_secs_f64())
}
