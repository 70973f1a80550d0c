//! The PTX of `gpu-kernels`, built by `build.rs` and embedded in the binary.

/// PTX (sm_80, loads on Ampere and newer) holding every reference, tuned and probe kernel.
pub const GPU_KERNELS_PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/gpu_kernels.ptx"));
