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

/// The end of bytes `offset..offset + len` of `buffer` ([`Backend::download_range`]), or the
/// error of a range that is not inside it.
pub(crate) fn range_end(buffer: &Buffer, offset: usize, len: usize) -> BackendResult<usize> {
    offset
        .checked_add(len)
        .filter(|&end| end <= buffer.bytes)
        .ok_or_else(|| {
            BackendError::Device(format!(
                "download of bytes {offset}..+{len} of a {}-byte buffer",
                buffer.bytes
            ))
        })
}

/// The interface the runner drives.
pub trait Backend {
    fn info(&self) -> &DeviceInfo;
    fn alloc(&mut self, bytes: usize) -> BackendResult<Buffer>;
    /// Bytes of device memory free now.
    fn free_memory(&self) -> usize;
    fn free(&mut self, buffer: Buffer);
    fn upload(&mut self, buffer: &Buffer, data: &[u8]) -> BackendResult<()>;
    fn download(&mut self, buffer: &Buffer) -> BackendResult<Vec<u8>>;
    /// Copies `len` bytes of the buffer from byte `offset` on to the host (a valid prefix, the
    /// tail bytes of a fingerprinted prefix).
    fn download_range(
        &mut self,
        buffer: &Buffer,
        offset: usize,
        len: usize,
    ) -> BackendResult<Vec<u8>>;
    /// Fills the buffer with a repeated byte pattern (1, 2, 4 or 8 bytes).
    fn fill(&mut self, buffer: &Buffer, pattern: &[u8]) -> BackendResult<()>;
    /// A fingerprint of the buffer's contents (see `gpu_kernels::kernels::fingerprint`),
    /// computed on the device: comparing two tells whether anything wrote the buffer. The
    /// length is rounded up to whole 32-bit words (the bytes past the end of a buffer whose
    /// length is not a multiple of 4 are whatever the allocation holds there).
    fn fingerprint(&mut self, buffer: &Buffer) -> BackendResult<u64> {
        self.fingerprint_words(buffer, buffer.bytes.div_ceil(4))
    }
    /// The fingerprint of the buffer's first `words` 32-bit words (at most
    /// `bytes.div_ceil(4)`), on the device; equal to [`host_fingerprint`] of the same bytes.
    fn fingerprint_words(&mut self, buffer: &Buffer, words: usize) -> BackendResult<u64>;
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

/// The shortest repeat unit of a fill pattern: `[0x7A; 8]` (the i64 poison) is one byte, so a
/// device can fill with its 1-, 2- or 4-byte memset instead of a pattern built on the host.
pub fn shortest_period(pattern: &[u8]) -> &[u8] {
    (1..pattern.len())
        .filter(|p| pattern.len().is_multiple_of(*p))
        .find(|&p| pattern.chunks(p).all(|c| c == &pattern[..p]))
        .map_or(pattern, |p| &pattern[..p])
}

/// The fingerprint the device computes ([`Backend::fingerprint_words`]) of `bytes` (whole
/// 32-bit words; a length that is not a multiple of 4 is an error of the caller's), on the host:
/// Σ `word_hash(i, word i)`, wrapping, summed in parallel (the sum is order-free).
pub fn host_fingerprint(bytes: &[u8]) -> u64 {
    use gpu_kernels::kernels::fingerprint::word_hash;
    use rayon::prelude::*;
    assert!(
        bytes.len().is_multiple_of(4),
        "host_fingerprint of {} bytes: whole words only",
        bytes.len()
    );
    const CHUNK_WORDS: usize = 1 << 16;
    bytes
        .par_chunks(CHUNK_WORDS * 4)
        .enumerate()
        .map(|(c, chunk)| {
            let base = (c * CHUNK_WORDS) as u64;
            chunk.chunks_exact(4).enumerate().fold(0u64, |acc, (j, w)| {
                let w = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                acc.wrapping_add(word_hash(base + j as u64, w))
            })
        })
        .reduce(|| 0, u64::wrapping_add)
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
    fn a_fill_pattern_reduces_to_its_shortest_repeat() {
        assert_eq!(shortest_period(&[0x7A; 8]), &[0x7A]);
        assert_eq!(shortest_period(&[1, 2, 1, 2]), &[1, 2]);
        assert_eq!(shortest_period(&[1, 2, 3, 4, 1, 2, 3, 4]), &[1, 2, 3, 4]);
        let f64_poison = 0x7FF4_BAD0_BAD0_BAD0u64.to_le_bytes();
        assert_eq!(shortest_period(&f64_poison), &f64_poison);
        assert_eq!(shortest_period(&[1, 1, 2]), &[1, 1, 2]);
        assert_eq!(shortest_period(&[9]), &[9]);
        // Every real poison fills the same bytes through its shortest repeat.
        for dtype in {
            use data_gen::DType::*;
            [F64, F32, F16, BF16, I64, I32, U8]
        } {
            let p = bench_problems::check::poison_pattern(dtype);
            let short = shortest_period(&p);
            let rebuilt: Vec<u8> = short.iter().copied().cycle().take(p.len()).collect();
            assert_eq!(rebuilt, p, "{dtype:?}");
        }
    }

    #[test]
    fn the_host_fingerprint_equals_the_emulated_kernel_and_the_backend() {
        // Longer than one parallel chunk, so chunk offsets are exercised.
        let words: Vec<u32> = (0..200_000u32)
            .map(|i| i.wrapping_mul(2654435761))
            .collect();
        let bytes: Vec<u8> = bytemuck::cast_slice(&words).to_vec();
        let host = host_fingerprint(&bytes);
        let mut be = emu::EmuBackend::new();
        let data = be.alloc(bytes.len()).unwrap();
        be.upload(&data, &bytes).unwrap();
        let out = be.alloc(8).unwrap();
        be.fill(&out, &[0]).unwrap();
        let module = be.load_module(&ModuleSource::Builtin).unwrap();
        let launch = Launch {
            kernel: "fingerprint_words".into(),
            grid: [7, 1, 1],
            block: [128, 1, 1],
            shared_bytes: 0,
            args: vec![be.address(&data), words.len() as u64, be.address(&out)],
        };
        be.launch(module, &launch).unwrap();
        let kernel = u64::from_le_bytes(be.download(&out).unwrap().try_into().unwrap());
        assert_eq!(kernel, host, "the emulated kernel");
        assert_eq!(be.fingerprint(&data).unwrap(), host, "the backend");
        let prefix = 1234;
        assert_eq!(
            be.fingerprint_words(&data, prefix).unwrap(),
            host_fingerprint(&bytes[..prefix * 4])
        );
        assert_ne!(
            host_fingerprint(&bytes[..8]),
            host_fingerprint(&bytes[4..12])
        );
    }

    #[test]
    fn a_worker_opens_what_the_probe_chose_and_never_falls_back() {
        assert!(!open(true).unwrap().is_gpu());
        match open(false) {
            Ok(backend) => assert!(backend.is_gpu()),
            Err(e) => assert!(e.to_string().starts_with("no usable CUDA device"), "{e}"),
        }
    }
}
