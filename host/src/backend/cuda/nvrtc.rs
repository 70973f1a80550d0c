//! NVRTC: whether it loads, its version, and compiling a CUDA C++ source to PTX.
use super::BackendError;
use super::BackendResult;
use super::CudaFlags;
use cudarc::driver::sys;
use cudarc::driver::CudaContext;

/// The start of the message when libnvrtc cannot be loaded.
pub(crate) const NVRTC_MISSING: &str = "libnvrtc could not be loaded";

/// Runs `f`, turning a panic (cudarc panics when a CUDA library cannot be loaded) into `None`
/// without printing the panic message.
pub(crate) fn quietly<T>(f: impl FnOnce() -> T + std::panic::UnwindSafe) -> Option<T> {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = std::panic::catch_unwind(f).ok();
    std::panic::set_hook(previous);
    r
}

/// How many CUDA devices the driver sees (0 without libcuda or a driver).
pub(crate) fn device_count() -> usize {
    // SAFETY: only probes whether libcuda can be loaded.
    if !unsafe { sys::is_culib_present() } {
        return 0;
    }
    quietly(CudaContext::device_count)
        .and_then(Result::ok)
        .map_or(0, |n| n.max(0) as usize)
}

/// libnvrtc's version, loading it; `None` when it cannot be loaded.
pub fn nvrtc_version() -> Option<(i32, i32)> {
    // Loaded once per process: `quietly` swaps the process's panic hook, which threads
    // compiling at once must not do together.
    static VERSION: std::sync::OnceLock<Option<(i32, i32)>> = std::sync::OnceLock::new();
    *VERSION.get_or_init(|| {
        quietly(|| {
            let (mut major, mut minor) = (0, 0);
            // SAFETY: loads libnvrtc (a panic when absent, caught) and reads two integers.
            unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
            (major, minor)
        })
    })
}

/// Compiles CUDA C++ to PTX with NVRTC, for the arch `flags` names or else `default_arch`
/// (e.g. `compute_90`), with the candidate's include directories, then the CUDA headers'
/// ([`crate::toolchain::cuda_include`]), and its options ([`crate::toolchain::nvrtc_flags::command_line`]). Needs
/// only libnvrtc, not a GPU. A compile error carries NVRTC's log, and the include directories
/// searched when a header could not be opened.
pub fn compile_cuda(
    file: &std::path::Path,
    code: &str,
    flags: &CudaFlags,
    default_arch: &str,
) -> BackendResult<String> {
    let dir = crate::toolchain::ptx_cache::dir();
    compile_cuda_into(file, code, flags, default_arch, dir.as_deref())
}

/// [`compile_cuda`] through the PTX cache in `dir` ([`crate::toolchain::ptx_cache`]; `None`:
/// no cache).
pub fn compile_cuda_into(
    file: &std::path::Path,
    code: &str,
    flags: &CudaFlags,
    default_arch: &str,
    dir: Option<&std::path::Path>,
) -> BackendResult<String> {
    let named = flags.arch.as_deref().unwrap_or(default_arch);
    let arch = crate::toolchain::nvrtc_flags::ptx_arch(named).ok_or_else(|| {
        BackendError::Compile(format!("{}: unknown arch `{named}`", file.display()))
    })?;
    // libnvrtc is loaded before the include search, which looks next to it.
    nvrtc_version().ok_or_else(|| {
        BackendError::Compile(format!(
            "{NVRTC_MISSING} (put the CUDA toolkit's lib64 on LD_LIBRARY_PATH, or `pip download nvidia-cuda-nvrtc` and its wheel's nvidia/cu13/lib, as .ci/run does)"
        ))
    })?;
    let search = crate::toolchain::cuda_include::current();
    let options = crate::toolchain::nvrtc_flags::command_line(
        &arch,
        &flags.include,
        &search.dirs,
        &flags.options,
    );
    let version = format!("{:?}", nvrtc_version());
    let headers = include_contents(&flags.include);
    let mut parts: Vec<&str> = vec![code, &version, &headers];
    parts.extend(options.iter().map(String::as_str));
    crate::toolchain::ptx_cache::cached(dir, &parts, || {
        nvrtc_compile(file, code, flags, &arch, options.clone(), search)
    })
}

/// The files of a candidate's include directories, names and contents, for the PTX cache's key
/// (a header edited between two runs that share a cache is another key). The CUDA headers are
/// keyed by NVRTC's version and the directories searched.
fn include_contents(dirs: &[std::path::PathBuf]) -> String {
    // Bounded: directories reached through links are not followed (a loop would never end),
    // and past the bounds the rest is not read (such a candidate is simply keyed by less).
    const MAX_FILES: usize = 10_000;
    const MAX_BYTES: usize = 64 << 20;
    let (mut out, mut files) = (String::new(), 0);
    let mut stack: Vec<std::path::PathBuf> = dirs.to_vec();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut found: Vec<(std::path::PathBuf, bool)> = entries
            .flatten()
            .map(|e| (e.path(), e.file_type().is_ok_and(|t| t.is_dir())))
            .collect();
        found.sort();
        for (p, is_dir) in found {
            if files >= MAX_FILES || out.len() >= MAX_BYTES {
                return out;
            }
            if is_dir {
                stack.push(p);
            } else if let Ok(bytes) = std::fs::read(&p) {
                files += 1;
                out.push_str(&format!(
                    "{}\u{1e}{}\u{1e}",
                    p.display(),
                    String::from_utf8_lossy(&bytes)
                ));
            }
        }
    }
    out
}

/// One NVRTC compilation of [`compile_cuda`] (no cache).
fn nvrtc_compile(
    file: &std::path::Path,
    code: &str,
    flags: &CudaFlags,
    arch: &str,
    options: Vec<String>,
    search: &crate::toolchain::cuda_include::IncludeSearch,
) -> BackendResult<String> {
    let opts = cudarc::nvrtc::CompileOptions {
        name: Some(file.display().to_string()),
        options,
        ..Default::default()
    };
    let code = code.to_string();
    // libnvrtc is loaded ([`nvrtc_version`] answered), so this does not panic for want of it;
    // no `quietly`, which would swap the panic hook under other threads' compiles.
    let compiled = std::panic::catch_unwind(move || cudarc::nvrtc::compile_ptx_with_opts(code, opts))
        .ok()
        .ok_or_else(|| {
            BackendError::Compile(format!(
                "{NVRTC_MISSING} (put the CUDA toolkit's lib64 on LD_LIBRARY_PATH, or `pip download nvidia-cuda-nvrtc` and its wheel's nvidia/cu13/lib, as .ci/run does)"
            ))
        })?;
    match compiled {
        Ok(ptx) => Ok(ptx.to_src()),
        Err(cudarc::nvrtc::CompileError::CompileError { nvrtc, log, .. }) => {
            let log = log.to_string_lossy();
            let mut message = format!("{}: NVRTC {nvrtc} (arch {arch})\n{log}", file.display());
            if crate::toolchain::cuda_include::is_missing_header(&log) {
                if !flags.include.is_empty() {
                    message.push_str("the candidate's include directories:\n");
                    for d in &flags.include {
                        message.push_str(&format!("  {}\n", d.display()));
                    }
                }
                message.push_str(&search.describe());
            }
            Err(BackendError::Compile(message))
        }
        Err(e) => Err(BackendError::Compile(format!("{}: {e:?}", file.display()))),
    }
}
