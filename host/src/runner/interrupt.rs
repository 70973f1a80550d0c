//! A run cut short by SIGINT, SIGTERM or SIGHUP: the records already appended are kept (each is
//! one whole line), the input cache in `/dev/shm` is removed unless `--keep-inputs` says
//! otherwise, and the message says how to go on (`run --resume DIR`); the exit status is
//! 128 + the signal's number, as a shell reports a process the signal killed.
//!
//! The handler only writes the signal's number to a pipe (all a handler may safely do); a thread
//! of its own reads it and does the rest.
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::OnceLock;

/// The pipe's write end, for the handler.
static PIPE_W: AtomicI32 = AtomicI32::new(-1);

/// What the thread needs once a signal came.
struct Interrupted {
    dir: PathBuf,
    cache: Option<PathBuf>,
}

static STATE: OnceLock<std::sync::Mutex<Option<Interrupted>>> = OnceLock::new();

extern "C" fn on_signal(sig: libc::c_int) {
    let fd = PIPE_W.load(Ordering::Relaxed);
    if fd >= 0 {
        let b = sig as u8;
        // SAFETY: write(2) is async-signal-safe; one byte from a valid buffer.
        unsafe {
            libc::write(fd, (&b as *const u8).cast(), 1);
        }
    }
}

/// From now on a SIGINT, SIGTERM or SIGHUP ends the run of `dir` as the module says, removing
/// `cache` (the input cache, when not kept). Later calls change the run and cache named.
pub(crate) fn watch(dir: PathBuf, cache: Option<PathBuf>) {
    let state = STATE.get_or_init(|| {
        install();
        std::sync::Mutex::new(None)
    });
    if let Ok(mut s) = state.lock() {
        *s = Some(Interrupted { dir, cache });
    }
}

/// The pipe, the reading thread and the handlers (once per process).
fn install() {
    let mut fds = [0; 2];
    // SAFETY: pipe(2) with a valid two-element array.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return;
    }
    let (r, w) = (fds[0], fds[1]);
    PIPE_W.store(w, Ordering::Relaxed);
    std::thread::spawn(move || {
        let mut b = 0u8;
        // SAFETY: read(2) of one byte into a valid buffer from the pipe made above.
        let n = unsafe { libc::read(r, (&mut b as *mut u8).cast(), 1) };
        if n == 1 {
            end(i32::from(b));
        }
    });
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction with a handler that only calls write(2).
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

/// The run's end after signal `sig`.
fn end(sig: i32) -> ! {
    let state = STATE
        .get()
        .and_then(|s| s.lock().ok().and_then(|mut s| s.take()));
    // A worker making the next unit's inputs would write into the cache while it is removed.
    super::ahead::stop_running();
    if let Some(Interrupted { dir, cache }) = state {
        if let Some(cache) = &cache {
            let _ = std::fs::remove_dir_all(cache);
        }
        eprintln!(
            "\ninterrupted (signal {sig}): the records made so far are kept in {}; go on with \
             `dlrm-bench run --resume {}`{}",
            dir.join("results.jsonl").display(),
            dir.display(),
            cache.map_or(String::new(), |c| format!(
                " (the input cache {} was removed: the resume makes it again)",
                c.display()
            ))
        );
    }
    std::process::exit(128 + sig)
}
