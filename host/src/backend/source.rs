//! What a backend loads a module from: the project's own kernels, CUDA C++ or PTX text, a
//! cubin or fatbin built offline, or a Triton function. A leaf of `backend` (it names no other
//! module outside it), so the backends see it without reaching up into `candidate`, which
//! re-exports it for the manifests that name it.
use super::triton::TritonSpec;
use std::path::PathBuf;

/// Where a plan's kernels come from.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ModuleSource {
    /// The project's own kernels: the embedded PTX on a GPU, the emulator on the CPU.
    Builtin,
    /// CUDA C++ source, compiled with NVRTC (`file` is for messages and quoted includes) with
    /// the manifest's `arch`, `options` and `include`.
    Cuda {
        file: PathBuf,
        code: String,
        flags: CudaFlags,
    },
    /// PTX text.
    Ptx { file: PathBuf, code: String },
    /// A `.cubin` or `.fatbin` built offline: the file's bytes (their magic checked).
    Binary { file: PathBuf, image: Vec<u8> },
    /// A `@triton.jit` function in `file`, compiled ahead of time by `tools/triton_compile.py`
    /// on a GPU host.
    Triton { file: PathBuf, spec: TritonSpec },
    /// A source that cannot be loaded as it stands (a `.cubin` not built yet), and what to do:
    /// the candidate is `skipped` with `reason`.
    Unavailable { file: PathBuf, reason: String },
}

impl ModuleSource {
    /// Why a backend without a GPU cannot load this source (`None` for the built-in kernels).
    pub(crate) fn needs_gpu(&self) -> Option<String> {
        let gpu = |file: &PathBuf, what: &str| {
            Some(format!(
                "{} needs a GPU{what}: the CPU emulator runs only the Rust kernels of gpu-kernels",
                file.display()
            ))
        };
        match self {
            ModuleSource::Builtin => None,
            ModuleSource::Cuda { file, .. } | ModuleSource::Ptx { file, .. } => gpu(file, ""),
            ModuleSource::Binary { file, .. } => gpu(file, " (a cubin or fatbin built offline)"),
            ModuleSource::Triton { file, .. } => {
                gpu(file, " and Triton (compiled by tools/triton_compile.py)")
            }
            ModuleSource::Unavailable { reason, .. } => Some(reason.clone()),
        }
    }
}

/// A CUDA C++ candidate's compile settings from its manifest, already validated
/// ([`crate::toolchain::nvrtc_flags`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CudaFlags {
    /// `sm_90a`, `compute_90`, ...; `None`: the device's (or `check --arch`).
    pub arch: Option<String>,
    /// NVRTC flags and `-D` defines of the allow-list.
    pub options: Vec<String>,
    /// Absolute include directories inside the candidate's directory.
    pub include: Vec<PathBuf>,
}

impl ModuleSource {
    /// CUDA C++ with the default settings.
    pub fn cuda(file: impl Into<PathBuf>, code: impl Into<String>) -> Self {
        ModuleSource::Cuda {
            file: file.into(),
            code: code.into(),
            flags: CudaFlags::default(),
        }
    }
}
