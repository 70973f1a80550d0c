//! The compilers and PTX tools a candidate's source goes through before a backend loads it:
//! NVRTC's flags and the CUDA headers it may include, `ptxas`, the PTX edits the project's own
//! kernels need (`launch_bounds!` markers), and helper processes under a time limit and, when
//! untrusted, in a sandbox; servers answering JSON lines.
pub mod cuda_include;
// build.rs applies the markers (it includes the file); the library keeps it for its tests.
#[cfg(test)]
mod launch_bounds;
pub mod limited;
pub mod nvrtc_flags;
pub mod ptx;
pub mod ptx_cache;
pub mod ptxas;
pub mod sandbox;
pub mod served;
pub mod untrusted;
