//! The CPU-emulator backend: buffers in host memory (each between guard pages, so a kernel
//! writing past one faults in its own worker: [`super::guarded`]), kernels from `gpu-kernels`
//! run by its emulator, wall-clock timing. It checks correctness anywhere; its timings are not
//! GPU timings.
use super::guarded::GuardedBuffer;
use super::{
    Backend, BackendError, BackendResult, Buffer, DeviceInfo, Launch, ModuleId, ModuleSource,
};
use gpu_kernels::emu::{self, LaunchConfig};
use std::time::Instant;

/// Host-memory "device".
pub struct EmuBackend {
    info: DeviceInfo,
    buffers: Vec<Option<GuardedBuffer>>,
    timer: Option<Instant>,
    downloads: usize,
    downloaded_bytes: usize,
}

impl Default for EmuBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl EmuBackend {
    pub fn new() -> Self {
        EmuBackend {
            info: DeviceInfo {
                kind: "cpu-emulator".into(),
                name: "gpu-kernels CPU emulator (timings are NOT GPU timings)".into(),
                driver: None,
                compute_capability: None,
                multiprocessors: 1,
                l2_bytes: 0,
                memory_bytes: 0,
                max_threads_per_block: emu::MAX_BLOCK_THREADS,
                max_shared_bytes_per_block: emu::MAX_SHARED_BYTES,
            },
            buffers: Vec::new(),
            timer: None,
            downloads: 0,
            downloaded_bytes: 0,
        }
    }

    #[cfg(test)]
    /// Buffers allocated and not freed (for tests of what the harness leaves behind).
    pub(crate) fn live_buffers(&self) -> usize {
        self.buffers.iter().filter(|b| b.is_some()).count()
    }

    #[cfg(test)]
    /// Downloads so far (whole or ranged), for tests of what a check copies back.
    pub(crate) fn downloads(&self) -> usize {
        self.downloads
    }

    #[cfg(test)]
    /// Bytes those downloads copied back.
    pub(crate) fn downloaded_bytes(&self) -> usize {
        self.downloaded_bytes
    }

    fn storage(&mut self, b: &Buffer) -> BackendResult<&mut [u8]> {
        let buffer = self
            .buffers
            .get_mut(b.id)
            .and_then(|s| s.as_mut())
            .ok_or_else(|| BackendError::Device(format!("buffer {} was freed", b.id)))?;
        Ok(&mut buffer.as_mut_slice()[b.offset..b.offset + b.bytes])
    }
}

impl Backend for EmuBackend {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn alloc(&mut self, bytes: usize) -> BackendResult<Buffer> {
        // 16-byte aligned like cudaMalloc's 256-byte alignment for vector loads, and between
        // guard pages, so a kernel that writes past a buffer faults in its own worker.
        let storage = GuardedBuffer::new(bytes).ok_or_else(|| {
            BackendError::Device(format!("the emulator could not map {bytes} bytes"))
        })?;
        self.buffers.push(Some(storage));
        Ok(Buffer {
            id: self.buffers.len() - 1,
            offset: 0,
            bytes,
        })
    }

    fn free_memory(&self) -> usize {
        // The emulator's "device" is host memory; cap scratch at 8 GiB so a runaway size
        // expression is refused rather than swapping the machine.
        8 << 30
    }

    fn free(&mut self, buffer: Buffer) {
        if let Some(slot) = self.buffers.get_mut(buffer.id) {
            *slot = None;
        }
    }

    fn upload(&mut self, buffer: &Buffer, data: &[u8]) -> BackendResult<()> {
        if data.len() != buffer.bytes {
            return Err(BackendError::Device(format!(
                "upload of {} bytes into {}",
                data.len(),
                buffer.bytes
            )));
        }
        self.storage(buffer)?.copy_from_slice(data);
        Ok(())
    }

    fn download(&mut self, buffer: &Buffer) -> BackendResult<Vec<u8>> {
        let data = self.storage(buffer)?.to_vec();
        self.downloads += 1;
        self.downloaded_bytes += data.len();
        Ok(data)
    }

    fn download_range(
        &mut self,
        buffer: &Buffer,
        offset: usize,
        len: usize,
    ) -> BackendResult<Vec<u8>> {
        let end = super::range_end(buffer, offset, len)?;
        let data = self.storage(buffer)?[offset..end].to_vec();
        self.downloads += 1;
        self.downloaded_bytes += data.len();
        Ok(data)
    }

    fn fill(&mut self, buffer: &Buffer, pattern: &[u8]) -> BackendResult<()> {
        let s = self.storage(buffer)?;
        // The pattern repeated from the buffer's first byte, the last copy cut short.
        for chunk in s.chunks_mut(pattern.len()) {
            chunk.copy_from_slice(&pattern[..chunk.len()]);
        }
        Ok(())
    }

    fn fingerprint_words(&mut self, buffer: &Buffer, words: usize) -> BackendResult<u64> {
        if words > buffer.bytes.div_ceil(4) {
            return Err(BackendError::Device(format!(
                "fingerprint of {words} words of a {}-byte buffer",
                buffer.bytes
            )));
        }
        let storage = self
            .buffers
            .get(buffer.id)
            .and_then(|s| s.as_ref())
            .ok_or_else(|| BackendError::Device("freed".into()))?;
        // The 16-byte-rounded storage holds the last partial word.
        let whole = (storage.address() + buffer.offset as u64) as *const u32;
        // SAFETY: `words` ≤ ⌈bytes / 4⌉ words of the buffer's 16-byte-rounded storage.
        let data: &[u32] = unsafe { std::slice::from_raw_parts(whole, words) };
        let key = super::fingerprint_key();
        Ok(data.iter().enumerate().fold(0u64, |a, (i, &w)| {
            a.wrapping_add(gpu_kernels::kernels::fingerprint::word_hash(
                key, i as u64, w,
            ))
        }))
    }

    fn copy(&mut self, dst: &Buffer, src: &Buffer) -> BackendResult<()> {
        // Not through `download`: a device-side copy is no download.
        let data = self.storage(src)?.to_vec();
        self.upload(dst, &data)
    }

    fn address(&self, buffer: &Buffer) -> u64 {
        self.buffers[buffer.id]
            .as_ref()
            .map(|v| v.address() + buffer.offset as u64)
            .unwrap_or(0)
    }

    fn load_module(&mut self, source: &ModuleSource) -> BackendResult<ModuleId> {
        match source.needs_gpu() {
            None => Ok(ModuleId(0)),
            Some(why) => Err(BackendError::Unsupported(why)),
        }
    }

    fn kernel_params(&mut self, _module: ModuleId, kernel: &str) -> BackendResult<Vec<usize>> {
        gpu_kernels::emu_kernel(kernel)
            .map(|k| k.param_sizes.to_vec())
            .ok_or_else(|| BackendError::BadLaunch(format!("no kernel `{kernel}` in gpu-kernels")))
    }

    fn launch(&mut self, _module: ModuleId, launch: &Launch) -> BackendResult<()> {
        let kernel = gpu_kernels::emu_kernel(&launch.kernel).ok_or_else(|| {
            BackendError::BadLaunch(format!("no kernel `{}` in gpu-kernels", launch.kernel))
        })?;
        let config = LaunchConfig {
            grid: launch.grid,
            block: launch.block,
            shared_bytes: launch.shared_bytes as usize,
        };
        // SAFETY: argument words are addresses of live buffers of this backend (bound by the
        // plan from the problem's shapes) and integers.
        unsafe { emu::launch_kernel(kernel, &config, &launch.args) }.map_err(|e| match e {
            emu::EmuError::KernelFault(m) => {
                BackendError::Device(format!("{}: {m}", launch.kernel))
            }
            other => BackendError::BadLaunch(other.to_string()),
        })
    }

    fn synchronize(&mut self) -> BackendResult<()> {
        Ok(())
    }

    fn flush_l2(&mut self) -> BackendResult<()> {
        Ok(())
    }

    fn timer_start(&mut self) -> BackendResult<()> {
        self.timer = Some(Instant::now());
        Ok(())
    }

    fn timer_stop(&mut self) -> BackendResult<f64> {
        let t = self
            .timer
            .take()
            .ok_or_else(|| BackendError::Device("timer not started".into()))?;
        Ok(t.elapsed().as_secs_f64() * 1e3)
    }

    fn copy_bandwidth(&mut self, bytes: usize) -> BackendResult<f64> {
        let src = vec![1u8; bytes];
        let mut dst = vec![0u8; bytes];
        let t = Instant::now();
        dst.copy_from_slice(&src);
        std::hint::black_box(&dst);
        Ok(2.0 * bytes as f64 / t.elapsed().as_secs_f64().max(1e-9))
    }

    fn is_gpu(&self) -> bool {
        false
    }
}
