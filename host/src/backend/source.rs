//! What a backend loads a module from: the project's own kernels, CUDA C++ or PTX text. A leaf
//! of `backend` (it names no other module), so the backends see it without reaching up into
//! `candidate`, which re-exports it for the manifests that name it.
use std::path::PathBuf;

/// Where a plan's kernels come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModuleSource {
    /// The project's own kernels: the embedded PTX on a GPU, the emulator on the CPU.
    Builtin,
    /// CUDA C++ source, compiled with NVRTC (`file` is for messages).
    Cuda { file: PathBuf, code: String },
    /// PTX text.
    Ptx { file: PathBuf, code: String },
}
