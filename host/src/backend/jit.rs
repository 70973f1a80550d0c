//! A candidate's PTX assembled into a cubin by the driver's own JIT (`cuLink*`), before the
//! module is loaded: the cubin is what runs, so the writable globals the backend resets
//! between runs are read from its symbol table ([`super::globals::elf_globals`]) as well as
//! from the PTX text. A global the PTX scan cannot see (one declared inside a function body,
//! or hidden by syntax the scan reads differently from ptxas) is still in the cubin, where it
//! is found and refused if the driver cannot name it.
use cudarc::driver::sys;
use std::ffi::c_void;

/// Bytes kept of the JIT's error log.
const LOG_BYTES: usize = 8192;

/// The cubin the driver's JIT makes of `ptx` (NUL-terminated) for the current context's GPU;
/// the error names the JIT's log on failure.
pub(crate) fn ptx_to_cubin(ptx: &[u8]) -> Result<Vec<u8>, String> {
    let mut log = vec![0u8; LOG_BYTES];
    let mut options = [
        sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
        sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
    ];
    let mut values = [log.as_mut_ptr() as *mut c_void, LOG_BYTES as *mut c_void];
    let mut state: sys::CUlinkState = std::ptr::null_mut();
    // SAFETY: the option arrays and the log outlive the link state, which is destroyed below.
    unsafe {
        sys::cuLinkCreate_v2(2, options.as_mut_ptr(), values.as_mut_ptr(), &mut state)
            .result()
            .map_err(|e| format!("the driver's JIT would not start: {e}"))?;
    }
    let result = link(state, ptx);
    // SAFETY: `state` came from cuLinkCreate and is destroyed once; the cubin was copied out.
    unsafe {
        let _ = sys::cuLinkDestroy(state);
    }
    result.map_err(|e| {
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        let text = String::from_utf8_lossy(&log[..end]);
        format!("the driver's JIT refused the PTX: {e}\n{}", text.trim())
    })
}

/// Adds `ptx` to the link and copies out the cubin it completes into.
fn link(state: sys::CUlinkState, ptx: &[u8]) -> Result<Vec<u8>, String> {
    let name = c"candidate.ptx";
    let (mut cubin, mut size): (*mut c_void, usize) = (std::ptr::null_mut(), 0);
    // SAFETY: `ptx` lives through the call; the cubin pointer is owned by the link state and
    // read (size bytes) before the caller destroys it.
    unsafe {
        sys::cuLinkAddData_v2(
            state,
            sys::CUjitInputType::CU_JIT_INPUT_PTX,
            ptx.as_ptr() as *mut c_void,
            ptx.len(),
            name.as_ptr(),
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
        .result()
        .map_err(|e| e.to_string())?;
        sys::cuLinkComplete(state, &mut cubin, &mut size)
            .result()
            .map_err(|e| e.to_string())?;
        if cubin.is_null() || size == 0 {
            return Err("the JIT returned no cubin".into());
        }
        Ok(std::slice::from_raw_parts(cubin as *const u8, size).to_vec())
    }
}
