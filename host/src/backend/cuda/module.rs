//! A loaded module: its driver handle, the kernels' mangled names, and the candidate globals tracked so that their initial bytes can be restored between runs.
use super::binary;
use super::device_err;
use super::globals;
use super::nvrtc::quietly;
use super::triton;
use super::BackendError;
use super::BackendResult;
use super::ModuleSource;
use cudarc::driver::result;
use cudarc::driver::sys;
use std::ffi::CString;

pub(crate) struct Module {
    pub(super) handle: sys::CUmodule,
    /// The project's own kernels (loaded once and shared).
    pub(super) builtin: bool,
    /// PTX text the parameter lists are read from, and whether the driver is asked first (a
    /// fatbin's embedded PTX is a fallback: the driver's list is of the code it runs); `None`:
    /// only the driver gives them.
    pub(super) ptx: Option<String>,
    pub(super) driver_first: bool,
    /// A Triton kernel: the manifest's function name and what its compilation fixed.
    pub(super) triton: Option<(String, triton::Compiled)>,
    /// A candidate's writable globals with their contents at load ([`globals`]).
    pub(super) globals: Vec<TrackedGlobal>,
}

/// One module global of a candidate: where it is and what it held when the module loaded.
pub(super) struct TrackedGlobal {
    pub(super) name: String,
    pub(super) ptr: sys::CUdeviceptr,
    pub(super) at_load: Vec<u8>,
}

impl Module {
    /// The name of `kernel` in the module (a Triton function's compiled kernel may be named
    /// otherwise than the function).
    pub(crate) fn symbol<'a>(&'a self, kernel: &'a str) -> &'a str {
        match &self.triton {
            Some((function, c)) if function == kernel => &c.kernel,
            _ => kernel,
        }
    }
}

/// The writable globals a candidate's module defines ([`globals`]): from its PTX, and from a
/// cubin's symbol table. A fatbin is refused: which of its entries the driver loads, and
/// whether they are compressed, cannot be told here, so its state could not be reset between
/// runs; a cubin whose global memory is not all named is refused too.
pub(crate) fn candidate_globals(
    source: &ModuleSource,
    ptx: Option<&str>,
    binary: Option<&[u8]>,
) -> BackendResult<Vec<String>> {
    let hidden = ptx.map(globals::body_globals).unwrap_or_default();
    if !hidden.is_empty() {
        return Err(BackendError::Refused(format!(
            "its PTX declares the global(s) `{}` inside a function body, where the driver cannot find them by name to reset them between runs: declare them at module scope (or use [[scratch]])",
            hidden.join("`, `")
        )));
    }
    let mut names: Vec<String> = ptx.map(globals::ptx_globals).unwrap_or_default();
    let Some(image) = binary else {
        return Ok(names);
    };
    let file = match source {
        ModuleSource::Binary { file, .. } | ModuleSource::Triton { file, .. } => {
            file.display().to_string()
        }
        _ => "the image".into(),
    };
    if binary::check_image(image) == Ok(binary::Kind::Fatbin) {
        return Err(BackendError::Refused(format!(
            "{file}: a fatbin is not taken: the driver picks one of its entries (which may be compressed or PTX), so the module globals of the code it runs could not be found and reset between runs; ship the .cubin for this GPU (nvcc -cubin -arch=sm_90)"
        )));
    }
    let found =
        globals::elf_globals(image).map_err(|e| BackendError::Refused(format!("{file}: {e}")))?;
    for n in found {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    Ok(names)
}

/// Finds every global of `names` in the loaded module and keeps its contents at load; refuses
/// one the driver cannot find, and more than [`globals::LIMIT_BYTES`] in all.
pub(crate) fn track_globals(
    handle: sys::CUmodule,
    names: &[String],
) -> BackendResult<Vec<TrackedGlobal>> {
    let mut tracked = Vec::new();
    let mut total = 0usize;
    for name in names {
        let cname = CString::new(name.as_str())
            .map_err(|_| BackendError::Refused(format!("module global `{name}` holds NUL")))?;
        let (ptr, bytes) = unsafe { result::module::get_global(handle, cname) }.map_err(|e| {
            BackendError::Refused(format!(
                "the module defines the global `{name}`, which the driver cannot find ({e}), so it could not be reset between runs: make it `.visible` or use [[scratch]]"
            ))
        })?;
        total = total.saturating_add(bytes);
        if total > globals::LIMIT_BYTES {
            return Err(BackendError::Refused(format!(
                "the module's globals take more than {} MiB (`{name}` brings them to {total} bytes): device memory a plan needs across its launches is declared as [[scratch]] in candidate.toml (poisoned before every run), not as module globals",
                globals::LIMIT_BYTES >> 20
            )));
        }
        let mut at_load = vec![0u8; bytes];
        unsafe { result::memcpy_dtoh_sync(&mut at_load, ptr) }
            .map_err(|e| device_err(&format!("reading module global `{name}`"), e))?;
        tracked.push(TrackedGlobal {
            name: name.clone(),
            ptr,
            at_load,
        });
    }
    Ok(tracked)
}

/// PTX text as the driver loads it: NUL-terminated, with no NUL inside.
pub(crate) fn nul_terminated(ptx: &str) -> BackendResult<Vec<u8>> {
    CString::new(ptx)
        .map(CString::into_bytes_with_nul)
        .map_err(|_| BackendError::Compile("PTX holds a NUL byte".into()))
}

/// The byte size of each parameter of `kernel`, from the driver (`cuFuncGetParamInfo`, CUDA
/// 12.4+): what a cubin's parameter list is known from.
pub(crate) fn driver_params(module: sys::CUmodule, kernel: &str) -> BackendResult<Vec<usize>> {
    let name = CString::new(kernel)
        .map_err(|_| BackendError::BadLaunch("kernel name holds NUL".into()))?;
    let f = unsafe { result::module::get_function(module, name) }.map_err(|e| {
        BackendError::BadLaunch(format!("the module has no kernel `{kernel}`: {e}"))
    })?;
    let query = std::panic::AssertUnwindSafe(|| {
        let mut sizes = Vec::new();
        for index in 0..4096 {
            let (mut offset, mut size) = (0usize, 0usize);
            let r = unsafe { sys::cuFuncGetParamInfo(f, index, &mut offset, &mut size) };
            match r {
                sys::CUresult::CUDA_SUCCESS => sizes.push(size),
                sys::CUresult::CUDA_ERROR_INVALID_VALUE => return Ok(sizes),
                other => return Err(format!("cuFuncGetParamInfo({kernel}, {index}): {other:?}")),
            }
        }
        Err(format!("`{kernel}`: more than 4096 parameters?"))
    });
    quietly(query)
        .ok_or_else(|| {
            BackendError::BadLaunch(format!(
                "the CUDA driver has no cuFuncGetParamInfo (12.4 or newer is needed to read the parameters of `{kernel}` from a cubin)"
            ))
        })?
        .map_err(BackendError::BadLaunch)
}
