//! Reading what a sandboxed process left (its result, its log): the process may have replaced
//! the file with a link to one of the caller's files, a FIFO that blocks, or gigabytes.
use std::path::Path;

/// A file a sandboxed process could have replaced, read as untrusted: only a regular file (not
/// a link to one of the caller's files, not a FIFO that would block), at most `max` bytes —
/// the last ones when `tail`, else an error when it is longer.
pub(crate) fn read_untrusted(path: &Path, max: u64, tail: bool) -> std::io::Result<String> {
    use std::io::{Read, Seek, SeekFrom};
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if meta.len() > max {
        if !tail {
            return Err(std::io::Error::other(format!(
                "{} bytes, more than the {max} read",
                meta.len()
            )));
        }
        f.seek(SeekFrom::Start(meta.len() - max))?;
    }
    let mut bytes = Vec::new();
    f.take(max).read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn what_a_sandboxed_process_leaves_is_read_only_when_a_bounded_regular_file() {
        let dir = std::env::temp_dir().join(format!("dlrm-untrusted-read-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (plain, link, fifo) = (dir.join("a"), dir.join("link"), dir.join("fifo"));
        std::fs::write(&plain, "0123456789").unwrap();
        std::os::unix::fs::symlink(&plain, &link).unwrap();
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert_eq!(read_untrusted(&plain, 100, false).unwrap(), "0123456789");
        assert_eq!(read_untrusted(&plain, 4, true).unwrap(), "6789");
        assert!(read_untrusted(&plain, 4, false).is_err());
        assert!(
            read_untrusted(&link, 100, false).is_err(),
            "a link is not followed"
        );
        let started = Instant::now();
        assert!(
            read_untrusted(&fifo, 100, false).is_err(),
            "a FIFO is refused"
        );
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "without blocking"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
