//! Helper processes under a wall-clock limit (`tools/triton_compile.py`,
//! `tools/kernelbench_eval.py`): each runs in its own process group, so that what it starts in
//! turn (ptxas, nvcc, ninja) dies with it when the limit kills the group.
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

/// How a limited process ended.
#[derive(Debug)]
pub enum Ending {
    Exited(ExitStatus),
    /// It ran past the limit; its process group was killed.
    Killed,
}

/// Spawns `cmd` in a process group of its own and waits for it, killing the whole group once
/// `limit_s` seconds have passed. An error: it could not be started or waited for.
pub fn run(cmd: &mut Command, limit_s: f64) -> std::io::Result<Ending> {
    use std::os::unix::process::CommandExt;
    let mut child = cmd.process_group(0).spawn()?;
    let started = Instant::now();
    loop {
        match child.try_wait()? {
            Some(status) => return Ok(Ending::Exited(status)),
            None if started.elapsed().as_secs_f64() > limit_s => {
                // SAFETY: kill(2) on the child's own process group, by its id.
                unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
                let _ = child.wait();
                return Ok(Ending::Killed);
            }
            None => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// The last `lines` lines of a log, for a message.
pub(crate) fn tail(log: &str, lines: usize) -> String {
    let all: Vec<&str> = log.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_past_its_limit_is_killed_with_what_it_started() {
        let dir = std::env::temp_dir().join(format!("dlrm-limited-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let marker = dir.join("grandchild-survived");
        // The shell starts a grandchild that would write the marker after 2 s.
        let script = format!("(sleep 2; touch {}) & sleep 30", marker.display());
        let started = Instant::now();
        let ending = run(Command::new("sh").args(["-c", &script]), 0.3).unwrap();
        assert!(matches!(ending, Ending::Killed), "{ending:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(2500));
        assert!(!marker.exists(), "the grandchild died with its group");
        match run(Command::new("sh").args(["-c", "exit 3"]), 10.0).unwrap() {
            Ending::Exited(s) => assert_eq!(s.code(), Some(3)),
            other => panic!("{other:?}"),
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        assert_eq!(tail("a\nb\nc\n", 2), "b\nc");
        assert_eq!(tail("a", 5), "a");
    }
}
