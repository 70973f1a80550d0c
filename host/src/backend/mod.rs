//! Where kernels run: a CUDA GPU through `cudarc` (libcuda and libnvrtc loaded at run time), or
//! the CPU emulator of `gpu-kernels`. Both offer the same small interface: buffers, modules,
//! launches with raw argument words, a stream-ordered timer and an L2 flush.
pub mod cuda;
pub mod emu;
pub mod ptx_params;
mod source;

use serde::Serialize;
pub use source::ModuleSource;

/// A device buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Buffer {
    pub id: usize,
    pub bytes: usize,
}

/// A loaded module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModuleId(pub usize);

/// One launch, resolved to numbers: argument words are device addresses or integers (an f32
/// in its low 32 bits), one per kernel parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    pub kernel: String,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_bytes: u32,
    pub args: Vec<u64>,
}

/// What the device is.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceInfo {
    /// `cuda` or `cpu-emulator`.
    pub kind: String,
    pub name: String,
    pub driver: Option<String>,
    pub compute_capability: Option<(i32, i32)>,
    pub multiprocessors: u32,
    pub l2_bytes: usize,
    pub memory_bytes: usize,
    pub max_threads_per_block: u32,
    pub max_shared_bytes_per_block: usize,
}

/// Why a backend call failed. `Compile` and `Unsupported` concern one candidate; `Launch` and
/// `Device` may have poisoned the device context.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("compile error: {0}")]
    Compile(String),
    #[error("{0}")]
    Unsupported(String),
    #[error("launch refused: {0}")]
    BadLaunch(String),
    #[error("device error: {0}")]
    Device(String),
}

pub type BackendResult<T> = Result<T, BackendError>;

/// The interface the runner drives.
pub trait Backend {
    fn info(&self) -> &DeviceInfo;
    fn alloc(&mut self, bytes: usize) -> BackendResult<Buffer>;
    /// Bytes of device memory free now.
    fn free_memory(&self) -> usize;
    fn free(&mut self, buffer: Buffer);
    fn upload(&mut self, buffer: &Buffer, data: &[u8]) -> BackendResult<()>;
    fn download(&mut self, buffer: &Buffer) -> BackendResult<Vec<u8>>;
    /// Fills the buffer with a repeated byte pattern (1, 2, 4 or 8 bytes).
    fn fill(&mut self, buffer: &Buffer, pattern: &[u8]) -> BackendResult<()>;
    /// A fingerprint of the buffer's contents (see `gpu_kernels::kernels::fingerprint`),
    /// computed on the device: comparing two tells whether anything wrote the buffer.
    fn fingerprint(&mut self, buffer: &Buffer) -> BackendResult<u64>;
    /// Copies `src` into `dst` (same size) on the stream.
    fn copy(&mut self, dst: &Buffer, src: &Buffer) -> BackendResult<()>;
    /// Device address of the buffer's first byte.
    fn address(&self, buffer: &Buffer) -> u64;
    fn load_module(&mut self, source: &ModuleSource) -> BackendResult<ModuleId>;
    /// Byte size of each parameter of `kernel`; an error if the module has no such kernel.
    fn kernel_params(&mut self, module: ModuleId, kernel: &str) -> BackendResult<Vec<usize>>;
    fn launch(&mut self, module: ModuleId, launch: &Launch) -> BackendResult<()>;
    /// Waits for all queued work; reports any asynchronous fault.
    fn synchronize(&mut self) -> BackendResult<()>;
    /// Evicts the L2 (writes a buffer twice its size) and resets persisting lines.
    fn flush_l2(&mut self) -> BackendResult<()>;
    /// Marks the start of a timed region (stream-ordered).
    fn timer_start(&mut self) -> BackendResult<()>;
    /// Ends the timed region and returns its milliseconds.
    fn timer_stop(&mut self) -> BackendResult<f64>;
    /// Times a device-to-device copy of `bytes`; returns bytes moved (read + write) per second.
    fn copy_bandwidth(&mut self, bytes: usize) -> BackendResult<f64>;
    /// Whether timings are real device timings.
    fn is_gpu(&self) -> bool;
}

/// Picks the backend: CUDA when a driver and device are present (unless `force_cpu`), else the
/// CPU emulator. The reason for the choice is returned for the log.
pub fn select(force_cpu: bool, require_gpu: bool) -> anyhow::Result<(Box<dyn Backend>, String)> {
    if !force_cpu {
        match cuda::CudaBackend::new(0) {
            Ok(b) => {
                let why = format!("CUDA device 0: {}", b.info().name);
                return Ok((Box::new(b), why));
            }
            Err(e) if require_gpu => anyhow::bail!("no usable CUDA device: {e}"),
            Err(e) => {
                return Ok((
                    Box::new(emu::EmuBackend::new()),
                    format!("no usable CUDA device ({e})"),
                ));
            }
        }
    }
    Ok((
        Box::new(emu::EmuBackend::new()),
        "the CPU emulator was asked for".into(),
    ))
}

/// Opens the backend that the run's one probe ([`select`] in the parent) chose, in a worker:
/// the CPU emulator, or CUDA device 0 with no fallback, so that a worker of a GPU run never
/// quietly measures on the emulator.
pub fn open(emulator: bool) -> anyhow::Result<Box<dyn Backend>> {
    select(emulator, !emulator).map(|(backend, _)| backend)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_opens_what_the_probe_chose_and_never_falls_back() {
        assert!(!open(true).unwrap().is_gpu());
        match open(false) {
            Ok(backend) => assert!(backend.is_gpu()),
            Err(e) => assert!(e.to_string().starts_with("no usable CUDA device"), "{e}"),
        }
    }
}
