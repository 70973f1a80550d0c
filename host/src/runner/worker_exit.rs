//! How a worker ended, in words, for the records of the candidate (or reference) it took down:
//! the exit status or the signal with what that signal usually means, what the worker was
//! running (problem, candidate, phase), and the tail of its stderr when it wrote any.
use std::process::ExitStatus;

/// The name and the usual meaning of signal `sig`.
pub(crate) fn signal_meaning(sig: i32) -> &'static str {
    match sig {
        4 => "SIGILL: illegal instruction",
        6 => "SIGABRT: aborted (an assertion or abort() in native code)",
        7 => "SIGBUS: bus error (a misaligned or unmapped memory access)",
        8 => "SIGFPE: arithmetic fault (an integer division by zero)",
        9 => "SIGKILL: killed (by the kernel's out-of-memory killer, or by someone)",
        11 => "SIGSEGV: segmentation fault (an invalid memory access)",
        15 => "SIGTERM: terminated (asked to stop)",
        _ => "an unexpected signal",
    }
}

/// `status` in words: `exit status 1`, `killed by signal 11 (SIGSEGV: …)`, or that it is not
/// known.
pub(crate) fn describe_exit(status: Option<ExitStatus>) -> String {
    let Some(status) = status else {
        return "its exit status is unknown".into();
    };
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            let core = if status.core_dumped() {
                ", core dumped"
            } else {
                ""
            };
            return format!("killed by signal {sig} ({}{core})", signal_meaning(sig));
        }
    }
    match status.code() {
        Some(code) => format!("exit status {code}"),
        None => status.to_string(),
    }
}

/// The message of a worker that died while running `what` (`candidate X of problem P`) in
/// `phase` (when known): how it ended and its last stderr lines.
pub(crate) fn death_message(
    what: &str,
    phase: Option<&str>,
    status: Option<ExitStatus>,
    tail: &str,
) -> String {
    let during = phase.map(|p| format!(", while {p}")).unwrap_or_default();
    let tail = if tail.trim().is_empty() {
        "(the worker wrote nothing to stderr)".to_string()
    } else {
        format!("its last stderr lines:\n{tail}")
    };
    format!(
        "the worker died running {what}{during}: {}; {tail}",
        describe_exit(status)
    )
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn a_signal_is_named_and_explained_with_what_was_running() {
        // Issue 13: this was recorded as "worker died (signal 11):" and nothing after.
        let m = death_message(
            "candidate c/crash of embedding_bag_sum",
            Some("checking"),
            Some(ExitStatus::from_raw(11)),
            "",
        );
        assert!(m.contains("candidate c/crash of embedding_bag_sum"), "{m}");
        assert!(m.contains("while checking"), "{m}");
        assert!(m.contains("signal 11 (SIGSEGV: segmentation fault"), "{m}");
        assert!(m.contains("wrote nothing to stderr"), "{m}");
        let m = describe_exit(Some(ExitStatus::from_raw(9)));
        assert!(m.contains("SIGKILL") && m.contains("out-of-memory"), "{m}");
        assert!(describe_exit(Some(ExitStatus::from_raw(6))).contains("SIGABRT"));
        assert!(describe_exit(Some(ExitStatus::from_raw(7))).contains("SIGBUS"));
        // Exit code 2 is raw status 2 << 8.
        assert_eq!(
            describe_exit(Some(ExitStatus::from_raw(2 << 8))),
            "exit status 2"
        );
        let m = death_message("the reference", None, None, "Error: boom");
        assert!(m.ends_with("its last stderr lines:\nError: boom"), "{m}");
    }
}
