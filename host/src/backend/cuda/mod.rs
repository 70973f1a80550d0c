//! The CUDA backend, on `cudarc`'s thin `result` layer: libcuda and libnvrtc are loaded at run
//! time, so this compiles and the crate's tests run on machines without CUDA (then
//! [`CudaBackend::new`] returns an error and the runner falls back to the emulator).
//!
//! All work goes to one non-blocking stream; timing uses CUDA events on it; the L2 flush is a
//! memset of a buffer twice the L2 size plus `cuCtxResetPersistingL2Cache`.
use super::{
    binary, globals, jit, ptx_params, scrub, triton, Backend, BackendError, BackendResult, Buffer,
    CompiledLaunch, CudaFlags, DeviceInfo, Launch, ModuleId, ModuleSource,
};
use cudarc::driver::{result, sys, CudaContext};
use std::ffi::CString;
use std::sync::Arc;
mod module;
use module::{candidate_globals, driver_params, nul_terminated, track_globals, Module};
mod nvrtc;
pub use nvrtc::*;

fn device_err(what: &str, e: impl std::fmt::Display) -> BackendError {
    BackendError::Device(format!("{what}: {e}"))
}

fn check(r: sys::CUresult, what: &str) -> BackendResult<()> {
    r.result().map_err(|e| device_err(what, e))
}

/// One CUDA device, its stream, and what has been allocated and loaded on it.
pub(crate) struct CudaBackend {
    _ctx: Arc<CudaContext>,
    info: DeviceInfo,
    stream: sys::CUstream,
    buffers: Vec<Option<sys::CUdeviceptr>>,
    modules: Vec<Module>,
    flush: Option<(sys::CUdeviceptr, usize)>,
    events: (sys::CUevent, sys::CUevent),
    /// (module, kernel) whose dynamic shared memory limit is already raised, and to what: the
    /// attribute is set once, not inside every timed launch.
    shared_opt_in: std::collections::HashMap<(usize, String), u32>,
    /// Thread and block state a candidate could keep between executions ([`scrub`]).
    scrub: Scrubber,
}

/// What [`scrub`] needs: the device's resident-thread capacity, the largest local frame of a
/// candidate kernel launched so far (each kernel asked once), and the scrub kernels loaded.
#[derive(Default)]
struct Scrubber {
    threads_per_sm: u32,
    /// The context's per-thread stack limit when it opened.
    stack_bytes: usize,
    local_need: usize,
    asked: std::collections::HashSet<(usize, String)>,
    local: Option<(usize, sys::CUmodule, sys::CUfunction)>,
    shared: Option<(sys::CUmodule, sys::CUfunction)>,
}

impl CudaBackend {
    /// Opens device `ordinal`, or says why it cannot.
    pub fn new(ordinal: usize) -> Result<Self, String> {
        // SAFETY: only probes whether libcuda can be loaded.
        if !unsafe { sys::is_culib_present() } {
            return Err("libcuda is not installed".into());
        }
        let ctx = quietly(|| CudaContext::new(ordinal))
            .ok_or_else(|| "the CUDA driver library could not be loaded".to_string())?
            .map_err(|e| format!("no CUDA device {ordinal}: {e}"))?;
        ctx.bind_to_thread().map_err(|e| e.to_string())?;
        let dev = ctx.cu_device();
        let attr = |a| unsafe { result::device::get_attribute(dev, a) }.unwrap_or(0);
        use sys::CUdevice_attribute as A;
        let mut version = 0i32;
        unsafe { sys::cuDriverGetVersion(&mut version) };
        let info = DeviceInfo {
            kind: "cuda".into(),
            name: ctx.name().unwrap_or_else(|_| "unknown".into()),
            driver: Some(format!("CUDA {}.{}", version / 1000, version % 1000 / 10)),
            compute_capability: ctx.compute_capability().ok(),
            multiprocessors: attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT) as u32,
            l2_bytes: attr(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE) as usize,
            memory_bytes: ctx.total_mem().unwrap_or(0),
            max_threads_per_block: attr(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK) as u32,
            max_shared_bytes_per_block: attr(
                A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            ) as usize,
        };
        // No device-side malloc: its heap outlives every launch, a place for state that no
        // check could see (memory a plan needs is `[[scratch]]`). A driver that refuses a
        // heap of 0 bytes is not used.
        let heap = unsafe { sys::cuCtxSetLimit(sys::CUlimit::CU_LIMIT_MALLOC_HEAP_SIZE, 0) };
        if heap != sys::CUresult::CUDA_SUCCESS {
            return Err(format!(
                "the device malloc heap could not be set to 0 bytes ({heap:?}): candidates could keep state there between runs"
            ));
        }
        let stream = result::stream::create(result::stream::StreamKind::NonBlocking)
            .map_err(|e| e.to_string())?;
        let ev = || {
            result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT).map_err(|e| e.to_string())
        };
        let events = (ev()?, ev()?);
        Ok(CudaBackend {
            _ctx: ctx,
            info,
            stream,
            buffers: Vec::new(),
            modules: Vec::new(),
            flush: None,
            events,
            shared_opt_in: std::collections::HashMap::new(),
            scrub: Scrubber {
                threads_per_sm: attr(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR) as u32,
                stack_bytes: stack_limit(),
                ..Scrubber::default()
            },
        })
    }

    /// Takes the local frame of a candidate's plan kernel into what the scrub covers, when its
    /// plan is bound (before any of its launches); refuses a frame past
    /// [`scrub::MAX_LOCAL_BYTES`], whose contents could not be cleared between runs at a
    /// reasonable cost.
    fn note_local_frame(&mut self, module: ModuleId, kernel: &str) -> BackendResult<()> {
        let m = &self.modules[module.0];
        if m.builtin || !self.scrub.asked.insert((module.0, kernel.to_string())) {
            return Ok(());
        }
        let name = CString::new(m.symbol(kernel))
            .map_err(|_| BackendError::BadLaunch("kernel name holds NUL".into()))?;
        let Ok(f) = (unsafe { result::module::get_function(m.handle, name) }) else {
            return Ok(()); // the parameter lookup says the kernel is missing
        };
        let mut local = 0i32;
        let attr = sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES;
        unsafe {
            check(
                sys::cuFuncGetAttribute(&mut local, attr, f),
                "local frame size",
            )?
        };
        let local = local.max(0) as usize;
        if local > scrub::MAX_LOCAL_BYTES {
            return Err(BackendError::BadLaunch(format!(
                "kernel `{kernel}` needs {local} bytes of local memory per thread, more than the {} KiB the harness clears between runs (state could hide there); keep large per-thread arrays in [[scratch]]",
                scrub::MAX_LOCAL_BYTES >> 10
            )));
        }
        self.scrub.local_need = self.scrub.local_need.max(local);
        Ok(())
    }

    /// Loads one of [`scrub`]'s PTX modules and finds its kernel.
    fn load_scrubber(ptx: &str, kernel: &str) -> BackendResult<(sys::CUmodule, sys::CUfunction)> {
        let image = nul_terminated(ptx)?;
        let handle = unsafe { result::module::load_data(image.as_ptr() as *const _) }
            .map_err(|e| device_err("loading the thread-state scrub", e))?;
        let name = CString::new(kernel).expect("no NUL");
        let f = unsafe { result::module::get_function(handle, name) }
            .map_err(|e| device_err("the thread-state scrub", e))?;
        Ok((handle, f))
    }

    /// Overwrites every thread slot's local memory (the largest candidate frame so far plus the
    /// stack limit) and every SM's shared memory ([`scrub`]).
    fn scrub_thread_state(&mut self) -> BackendResult<()> {
        // The stack limit as the context opened: the driver raises it for a launch that needs
        // more (the scrub's own among them), so reading it now would grow the frame each time.
        let frame = scrub::frame_bytes(self.scrub.local_need + self.scrub.stack_bytes);
        if self.scrub.local.is_none_or(|(f, _, _)| f < frame) {
            let (handle, f) = Self::load_scrubber(&scrub::local_ptx(frame), scrub::LOCAL_KERNEL)?;
            if let Some((_, old, _)) = self.scrub.local.replace((frame, handle, f)) {
                let _ = unsafe { result::module::unload(old) };
            }
        }
        let sms = self.info.multiprocessors.max(1);
        let per_sm = (self.scrub.threads_per_sm / scrub::LOCAL_BLOCK).max(1);
        let (_, _, f) = self.scrub.local.expect("loaded above");
        let (mut pattern, mut pick, mut sink) = (scrub::PATTERN, 0u32, 0u64);
        let mut params: Vec<*mut std::ffi::c_void> = vec![
            &mut pattern as *mut u32 as *mut _,
            &mut pick as *mut u32 as *mut _,
            &mut sink as *mut u64 as *mut _,
        ];
        let grid = (2 * sms * per_sm, 1, 1);
        unsafe {
            result::launch_kernel(
                f,
                grid,
                (scrub::LOCAL_BLOCK, 1, 1),
                0,
                self.stream,
                &mut params,
            )
        }
        .map_err(|e| device_err("local memory scrub", e))?;
        self.scrub_shared(sms)
    }

    /// The shared-memory half of [`Self::scrub_thread_state`]: two blocks per SM, each taking
    /// all the dynamic shared memory a block may have.
    fn scrub_shared(&mut self, sms: u32) -> BackendResult<()> {
        let bytes = self.info.max_shared_bytes_per_block;
        if self.scrub.shared.is_none() {
            let (handle, f) = Self::load_scrubber(scrub::SHARED_PTX, scrub::SHARED_KERNEL)?;
            let attr = sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
            unsafe {
                check(
                    sys::cuFuncSetAttribute(f, attr, bytes as i32),
                    "shared memory scrub size",
                )?
            };
            self.scrub.shared = Some((handle, f));
        }
        let (_, f) = self.scrub.shared.expect("loaded above");
        let (mut pattern, mut words) = (scrub::PATTERN, (bytes / 4) as u32);
        let mut params: Vec<*mut std::ffi::c_void> = vec![
            &mut pattern as *mut u32 as *mut _,
            &mut words as *mut u32 as *mut _,
        ];
        let block = (scrub::SHARED_BLOCK, 1, 1);
        unsafe {
            result::launch_kernel(
                f,
                (2 * sms, 1, 1),
                block,
                bytes as u32,
                self.stream,
                &mut params,
            )
        }
        .map_err(|e| device_err("shared memory scrub", e))
    }

    fn ptr(&self, b: &Buffer) -> BackendResult<sys::CUdeviceptr> {
        self.buffers
            .get(b.id)
            .copied()
            .flatten()
            .map(|p| p + b.offset as sys::CUdeviceptr)
            .ok_or_else(|| BackendError::Device(format!("buffer {} was freed", b.id)))
    }

    fn compile_cuda(
        &self,
        file: &std::path::Path,
        code: &str,
        flags: &CudaFlags,
    ) -> BackendResult<String> {
        let default = crate::toolchain::nvrtc_flags::device_arch(self.info.compute_capability);
        if let (Some(arch), Some(cc)) = (&flags.arch, self.info.compute_capability) {
            crate::toolchain::nvrtc_flags::runs_on(arch, cc)
                .map_err(|e| BackendError::Compile(format!("{}: {e}", file.display())))?;
        }
        compile_cuda(file, code, flags, default)
    }

    /// Compiles a Triton candidate for this device with `tools/triton_compile.py` (its own
    /// process, with a time limit) and checks what came back against the manifest and the
    /// device. A missing Triton makes the candidate `skipped`.
    fn compile_triton(
        &self,
        file: &std::path::Path,
        spec: &triton::TritonSpec,
    ) -> BackendResult<triton::Compiled> {
        let (major, minor) = self.info.compute_capability.unwrap_or((9, 0));
        let arch = (major * 10 + minor) as u32;
        let weak = super::triton_tool::WeakSandbox::Refuse;
        let c = super::triton_tool::compile(file, spec, arch, weak).map_err(|f| match f {
            triton::CompileFailure::NoTriton(m) | triton::CompileFailure::Refused(m) => {
                BackendError::Unsupported(format!("{}: {m}", file.display()))
            }
            triton::CompileFailure::Failed(m) => {
                BackendError::Compile(format!("{}: {m}", file.display()))
            }
        })?;
        triton::check_against(spec, &c)
            .map_err(|e| BackendError::Compile(format!("{}: {e}", file.display())))?;
        if c.shared as usize > self.info.max_shared_bytes_per_block {
            return Err(BackendError::Compile(format!(
                "{}: Triton's kernel needs {} bytes of shared memory, the device allows {} (fewer num_stages or smaller blocks)",
                file.display(),
                c.shared,
                self.info.max_shared_bytes_per_block
            )));
        }
        Ok(c)
    }
}

/// The current context's per-thread stack limit (1 KiB when the driver will not say).
fn stack_limit() -> usize {
    let mut stack = 0usize;
    let r = unsafe { sys::cuCtxGetLimit(&mut stack, sys::CUlimit::CU_LIMIT_STACK_SIZE) };
    if r == sys::CUresult::CUDA_SUCCESS && stack > 0 {
        stack
    } else {
        1024
    }
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        unsafe {
            let _ = result::stream::synchronize(self.stream);
            for p in self.buffers.iter().flatten() {
                let _ = result::free_sync(*p);
            }
            if let Some((p, _)) = self.flush {
                let _ = result::free_sync(p);
            }
            for m in &self.modules {
                let _ = result::module::unload(m.handle);
            }
            let _ = result::event::destroy(self.events.0);
            let _ = result::event::destroy(self.events.1);
            let _ = result::stream::destroy(self.stream);
        }
    }
}

impl Backend for CudaBackend {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn alloc(&mut self, bytes: usize) -> BackendResult<Buffer> {
        let p = unsafe { result::malloc_sync(bytes.max(1)) }
            .map_err(|e| device_err(&format!("cuMemAlloc({bytes})"), e))?;
        self.buffers.push(Some(p));
        Ok(Buffer {
            id: self.buffers.len() - 1,
            offset: 0,
            bytes,
        })
    }

    fn free_memory(&self) -> usize {
        result::mem_get_info().map(|(free, _)| free).unwrap_or(0)
    }

    fn free(&mut self, buffer: Buffer) {
        if let Some(Some(p)) = self.buffers.get(buffer.id).copied() {
            let _ = self.synchronize();
            let _ = unsafe { result::free_sync(p) };
            self.buffers[buffer.id] = None;
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
        let p = self.ptr(buffer)?;
        // On the run's stream, then waited for: a synchronous cuMemcpyHtoD from pageable
        // memory may return before its DMA lands, and is not ordered with this non-blocking
        // stream, so a kernel queued next (a fingerprint, a compare) could read stale bytes.
        unsafe { result::memcpy_htod_async(p, data, self.stream) }
            .map_err(|e| device_err("upload", e))?;
        self.synchronize()
    }

    fn download(&mut self, buffer: &Buffer) -> BackendResult<Vec<u8>> {
        let p = self.ptr(buffer)?;
        self.synchronize()?;
        let mut out = vec![0u8; buffer.bytes];
        unsafe { result::memcpy_dtoh_sync(&mut out, p) }.map_err(|e| device_err("download", e))?;
        Ok(out)
    }

    fn download_range(
        &mut self,
        buffer: &Buffer,
        offset: usize,
        len: usize,
    ) -> BackendResult<Vec<u8>> {
        super::range_end(buffer, offset, len)?;
        let p = self.ptr(buffer)? + offset as u64;
        self.synchronize()?;
        let mut out = vec![0u8; len];
        if len > 0 {
            unsafe { result::memcpy_dtoh_sync(&mut out, p) }
                .map_err(|e| device_err("download", e))?;
        }
        Ok(out)
    }

    fn fill(&mut self, buffer: &Buffer, pattern: &[u8]) -> BackendResult<()> {
        let p = self.ptr(buffer)?;
        let s = self.stream;
        unsafe {
            match *super::shortest_period(pattern) {
                [b] => check(sys::cuMemsetD8Async(p, b, buffer.bytes, s), "memset"),
                [a, b] if buffer.bytes.is_multiple_of(2) => check(
                    sys::cuMemsetD16Async(p, u16::from_le_bytes([a, b]), buffer.bytes / 2, s),
                    "memset",
                ),
                [a, b, c, d] if buffer.bytes.is_multiple_of(4) => check(
                    sys::cuMemsetD32Async(p, u32::from_le_bytes([a, b, c, d]), buffer.bytes / 4, s),
                    "memset",
                ),
                _ => {
                    let host: Vec<u8> =
                        pattern.iter().copied().cycle().take(buffer.bytes).collect();
                    self.upload(buffer, &host)
                }
            }
        }
    }

    fn fingerprint_words(&mut self, buffer: &Buffer, words: usize) -> BackendResult<u64> {
        // At most the word count rounded up: allocations are 256-byte aligned, so the last
        // partial word stays inside the allocation.
        if words > buffer.bytes.div_ceil(4) {
            return Err(BackendError::Device(format!(
                "fingerprint of {words} words of a {}-byte buffer",
                buffer.bytes
            )));
        }
        let words = words as u64;
        let module = self.load_module(&ModuleSource::Builtin)?;
        let out = self.alloc(8)?;
        self.fill(&out, &[0])?;
        let launch = Launch {
            kernel: "fingerprint_words".into(),
            grid: [(self.info.multiprocessors * 8).max(1), 1, 1],
            block: [256, 1, 1],
            shared_bytes: 0,
            args: vec![
                self.ptr(buffer)?,
                words,
                self.ptr(&out)?,
                super::fingerprint_key(),
            ],
        };
        let r = self
            .launch(module, &launch)
            .and_then(|_| self.download(&out));
        self.free(out);
        let bytes = r?;
        Ok(u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")))
    }

    fn copy(&mut self, dst: &Buffer, src: &Buffer) -> BackendResult<()> {
        if dst.bytes != src.bytes {
            return Err(BackendError::Device(format!(
                "copy of {} bytes into {}",
                src.bytes, dst.bytes
            )));
        }
        let (d, s) = (self.ptr(dst)?, self.ptr(src)?);
        unsafe {
            check(
                sys::cuMemcpyDtoDAsync_v2(d, s, src.bytes, self.stream),
                "copy",
            )
        }
    }

    fn address(&self, buffer: &Buffer) -> u64 {
        self.ptr(buffer).unwrap_or(0)
    }

    fn load_module(&mut self, source: &ModuleSource) -> BackendResult<ModuleId> {
        let mut triton_kernel = None;
        let driver_first = matches!(source, ModuleSource::Binary { .. });
        let (ptx, mut binary) = match source {
            ModuleSource::Builtin => {
                // The built-in module is loaded once and shared.
                if let Some(i) = self.modules.iter().position(|m| m.builtin) {
                    return Ok(ModuleId(i));
                }
                (
                    Some(crate::toolchain::ptx::GPU_KERNELS_PTX.to_string()),
                    None,
                )
            }
            ModuleSource::Ptx { code, .. } => (Some(globals::make_visible(code)), None),
            ModuleSource::Cuda { file, code, flags } => {
                let ptx = self.compile_cuda(file, code, flags)?;
                (Some(globals::make_visible(&ptx)), None)
            }
            ModuleSource::Binary { file, image } => {
                let kind = binary::check_image(image)
                    .map_err(|e| BackendError::Compile(format!("{}: {e}", file.display())))?;
                let ptx = (kind == binary::Kind::Fatbin)
                    .then(|| binary::embedded_ptx(image))
                    .flatten();
                (ptx, Some(image.clone()))
            }
            ModuleSource::Triton { file, spec } => {
                let c = self.compile_triton(file, spec)?;
                let ptx = c.ptx.as_deref().map(globals::make_visible);
                // Triton's cubin is built from its PTX as it was; a module with globals loads
                // the PTX made visible instead, so each is found by name.
                let with_globals = ptx
                    .as_deref()
                    .is_some_and(|p| !globals::ptx_globals(p).is_empty());
                let cubin = c.cubin.clone().filter(|_| !with_globals || ptx.is_none());
                triton_kernel = Some((spec.function.clone(), c));
                (ptx, cubin)
            }
            ModuleSource::Unavailable { reason, .. } => {
                return Err(BackendError::Unsupported(reason.clone()))
            }
        };
        let global_names = match source {
            ModuleSource::Builtin => Vec::new(),
            _ => {
                // What runs is the cubin ptxas makes: its symbols are read as well as the PTX.
                if let (None, Some(text)) = (&binary, &ptx) {
                    binary = Some(
                        jit::ptx_to_cubin(&nul_terminated(text)?).map_err(BackendError::Compile)?,
                    );
                }
                candidate_globals(source, ptx.as_deref(), binary.as_deref())?
            }
        };
        let image = match binary {
            Some(image) => image,
            None => nul_terminated(ptx.as_deref().unwrap_or_default())?,
        };
        let handle =
            unsafe { result::module::load_data(image.as_ptr() as *const _) }.map_err(|e| {
                let what = match source {
                    ModuleSource::Binary { file, .. } => file.display().to_string(),
                    ModuleSource::Triton { .. } => "Triton's cubin".into(),
                    _ => "the PTX".into(),
                };
                BackendError::Compile(format!("the driver could not load {what}: {e}"))
            })?;
        let globals = match track_globals(handle, &global_names) {
            Ok(g) => g,
            Err(e) => {
                let _ = unsafe { result::module::unload(handle) };
                return Err(e);
            }
        };
        self.modules.push(Module {
            handle,
            builtin: matches!(source, ModuleSource::Builtin),
            ptx,
            driver_first,
            triton: triton_kernel,
            globals,
        });
        Ok(ModuleId(self.modules.len() - 1))
    }

    fn restore_module_globals(&mut self, module: ModuleId) -> BackendResult<Vec<String>> {
        if self
            .modules
            .get(module.0)
            .is_none_or(|m| m.globals.is_empty())
        {
            return Ok(Vec::new());
        }
        self.synchronize()?;
        let m = &self.modules[module.0];
        let mut changed = Vec::new();
        for g in &m.globals {
            let mut now = vec![0u8; g.at_load.len()];
            unsafe { result::memcpy_dtoh_sync(&mut now, g.ptr) }
                .map_err(|e| device_err(&format!("reading module global `{}`", g.name), e))?;
            if now != g.at_load {
                unsafe { result::memcpy_htod_sync(g.ptr, &g.at_load) }
                    .map_err(|e| device_err(&format!("restoring module global `{}`", g.name), e))?;
                changed.push(g.name.clone());
            }
        }
        Ok(changed)
    }

    fn kernel_params(&mut self, module: ModuleId, kernel: &str) -> BackendResult<Vec<usize>> {
        self.note_local_frame(module, kernel)?;
        let m = &self.modules[module.0];
        let symbol = m.symbol(kernel);
        let params = match m.ptx.as_deref() {
            Some(p) if m.driver_first => driver_params(m.handle, symbol)
                .or_else(|e| ptx_params::entry_params(p, symbol).ok_or(e))?,
            Some(p) => ptx_params::entry_params(p, symbol).ok_or_else(|| {
                BackendError::BadLaunch(ptx_params::no_such_kernel(
                    kernel,
                    &ptx_params::entry_names(p),
                ))
            })?,
            None => driver_params(m.handle, symbol)?,
        };
        let Some((_, c)) = m.triton.as_ref().filter(|(f, _)| f == kernel) else {
            return Ok(params);
        };
        // The trailing scratch pointers are the runner's to pass, not the plan's.
        let user = params.len().checked_sub(c.scratch.len());
        match user {
            Some(n) if n == c.params.len() && params[n..].iter().all(|&w| w == 8) => {
                Ok(params[..n].to_vec())
            }
            _ => Err(BackendError::BadLaunch(format!(
                "the compiled kernel `{}` has {} parameters; Triton's metadata declares {} launch parameters and {} trailing scratch pointers ({})",
                c.kernel,
                params.len(),
                c.params.len(),
                c.scratch.len(),
                c.scratch.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ")
            ))),
        }
    }

    fn compiled_launch(&self, module: ModuleId, kernel: &str) -> Option<CompiledLaunch> {
        let (function, c) = self.modules.get(module.0)?.triton.as_ref()?;
        (function == kernel).then(|| CompiledLaunch {
            block_threads: c.num_warps * 32,
            shared_bytes: c.shared,
            scratch: c.scratch.clone(),
        })
    }

    fn launch(&mut self, module: ModuleId, launch: &Launch) -> BackendResult<()> {
        let m = &self.modules[module.0];
        let name = CString::new(m.symbol(&launch.kernel))
            .map_err(|_| BackendError::BadLaunch("kernel name holds NUL".into()))?;
        let f = unsafe { result::module::get_function(m.handle, name) }
            .map_err(|e| BackendError::BadLaunch(format!("no kernel `{}`: {e}", launch.kernel)))?;
        // Static plus dynamic shared memory past 48 KB needs the opt-in attribute (a kernel
        // with 35 KB of static arrays fails a 36 KB dynamic launch without it).
        let key = (module.0, launch.kernel.clone());
        if launch.shared_bytes > 0 && self.shared_opt_in.get(&key) < Some(&launch.shared_bytes) {
            unsafe {
                check(
                    sys::cuFuncSetAttribute(
                        f,
                        sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        launch.shared_bytes as i32,
                    ),
                    &format!(
                        "allow {} bytes of dynamic shared memory for `{}`",
                        launch.shared_bytes, launch.kernel
                    ),
                )?
            };
            self.shared_opt_in.insert(key, launch.shared_bytes);
        }
        // One 8-byte slot per parameter; a 4-byte parameter reads the low half (little endian).
        let mut slots = launch.args.clone();
        let mut params: Vec<*mut std::ffi::c_void> =
            slots.iter_mut().map(|s| s as *mut u64 as *mut _).collect();
        let g = launch.grid;
        let b = launch.block;
        unsafe {
            result::launch_kernel(
                f,
                (g[0], g[1], g[2]),
                (b[0], b[1], b[2]),
                launch.shared_bytes,
                self.stream,
                &mut params,
            )
        }
        .map_err(|e| BackendError::Device(format!("launch of {}: {e}", launch.kernel)))
    }

    fn synchronize(&mut self) -> BackendResult<()> {
        unsafe { result::stream::synchronize(self.stream) }
            .map_err(|e| device_err("synchronize", e))
    }

    fn clear_thread_state(&mut self) -> BackendResult<()> {
        self.scrub_thread_state()
    }

    fn flush_l2(&mut self) -> BackendResult<()> {
        let bytes = (2 * self.info.l2_bytes).max(64 << 20);
        if self.flush.is_none() {
            let p =
                unsafe { result::malloc_sync(bytes) }.map_err(|e| device_err("flush buffer", e))?;
            self.flush = Some((p, bytes));
        }
        let (p, bytes) = self.flush.unwrap();
        unsafe {
            check(sys::cuCtxResetPersistingL2Cache(), "reset persisting L2")?;
            check(
                sys::cuMemsetD32Async(p, 0x5A5A_5A5A, bytes / 4, self.stream),
                "L2 flush",
            )
        }
    }

    fn timer_start(&mut self) -> BackendResult<()> {
        unsafe { result::event::record(self.events.0, self.stream) }
            .map_err(|e| device_err("event", e))
    }

    fn timer_stop(&mut self) -> BackendResult<f64> {
        unsafe {
            result::event::record(self.events.1, self.stream)
                .map_err(|e| device_err("event", e))?;
            result::event::synchronize(self.events.1).map_err(|e| device_err("kernel", e))?;
            result::event::elapsed(self.events.0, self.events.1)
                .map(|ms| ms as f64)
                .map_err(|e| device_err("event", e))
        }
    }

    fn copy_bandwidth(&mut self, bytes: usize) -> BackendResult<f64> {
        let src = self.alloc(bytes)?;
        let dst = self.alloc(bytes)?;
        let (s, d) = (self.ptr(&src)?, self.ptr(&dst)?);
        let mut best = f64::MAX;
        for _ in 0..6 {
            self.timer_start()?;
            unsafe { check(sys::cuMemcpyDtoDAsync_v2(d, s, bytes, self.stream), "copy")? };
            best = best.min(self.timer_stop()?);
        }
        self.free(src);
        self.free(dst);
        Ok(2.0 * bytes as f64 / (best * 1e-3))
    }

    fn is_gpu(&self) -> bool {
        true
    }
}
