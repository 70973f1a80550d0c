//! Emulator "device" memory with guard pages: each buffer is its own anonymous mapping, its
//! bytes end where an inaccessible page begins and another such page lies before them. A kernel
//! that runs off the end of a buffer (or far enough before its start) faults at once and takes
//! only its own worker down, instead of corrupting the heap or a neighbouring buffer and
//! changing the verdict of whatever runs next in that process.
use std::ptr::NonNull;

/// One zero-initialised, 16-byte-aligned buffer between two guard pages. The bytes past `len`
/// up to the next multiple of 16 (what vector accesses of the last element may touch) are
/// accessible; the guard page follows them.
pub(crate) struct GuardedBuffer {
    /// Start of the whole mapping (the first guard page).
    map: NonNull<u8>,
    map_len: usize,
    /// The buffer's first byte.
    data: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is owned by this value alone; access goes through `&self`/`&mut self`.
unsafe impl Send for GuardedBuffer {}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if page > 0 {
        page as usize
    } else {
        4096
    }
}

impl GuardedBuffer {
    /// A mapping for `len` bytes, or `None` when the system refuses it.
    pub fn new(len: usize) -> Option<Self> {
        let page = page_size();
        let data_len = len.max(1).checked_next_multiple_of(16)?;
        let data_pages = data_len.div_ceil(page);
        let map_len = data_pages.checked_add(2)?.checked_mul(page)?;
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return None;
        }
        let base = map as *mut u8;
        // SAFETY: both guard pages lie inside the mapping just made.
        let guarded = unsafe {
            libc::mprotect(base as *mut _, page, libc::PROT_NONE) == 0
                && libc::mprotect(
                    base.add(page * (data_pages + 1)) as *mut _,
                    page,
                    libc::PROT_NONE,
                ) == 0
        };
        let buffer = GuardedBuffer {
            map: NonNull::new(base)?,
            map_len,
            // SAFETY: inside the mapping, `data_len` bytes before the second guard page.
            data: NonNull::new(unsafe { base.add(page * (data_pages + 1) - data_len) })?,
            len,
        };
        guarded.then_some(buffer)
    }

    /// The buffer's bytes.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `len` bytes from `data`, owned by `self`; `&mut self` makes it exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.data.as_ptr(), self.len) }
    }

    /// The address kernels get.
    pub fn address(&self) -> u64 {
        self.data.as_ptr() as u64
    }
}

impl Drop for GuardedBuffer {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.map.as_ptr() as *mut _, self.map_len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_zeroed_aligned_and_end_at_their_guard_page() {
        for len in [0, 1, 15, 16, 4095, 4096, 10_000] {
            let mut b = GuardedBuffer::new(len).unwrap();
            assert_eq!(b.address() % 16, 0, "{len}");
            assert!(b.as_mut_slice().iter().all(|&x| x == 0));
            b.as_mut_slice().fill(7);
            assert!(b.as_mut_slice().iter().all(|&x| x == 7));
            // The guard page begins right after the 16-byte-rounded end.
            let end = b.address() as usize + len.max(1).next_multiple_of(16);
            assert_eq!(end % page_size(), 0, "{len}");
        }
    }

    #[test]
    fn a_write_past_the_end_faults_in_a_child_process() {
        // Fork-free: run this test binary again as a child that writes past a buffer's end.
        if std::env::var_os("GUARDED_CHILD").is_some() {
            let b = GuardedBuffer::new(100).unwrap();
            let p = b.address() as *mut u8;
            // SAFETY: deliberately not: the first byte of the guard page.
            unsafe { p.add(112).write_volatile(1) };
            std::process::exit(0); // not reached
        }
        let exe = std::env::current_exe().unwrap();
        let status = std::process::Command::new(exe)
            .args([
                "backend::guarded::tests::a_write_past_the_end_faults_in_a_child_process",
                "--exact",
                "--nocapture",
            ])
            .env("GUARDED_CHILD", "1")
            .output()
            .unwrap()
            .status;
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGSEGV), "{status:?}");
    }
}
