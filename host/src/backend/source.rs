//! What a backend loads a module from: the project's own kernels, CUDA C++ or PTX text. A leaf
//! of `backend` (it names no other module), so the backends see it without reaching up into
//! `candidate`, which re-exports it for the manifests that name it.
use std::path::PathBuf;

/// Where a plan's kernels come from.
#[derive(Clone, Debug, PartialEq, Eq)]
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
}

/// A CUDA C++ candidate's compile settings from its manifest, already validated
/// ([`crate::nvrtc_flags`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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
