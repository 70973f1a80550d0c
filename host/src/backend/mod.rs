//! Where kernels run: a CUDA GPU through `cudarc` (libcuda and libnvrtc loaded at run time), or
//! the CPU emulator of `gpu-kernels`. Both offer the same small interface: buffers, modules,
//! launches with raw argument words, a stream-ordered timer and an L2 flush.
pub mod binary;
pub mod ceilings;
pub mod cuda;
pub mod emu;
pub mod globals;
mod guarded;
mod jit;
pub mod ptx_params;
pub mod scrub;
mod source;
pub mod triton;
pub mod triton_tool;

use bench_problems::check::poison_pattern;
use data_gen::DType;
use gpu_kernels::kernels::compare::{self, FloatAcc};
use serde::{Deserialize, Serialize};
pub(crate) use source::CudaFlags;
pub use source::ModuleSource;

/// A device buffer: bytes `offset..offset + bytes` of allocation `id` (a whole allocation has
/// offset 0; [`Buffer::part`] gives a part of one, which every call treats as a buffer of its
/// own, except that freeing it frees the whole allocation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Buffer {
    pub id: usize,
    pub offset: usize,
    pub bytes: usize,
}

impl Buffer {
    /// Bytes `offset..offset + bytes` of this buffer, as a buffer (`None` past its end).
    pub fn part(&self, offset: usize, bytes: usize) -> Option<Buffer> {
        (offset.checked_add(bytes)? <= self.bytes).then_some(Buffer {
            id: self.id,
            offset: self.offset + offset,
            bytes,
        })
    }
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

/// What a compiled module (Triton's) fixes for each launch of one of its kernels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompiledLaunch {
    /// Threads per block (`num_warps` × 32).
    pub block_threads: u32,
    /// Dynamic shared memory, in bytes.
    pub shared_bytes: u32,
    /// The pointer parameters after the plan's arguments, in order.
    pub scratch: Vec<triton::TrailingScratch>,
}

/// What the device is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    /// The module is refused as it stands (more module global memory than the limit): the
    /// candidate's manifest must change (`invalid_manifest`).
    #[error("{0}")]
    Refused(String),
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
    /// Copies rows of `src` (rows of `width_words` 32-bit words) into `dst`, on the device:
    /// row `rows[u]` to row `u`, for the `n_rows` row ids (i64) at the start of `rows`. An id
    /// outside `src` is skipped (its row of `dst` keeps what it held). Run by the built-in
    /// kernel `gather_rows` on both backends.
    fn gather_rows(
        &mut self,
        src: &Buffer,
        rows: &Buffer,
        n_rows: usize,
        width_words: usize,
        dst: &Buffer,
    ) -> BackendResult<()> {
        let row_bytes = width_words.checked_mul(4);
        let fits = row_bytes.is_some_and(|b| b > 0)
            && n_rows.checked_mul(8).is_some_and(|b| b <= rows.bytes)
            && row_bytes
                .and_then(|b| b.checked_mul(n_rows))
                .is_some_and(|b| b <= dst.bytes);
        if !fits {
            return Err(BackendError::Device(format!(
                "gather of {n_rows} rows of {width_words} words: ids in {} bytes, into {} bytes",
                rows.bytes, dst.bytes
            )));
        }
        if n_rows == 0 {
            return Ok(());
        }
        let [src_at, rows_at, dst_at] = [src, rows, dst].map(|b| self.address(b));
        if [src_at, rows_at, dst_at].contains(&0) {
            return Err(BackendError::Device(
                "gather of rows of a freed buffer".into(),
            ));
        }
        let module = self.load_module(&ModuleSource::Builtin)?;
        let launch = Launch {
            kernel: "gather_rows".into(),
            grid: [(self.info().multiprocessors * 8).max(1), 1, 1],
            block: [256, 1, 1],
            shared_bytes: 0,
            args: vec![
                src_at,
                (src.bytes / (4 * width_words)) as u64,
                rows_at,
                n_rows as u64,
                width_words as u64,
                dst_at,
            ],
        };
        self.launch(module, &launch)
    }
    /// `dst[i] = (a · src[i] + b) mod bound` for the first `n` i64 ids of `src` (ids outside
    /// `0..bound` copied as they are), on the device: a bijection of the ids when `a` is coprime
    /// to `bound`. Run by the built-in kernel `relabel_rows` on both backends; `a`, `b` and
    /// `bound` must be below 2^32.
    fn relabel_rows(
        &mut self,
        src: &Buffer,
        dst: &Buffer,
        n: usize,
        bound: u64,
        (a, b): (u64, u64),
    ) -> BackendResult<()> {
        let fits = n
            .checked_mul(8)
            .is_some_and(|bytes| bytes <= src.bytes && bytes <= dst.bytes);
        if !fits || bound >= 1 << 32 || a >= 1 << 32 || b >= 1 << 32 {
            return Err(BackendError::Device(format!(
                "relabel of {n} ids below {bound} from {} into {} bytes",
                src.bytes, dst.bytes
            )));
        }
        if n == 0 {
            return Ok(());
        }
        let [src_at, dst_at] = [src, dst].map(|b| self.address(b));
        if src_at == 0 || dst_at == 0 {
            return Err(BackendError::Device("relabel of a freed buffer".into()));
        }
        let module = self.load_module(&ModuleSource::Builtin)?;
        let launch = Launch {
            kernel: "relabel_rows".into(),
            grid: [(self.info().multiprocessors * 8).max(1), 1, 1],
            block: [256, 1, 1],
            shared_bytes: 0,
            args: vec![src_at, dst_at, n as u64, bound, a, b],
        };
        self.launch(module, &launch)
    }
    /// Compares the first `n` elements of float buffer `got` (f32, f16 or bf16) with those of
    /// `want` (f64, or `got`'s dtype) on the device, and returns what the scale-invariant check
    /// needs ([`FloatAcc`]: norms, the worst element, non-finite and poisoned elements), copying
    /// back a few words per block only. Run by the built-in kernel `compare_floats` on both
    /// backends.
    ///
    /// With `base` (of `got`'s dtype, `n` elements or more), both are compared as updates of
    /// it: `got − base` against `want − base`.
    fn compare_floats(
        &mut self,
        got: (&Buffer, DType),
        want: (&Buffer, DType),
        n: usize,
        base: Option<&Buffer>,
    ) -> BackendResult<FloatAcc> {
        let code = |dtype: DType| match dtype {
            DType::F64 => Some(compare::DTYPE_F64),
            DType::F32 => Some(compare::DTYPE_F32),
            DType::F16 => Some(compare::DTYPE_F16),
            DType::BF16 => Some(compare::DTYPE_BF16),
            _ => None,
        };
        let fits = |(b, dtype): (&Buffer, DType)| {
            n.checked_mul(dtype.size_bytes())
                .is_some_and(|bytes| bytes <= b.bytes)
        };
        let (Some(got_code), Some(want_code)) = (code(got.1), code(want.1)) else {
            return Err(BackendError::Device(format!(
                "float comparison of {} with {}",
                got.1.name(),
                want.1.name()
            )));
        };
        let base_fits = base.is_none_or(|b| fits((b, got.1)));
        if got.1 == DType::F64 || !fits(got) || !fits(want) || !base_fits {
            return Err(BackendError::Device(format!(
                "float comparison of {n} elements: {} bytes of {} against {} bytes of {}",
                got.0.bytes,
                got.1.name(),
                want.0.bytes,
                want.1.name()
            )));
        }
        if n == 0 {
            return Ok(FloatAcc::EMPTY);
        }
        let [got_at, want_at] = [got.0, want.0].map(|b| self.address(b));
        let base_at = base.map_or(0, |b| self.address(b));
        if got_at == 0 || want_at == 0 || (base.is_some() && base_at == 0) {
            return Err(BackendError::Device(
                "float comparison of a freed buffer".into(),
            ));
        }
        let mut poison = [0u8; 8];
        let pattern = poison_pattern(got.1);
        poison[..pattern.len()].copy_from_slice(&pattern);
        // Enough blocks to fill the device, each with a few thousand elements or more.
        let per_block = compare::COMPARE_BLOCK as usize * 64;
        let most = (self.info().multiprocessors as usize * 4).max(1);
        let blocks = n.div_ceil(per_block).clamp(1, most);
        let partials = self.alloc(blocks * compare::ACC_WORDS * 8)?;
        let module = self.load_module(&ModuleSource::Builtin);
        let launch = Launch {
            kernel: "compare_floats".into(),
            grid: [blocks as u32, 1, 1],
            block: [compare::COMPARE_BLOCK, 1, 1],
            shared_bytes: 0,
            args: vec![
                got_at,
                got_code as u64,
                want_at,
                want_code as u64,
                n as u64,
                u64::from_le_bytes(poison),
                self.address(&partials),
                base_at,
            ],
        };
        let words = module
            .and_then(|m| self.launch(m, &launch))
            .and_then(|()| self.download(&partials));
        self.free(partials);
        let mut acc = FloatAcc::EMPTY;
        for slot in words?.chunks_exact(8 * compare::ACC_WORDS) {
            let slot: Vec<u64> = slot
                .chunks_exact(8)
                .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")))
                .collect();
            acc.merge(&FloatAcc::from_words(
                slot[..].try_into().expect("a slot's words"),
            ));
        }
        Ok(acc)
    }
    /// Device address of the buffer's first byte.
    fn address(&self, buffer: &Buffer) -> u64;
    fn load_module(&mut self, source: &ModuleSource) -> BackendResult<ModuleId>;
    /// Byte size of each parameter of `kernel`; an error if the module has no such kernel.
    fn kernel_params(&mut self, module: ModuleId, kernel: &str) -> BackendResult<Vec<usize>>;
    /// What a compiled module fixes for every launch of `kernel` beyond its plan (a Triton
    /// kernel: its block size, dynamic shared memory and trailing scratch parameters, which
    /// [`Backend::kernel_params`] leaves out); `None` for other modules.
    fn compiled_launch(&self, _module: ModuleId, _kernel: &str) -> Option<CompiledLaunch> {
        None
    }
    fn launch(&mut self, module: ModuleId, launch: &Launch) -> BackendResult<()>;
    /// Puts the writable globals of `module` (every `.global` variable a candidate's code
    /// declares) back to their contents at load, and names those that had changed: state the
    /// module's kernels left for a later execution. Called after every execution of a
    /// candidate, so each one starts from the module as loaded. Modules without tracked
    /// globals (the project's own kernels, anything on the emulator) name none.
    fn restore_module_globals(&mut self, _module: ModuleId) -> BackendResult<Vec<String>> {
        Ok(Vec::new())
    }
    /// Waits for all queued work; reports any asynchronous fault.
    fn synchronize(&mut self) -> BackendResult<()>;
    /// Evicts the L2 (writes a buffer twice its size) and resets persisting lines.
    /// Overwrites the device memory a kernel's threads and blocks could find again at their
    /// next launch (local frames, shared memory): run before every execution of a candidate,
    /// outside the timed window. Nothing to do where none outlives a launch (the emulator).
    fn clear_thread_state(&mut self) -> BackendResult<()> {
        Ok(())
    }

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
pub(crate) fn host_fingerprint(bytes: &[u8]) -> u64 {
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
        .map(|(c, chunk)| span_fingerprint((c * CHUNK_WORDS) as u64, chunk))
        .reduce(|| 0, u64::wrapping_add)
}

/// What rows of a buffer add to its fingerprint, on the host: `gathered` holds row `rows[u]`
/// of `width_words` words at row `u` (what [`Backend::gather_rows`] leaves), and each word
/// counts at its position in the whole buffer. The fingerprint is a sum, so the whole buffer's
/// minus this is the fingerprint of the other rows. Rows past the end of `gathered` (or ids
/// past the end of `rows`) add nothing.
pub(crate) fn host_rows_fingerprint(rows: &[i64], width_words: usize, gathered: &[u8]) -> u64 {
    use rayon::prelude::*;
    let row_bytes = 4 * width_words.max(1);
    gathered
        .par_chunks_exact(row_bytes)
        .zip(rows)
        .map(|(row, &r)| span_fingerprint((r as u64).wrapping_mul(width_words as u64), row))
        .reduce(|| 0, u64::wrapping_add)
}

/// Σ `word_hash(key, first + j, word j)` over the whole words of `bytes`, serially.
fn span_fingerprint(first: u64, bytes: &[u8]) -> u64 {
    use gpu_kernels::kernels::fingerprint::word_hash;
    let key = fingerprint_key();
    bytes.chunks_exact(4).enumerate().fold(0u64, |acc, (j, w)| {
        let w = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        acc.wrapping_add(word_hash(key, first + j as u64, w))
    })
}

/// The key of every fingerprint this process computes, on the host and on the device: drawn at
/// random once per process and passed only to the fingerprint kernel, so a candidate's kernel
/// cannot compute what a word adds to a fingerprint, nor forge a change that keeps one.
/// Fingerprints are compared only within one process.
pub(crate) fn fingerprint_key() -> u64 {
    static KEY: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *KEY.get_or_init(rand::random::<u64>)
}

/// [`select`] with CUDA device `ordinal` (the emulator has any ordinal: `run --cpu --devices`
/// emulates several devices, each worker its own).
pub(crate) fn select_device(
    force_cpu: bool,
    require_gpu: bool,
    ordinal: usize,
) -> anyhow::Result<(Box<dyn Backend>, String)> {
    if !force_cpu {
        match cuda::CudaBackend::new(ordinal) {
            Ok(b) => {
                let why = format!("CUDA device {ordinal}: {}", b.info().name);
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
/// the CPU emulator, or CUDA device `ordinal` with no fallback, so that a worker of a GPU run
/// never quietly measures on the emulator.
pub fn open(emulator: bool, ordinal: usize) -> anyhow::Result<Box<dyn Backend>> {
    select_device(emulator, !emulator, ordinal).map(|(backend, _)| backend)
}

/// How many CUDA devices the driver sees (0 when it cannot be loaded).
pub(crate) fn cuda_device_count() -> usize {
    cuda::device_count()
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
    fn the_emulator_fills_a_buffer_with_the_pattern_from_its_first_byte() {
        let mut be = emu::EmuBackend::new();
        let pattern = [1u8, 2, 3];
        for bytes in [1usize, 3, 10, 4097] {
            let b = be.alloc(bytes).unwrap();
            be.fill(&b, &pattern).unwrap();
            let want: Vec<u8> = pattern.iter().copied().cycle().take(bytes).collect();
            assert_eq!(be.download(&b).unwrap(), want, "{bytes} bytes");
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
            args: vec![
                be.address(&data),
                words.len() as u64,
                be.address(&out),
                fingerprint_key(),
            ],
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
    fn gathered_rows_are_the_listed_rows_and_their_fingerprint_is_what_they_add() {
        let width = 5;
        let words: Vec<u32> = (0..40 * width as u32)
            .map(|i| i.wrapping_mul(40503))
            .collect();
        let bytes: Vec<u8> = bytemuck::cast_slice(&words).to_vec();
        let rows: Vec<i64> = vec![0, 7, 8, 21, 39];
        let mut be = emu::EmuBackend::new();
        let src = be.alloc(bytes.len()).unwrap();
        be.upload(&src, &bytes).unwrap();
        let ids = be.alloc(rows.len() * 8).unwrap();
        be.upload(&ids, bytemuck::cast_slice(&rows)).unwrap();
        let dst = be.alloc(rows.len() * width * 4).unwrap();
        be.gather_rows(&src, &ids, rows.len(), width, &dst).unwrap();
        let gathered = be.download(&dst).unwrap();
        let row = |r: i64| &bytes[r as usize * width * 4..(r as usize + 1) * width * 4];
        let want: Vec<u8> = rows.iter().flat_map(|&r| row(r).to_vec()).collect();
        assert_eq!(gathered, want);

        // The whole minus the listed rows' part is the fingerprint of the other rows alone.
        let contribution = host_rows_fingerprint(&rows, width, &gathered);
        let mut others = bytes.clone();
        for &r in &rows {
            others[r as usize * width * 4..(r as usize + 1) * width * 4].fill(0);
        }
        let zeros = host_rows_fingerprint(&rows, width, &vec![0; gathered.len()]);
        assert_eq!(
            host_fingerprint(&bytes).wrapping_sub(contribution),
            host_fingerprint(&others).wrapping_sub(zeros)
        );

        // Sizes that do not fit are refused, not launched.
        assert!(be
            .gather_rows(&src, &ids, rows.len() + 1, width, &dst)
            .is_err());
        assert!(be
            .gather_rows(&src, &ids, rows.len(), width + 1, &dst)
            .is_err());
        assert!(be.gather_rows(&src, &ids, rows.len(), 0, &dst).is_err());
        be.gather_rows(&src, &ids, 0, width, &dst).unwrap();
    }

    #[test]
    fn a_worker_opens_what_the_probe_chose_and_never_falls_back() {
        assert!(!open(true, 0).unwrap().is_gpu());
        match open(false, 0) {
            Ok(backend) => assert!(backend.is_gpu()),
            Err(e) => assert!(e.to_string().starts_with("no usable CUDA device"), "{e}"),
        }
    }
}
