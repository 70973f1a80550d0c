//! Untrusted helper processes (a KernelBench answer's Python, run by `tools/kernelbench_eval.py`)
//! in a sandbox: no network, writes only to the answer's own scratch directory, the rest of the
//! file system (the repository included) read-only, and resource limits on CPU time, memory,
//! processes and file size.
//!
//! The strongest isolation the machine allows is used ([`Isolation`]): bubblewrap (`bwrap`:
//! mount, network, PID and IPC namespaces, `/` bound read-only, the scratch directory writable);
//! else user and network namespaces (`unshare`: no network, but writes are not confined); else
//! the resource limits alone. The limits hold in every case; as root the process first takes a
//! uid of its own (from 2,000,000: Linux does not count root's processes against
//! `RLIMIT_NPROC`, and counts per user, so each sandboxed command gets its own).
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// How an untrusted process is isolated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Isolation {
    /// bwrap: no network, `/` read-only, only the scratch directory writable.
    Bubblewrap,
    /// unshare: no network; writes are not confined.
    Namespaces,
    /// Only the resource limits.
    LimitsOnly,
}

impl Isolation {
    /// In words, for records and warnings.
    pub fn describe(self) -> &'static str {
        match self {
            Isolation::Bubblewrap => {
                "bubblewrap (no network, writes only to its scratch directory)"
            }
            Isolation::Namespaces => {
                "user and network namespaces (no network; writes NOT confined)"
            }
            Isolation::LimitsOnly => "resource limits only (network and writes NOT confined)",
        }
    }
}

/// Resource limits of a sandboxed process (setrlimit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// CPU seconds (`RLIMIT_CPU`; SIGXCPU, then SIGKILL).
    pub cpu_s: u64,
    /// Bytes of data segment and private mappings (`RLIMIT_DATA`; an address-space limit would
    /// break CUDA, which reserves far more address space than it uses).
    pub memory_bytes: u64,
    /// Processes of its user (`RLIMIT_NPROC`).
    pub processes: u64,
    /// Largest file it may write (`RLIMIT_FSIZE`; SIGXFSZ).
    pub file_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            cpu_s: 1800,
            memory_bytes: 64 << 30,
            processes: 512,
            file_bytes: 8 << 30,
        }
    }
}

/// The uids (and gids) a root caller's sandboxed processes take: one of their own per
/// sandboxed command, from this base, so that `RLIMIT_NPROC` (counted per user) of one answer's
/// processes never starves another's.
pub const UID_BASE: u32 = 2_000_000;

/// A uid of its own for the next sandboxed command of this process.
fn next_uid() -> u32 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 64;
    UID_BASE + (std::process::id() % 100_000) * 64 + n
}

/// A sandbox: its isolation and limits.
#[derive(Clone, Debug)]
pub struct Sandbox {
    pub isolation: Isolation,
    pub limits: Limits,
    /// Paths its commands do not see under bubblewrap: directories covered by empty read-only
    /// ones, files by an empty file (a run's oracles, results and seed: [`Sandbox::hiding`]).
    pub hidden: Vec<PathBuf>,
    /// Paths seen again inside a hidden directory, read-only (a run's input cache inside a
    /// hidden `/dev/shm`); hidden paths inside them are covered in turn.
    pub exposed: Vec<PathBuf>,
}

impl Sandbox {
    /// The strongest isolation that works here: each is tried on `true` under the same
    /// wrapping a real command gets.
    pub fn detect(limits: Limits) -> Sandbox {
        let probe_dir =
            std::env::temp_dir().join(format!("dlrm-sandbox-probe-{}", std::process::id()));
        for isolation in [Isolation::Bubblewrap, Isolation::Namespaces] {
            let s = Sandbox {
                isolation,
                limits,
                hidden: Vec::new(),
                exposed: Vec::new(),
            };
            let ok = s
                .command(&probe_dir, "true", std::iter::empty::<&OsStr>())
                .and_then(|mut c| c.stdout(Stdio::null()).stderr(Stdio::null()).status())
                .is_ok_and(|st| st.success());
            if ok {
                let _ = std::fs::remove_dir_all(&probe_dir);
                return s;
            }
        }
        let _ = std::fs::remove_dir_all(&probe_dir);
        Sandbox {
            isolation: Isolation::LimitsOnly,
            limits,
            hidden: Vec::new(),
            exposed: Vec::new(),
        }
    }

    /// `program args` in the sandbox, with `scratch` (made here) its only writable directory,
    /// its working directory, `HOME` and `TMPDIR`.
    pub fn command<I, S>(&self, scratch: &Path, program: &str, args: I) -> std::io::Result<Command>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        // SAFETY: geteuid has no preconditions.
        let uid = (unsafe { libc::geteuid() } == 0).then(next_uid);
        let view = View {
            hidden: self.hidden.clone(),
            exposed: self.exposed.clone(),
            ..View::default()
        };
        self.command_as(scratch, program, args, uid, &view)
    }

    /// This sandbox hiding `paths` as well (those that exist when a command starts).
    pub fn hiding(&self, paths: impl IntoIterator<Item = PathBuf>) -> Sandbox {
        let mut s = self.clone();
        s.hidden.extend(paths);
        s
    }

    /// This sandbox showing `paths` again (read-only) inside what it hides.
    pub fn exposing(&self, paths: impl IntoIterator<Item = PathBuf>) -> Sandbox {
        let mut s = self.clone();
        s.exposed.extend(paths);
        s
    }

    /// [`Sandbox::command`] for a tool that runs untrusted Python as the caller (the Triton
    /// compile: it must import the caller's Python and Triton wherever they are installed, a
    /// private home included, which another uid cannot read). The caller's files are then
    /// readable, so under bubblewrap it sees less: `/dev/shm` is hidden as well as what the
    /// sandbox hides ([`Sandbox::hiding`]: the run's input cache and results, the secret seed);
    /// `/dev` is a fresh minimal one
    /// (no GPU, no disks); a root caller's capabilities are dropped. Limits are the same, but
    /// Linux exempts root from `RLIMIT_NPROC`: for a root caller only the wall-clock limit
    /// stops a process bomb.
    pub fn command_as_caller<I, S>(
        &self,
        scratch: &Path,
        program: &str,
        args: I,
    ) -> std::io::Result<Command>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut hide = vec![PathBuf::from("/dev/shm")];
        hide.extend_from_slice(&self.hidden);
        let view = View {
            exposed: self.exposed.clone(),
            strip_own_env: true,
            minimal_dev: true,
            // SAFETY: geteuid has no preconditions.
            drop_caps: unsafe { libc::geteuid() } == 0,
            hidden: hide,
        };
        self.command_as(scratch, program, args, None, &view)
    }

    fn command_as<I, S>(
        &self,
        scratch: &Path,
        program: &str,
        args: I,
        uid: Option<u32>,
        view: &View,
    ) -> std::io::Result<Command>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        std::fs::create_dir_all(scratch)?;
        let scratch = std::path::absolute(scratch)?;
        if let Some(uid) = uid {
            chown_tree(&scratch, uid)?;
        }
        let mut cmd = match self.isolation {
            Isolation::Bubblewrap => {
                let mut c = Command::new("bwrap");
                c.args(view.bwrap_args(&scratch, uid.is_some()))
                    .arg("--")
                    .arg(program);
                c
            }
            Isolation::Namespaces => {
                let mut c = Command::new("unshare");
                c.args(["--user", "--map-root-user", "--net", "--"])
                    .arg(program);
                c
            }
            Isolation::LimitsOnly => Command::new(program),
        };
        cmd.args(args)
            .current_dir(&scratch)
            .env("HOME", &scratch)
            .env("TMPDIR", &scratch);
        for (name, _) in std::env::vars_os() {
            let own = view.strip_own_env && name.to_string_lossy().starts_with("DLRM_BENCH_");
            if own || secret_name(&name.to_string_lossy()) {
                cmd.env_remove(&name);
            }
        }
        let limits = self.limits;
        // SAFETY: only async-signal-safe calls (setrlimit, setgroups, setgid, setuid) between
        // fork and exec.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(move || apply(limits, uid));
        }
        Ok(cmd)
    }
}

/// The strongest sandbox this machine allows, with the default limits, found once per process.
pub fn detected() -> &'static Sandbox {
    static SANDBOX: std::sync::OnceLock<Sandbox> = std::sync::OnceLock::new();
    SANDBOX.get_or_init(|| Sandbox::detect(Limits::default()))
}

/// A directory for sandboxed processes' files, `<temp>/dlrm-bench-sandbox-<euid>/<name>`, made
/// here with every directory from the temporary directory down traversable (mode 0711) by the
/// uids sandboxed commands take: a run directory under `/root` (mode 0700) is not.
pub fn shared_dir(name: &str) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    let base = std::env::temp_dir().join(format!("dlrm-bench-sandbox-{euid}"));
    let dir = base.join(name);
    std::fs::create_dir_all(&dir)?;
    for d in [&base, &dir] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o711))?;
    }
    Ok(dir)
}

/// Whether an environment variable's name says it holds a credential or a secret (API keys, the
/// shards' secret seed): such variables never reach a sandboxed process.
fn secret_name(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    ["KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH"]
        .iter()
        .any(|w| n.contains(w))
}

/// bwrap arguments hiding `/run` (and a real `/var/run`) behind empty read-only tmpfs mounts.
fn hide_run() -> Vec<&'static str> {
    let mut out = Vec::new();
    for dir in ["/run", "/var/run"] {
        let p = Path::new(dir);
        if p.is_dir() && !p.is_symlink() {
            out.extend(["--tmpfs", dir, "--remount-ro", dir]);
        }
    }
    out
}

/// What a command sees of the machine under bubblewrap: `/` read-only, `/proc` its own, the
/// scratch directory writable, `/run` hidden (daemons' sockets), no network, PID or IPC
/// namespace of the host's, and what the fields add.
#[derive(Default)]
struct View {
    /// Remove the suite's own variables (`DLRM_BENCH_*`: the run's paths among them) from the
    /// environment, beside the secrets every sandbox removes.
    strip_own_env: bool,
    /// A fresh `/dev` (null, zero, random, tty...) instead of the host's.
    minimal_dev: bool,
    /// Drop every capability (a root caller keeps them all in bwrap otherwise).
    drop_caps: bool,
    /// Directories covered by empty read-only ones, files by an empty file (`/dev/shm`
    /// otherwise stays visible, read-only).
    hidden: Vec<PathBuf>,
    /// Paths bound again, read-only, after the covers ([`Sandbox::exposed`]).
    exposed: Vec<PathBuf>,
}

impl View {
    /// `other_uid`: the command runs as another uid than the caller's (bwrap too, unprivileged).
    fn bwrap_args(&self, scratch: &Path, other_uid: bool) -> Vec<std::ffi::OsString> {
        let mut a: Vec<std::ffi::OsString> = Vec::new();
        let mut push = |items: &[&OsStr]| a.extend(items.iter().map(|s| s.to_os_string()));
        push(&["--ro-bind".as_ref(), "/".as_ref(), "/".as_ref()]);
        if self.minimal_dev {
            push(&["--dev".as_ref(), "/dev".as_ref()]);
        } else {
            push(&["--dev-bind".as_ref(), "/dev".as_ref(), "/dev".as_ref()]);
            // /dev/shm holds the run's input cache: read-only like the rest.
            for s in shm_read_only() {
                push(&[s.as_ref()]);
            }
        }
        push(&["--proc".as_ref(), "/proc".as_ref()]);
        // Daemons' Unix sockets (D-Bus, docker) live under /run: a read-only mount does not
        // stop connect(2), so it is hidden behind an empty read-only tmpfs.
        for s in hide_run() {
            push(&[s.as_ref()]);
        }
        let (dirs, files) = self.hidden_paths(other_uid);
        let exposed = existing(&self.exposed, other_uid);
        let inside_exposed = |d: &Path| exposed.iter().any(|e| d.starts_with(e) && d != e);
        // Covers first (those inside an exposed path after it is bound again), then the
        // scratch (which may lie under one), then the covers made read-only: bwrap makes mount
        // points in a cover while it is writable.
        for d in dirs.iter().filter(|d| !inside_exposed(d)) {
            push(&["--tmpfs".as_ref(), d.as_os_str()]);
        }
        for e in &exposed {
            push(&["--ro-bind".as_ref(), e.as_os_str(), e.as_os_str()]);
        }
        for d in dirs.iter().filter(|d| inside_exposed(d)) {
            push(&["--tmpfs".as_ref(), d.as_os_str()]);
        }
        for f in &files {
            push(&["--ro-bind".as_ref(), "/dev/null".as_ref(), f.as_os_str()]);
        }
        push(&["--bind".as_ref(), scratch.as_os_str(), scratch.as_os_str()]);
        for d in &dirs {
            push(&["--remount-ro".as_ref(), d.as_os_str()]);
        }
        if self.drop_caps {
            push(&["--cap-drop".as_ref(), "ALL".as_ref()]);
        }
        push(&[
            "--unshare-net".as_ref(),
            "--unshare-pid".as_ref(),
            "--unshare-ipc".as_ref(),
        ]);
        push(&[
            "--die-with-parent".as_ref(),
            "--new-session".as_ref(),
            "--chdir".as_ref(),
        ]);
        push(&[scratch.as_os_str()]);
        a
    }

    /// The hidden paths that exist, absolute: (directories, files). Symlinks are resolved,
    /// so the cover lands on what they name. For a command of `other_uid`, a path it cannot
    /// reach anyway (a directory above it not searchable by others, such as a private home) is
    /// left out: bwrap, running as that uid, could not make the cover's mount point there.
    /// Directories come parents first: a cover mounted after one inside it would hide the
    /// inner mount point, which bwrap then fails to remount read-only.
    fn hidden_paths(&self, other_uid: bool) -> (Vec<PathBuf>, Vec<PathBuf>) {
        let (mut dirs, files): (Vec<PathBuf>, Vec<PathBuf>) = existing(&self.hidden, other_uid)
            .into_iter()
            .partition(|p| p.is_dir());
        dirs.sort_by_key(|d| d.components().count());
        (dirs, files)
    }
}

/// The paths of `paths` that exist, resolved, and (for a command of `other_uid`) reachable by
/// other users ([`View::hidden_paths`]).
fn existing(paths: &[PathBuf], other_uid: bool) -> Vec<PathBuf> {
    paths
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .filter(|p| !other_uid || reachable_by_others(p))
        .collect()
}

/// Whether every directory above `path` is searchable by other users (mode o+x).
fn reachable_by_others(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.ancestors()
        .skip(1)
        .all(|d| std::fs::metadata(d).is_ok_and(|m| m.permissions().mode() & 0o001 != 0))
}

/// bwrap arguments keeping `/dev/shm` (bound writable with `/dev`) read-only, when it exists.
fn shm_read_only() -> Vec<&'static str> {
    if Path::new("/dev/shm").is_dir() {
        vec!["--ro-bind", "/dev/shm", "/dev/shm"]
    } else {
        Vec::new()
    }
}

/// In the child before exec: the limits, then (as root) the identity `uid`.
fn apply(l: Limits, uid: Option<u32>) -> std::io::Result<()> {
    let set = |resource, value: u64| {
        let r = libc::rlimit {
            rlim_cur: value,
            rlim_max: value,
        };
        // SAFETY: setrlimit with a valid pointer.
        if unsafe { libc::setrlimit(resource, &r) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    };
    set(libc::RLIMIT_CPU, l.cpu_s)?;
    set(libc::RLIMIT_DATA, l.memory_bytes)?;
    set(libc::RLIMIT_NPROC, l.processes)?;
    set(libc::RLIMIT_FSIZE, l.file_bytes)?;
    if let Some(uid) = uid {
        // SAFETY: plain syscalls; order matters (groups and gid before giving up root).
        unsafe {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(uid) != 0
                || libc::setuid(uid) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// Gives `dir` (what a sandboxed command left in its scratch, e.g. an answer's build kept for
/// later evaluations) back to the caller when the command ran as a uid of its own (the caller
/// is root): uids repeat every 64 commands, and a later command of the same uid must not be
/// able to rewrite it. Nothing to do for any other caller. Sound under bubblewrap, whose PID
/// namespace ends every process of the command with it; under the weaker isolations a process
/// the command left behind could still race the walk.
pub(crate) fn reclaim(dir: &Path) -> std::io::Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        chown_tree(dir, 0)?;
    }
    Ok(())
}

/// Gives `dir` and what it holds to `uid` (its group too), so the sandboxed process can write
/// its scratch. Links are not followed.
fn chown_tree(dir: &Path, uid: u32) -> std::io::Result<()> {
    let mut stack: Vec<PathBuf> = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        std::os::unix::fs::lchown(&p, Some(uid), Some(uid))?;
        if p.is_dir() && !p.is_symlink() {
            stack.extend(std::fs::read_dir(&p)?.flatten().map(|e| e.path()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The detected sandbox when it is bubblewrap; else `None`, the test reported as skipped.
    fn bwrap_or_skip() -> Option<&'static Sandbox> {
        let s = detected();
        if s.isolation != Isolation::Bubblewrap {
            eprintln!("SKIPPED: bwrap does not work here ({:?})", s.isolation);
            return None;
        }
        Some(s)
    }

    /// `sh -c script` in `s` as both kinds of command (another uid, the caller): what each
    /// printed, after asserting it got to `echo done`.
    fn stdout_of_both(s: &Sandbox, scratch: &Path, script: &str) -> Vec<String> {
        [
            s.command(scratch, "sh", ["-c", script]).unwrap(),
            s.command_as_caller(scratch, "sh", ["-c", script]).unwrap(),
        ]
        .into_iter()
        .map(|command| {
            let out = { command }.output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(text.contains("done"), "{out:?}");
            text
        })
        .collect()
    }

    /// A scratch directory inside a hidden one (a TMPDIR under `/dev/shm`, or under the input
    /// cache) still works: bwrap makes its mount point while the cover is writable, then the
    /// cover becomes read-only around it; a sibling in the hidden directory is not seen.
    #[test]
    fn a_scratch_inside_a_hidden_directory_still_works() {
        let Some(s) = bwrap_or_skip() else { return };
        let hidden = std::env::temp_dir().join(format!("dlrm-sandbox-hide-{}", std::process::id()));
        let scratch = hidden.join("scratch");
        std::fs::create_dir_all(&scratch).unwrap();
        std::fs::write(hidden.join("sibling"), b"secret").unwrap();
        let script = "echo made > out && cat ../sibling; touch ../planted; true";
        let out = s
            .hiding([hidden.clone()])
            .command_as_caller(&scratch, "sh", ["-c", script])
            .unwrap()
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains("secret"),
            "{out:?}"
        );
        assert_eq!(
            std::fs::read_to_string(scratch.join("out")).unwrap(),
            "made\n"
        );
        assert!(!hidden.join("planted").exists());
        std::fs::remove_dir_all(&hidden).unwrap();
    }

    /// A sandbox `hiding` a directory and a file (the oracles of KernelBench answers, a seed
    /// file): a command sees an empty directory and reads nothing from the file, whether it
    /// runs as another uid or as the caller.
    #[test]
    fn hidden_paths_are_not_seen_by_either_kind_of_command() {
        let Some(s) = bwrap_or_skip() else { return };
        let base = std::env::temp_dir().join(format!("dlrm-sandbox-hiding-{}", std::process::id()));
        let (dir, file, scratch) = (
            base.join("oracles"),
            base.join("seed"),
            base.join("scratch"),
        );
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("expected"), b"secret-outputs").unwrap();
        std::fs::write(&file, b"secret-seed").unwrap();
        // Readable by anyone: only the cover stops it.
        use std::os::unix::fs::PermissionsExt;
        for p in [&base, &dir] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        for p in [dir.join("expected"), file.clone()] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        let script = format!(
            "cat {0}/expected {1}; ls {0}; echo done",
            dir.display(),
            file.display()
        );
        let hiding = s.hiding([dir.clone(), file.clone()]);
        for text in stdout_of_both(&hiding, &scratch, &script) {
            assert!(!text.contains("secret"), "{text}");
        }
        std::fs::remove_dir_all(&base).unwrap();
    }

    /// A hidden path under a directory other users cannot enter (a run directory in a private
    /// home): a command of another uid still starts (its bwrap cannot make a mount point
    /// there, and needs none: it cannot reach the path), and cannot read it.
    #[test]
    fn a_hidden_path_in_a_private_directory_does_not_stop_a_command() {
        use std::os::unix::fs::PermissionsExt;
        let Some(s) = bwrap_or_skip() else { return };
        let base =
            std::env::temp_dir().join(format!("dlrm-sandbox-private-{}", std::process::id()));
        let run = base.join("home").join("run");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::write(run.join(".secret_seed"), b"secret-seed").unwrap();
        let home = base.join("home");
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
        let script = format!("cat {}/.secret_seed; echo done", run.display());
        let out = s
            .hiding([run.clone()])
            .command(&base.join("scratch"), "sh", ["-c", &script])
            .unwrap()
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("done"), "{out:?}");
        assert!(!text.contains("secret"), "{out:?}");
        std::fs::remove_dir_all(&base).unwrap();
    }

    /// A hidden directory (`/dev/shm`) with a path inside shown again (this run's cache) and a
    /// hidden one inside that (its oracles): the command reads the shown files only.
    #[test]
    fn an_exposed_path_inside_a_hidden_one_is_seen_and_its_hidden_part_is_not() {
        use std::os::unix::fs::PermissionsExt;
        let Some(s) = bwrap_or_skip() else { return };
        let base = std::env::temp_dir().join(format!("dlrm-sandbox-expose-{}", std::process::id()));
        let (shm, run, oracles) = (
            base.join("shm"),
            base.join("shm/run"),
            base.join("shm/run/.o"),
        );
        std::fs::create_dir_all(&oracles).unwrap();
        std::fs::create_dir_all(base.join("shm/old-run")).unwrap();
        std::fs::write(base.join("shm/old-run/set"), b"old-secret").unwrap();
        std::fs::write(run.join("set"), b"inputs").unwrap();
        std::fs::write(oracles.join("oracle"), b"oracle-secret").unwrap();
        for d in [&base, &shm, &run, &oracles, &base.join("shm/old-run")] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let script = format!(
            "cat {0}/run/set {0}/old-run/set {0}/run/.o/oracle; echo; echo done",
            shm.display()
        );
        let out = s
            .hiding([shm.clone(), oracles.clone()])
            .exposing([run.clone()])
            .command(&base.join("scratch"), "sh", ["-c", &script])
            .unwrap()
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("inputs") && text.contains("done"), "{out:?}");
        assert!(!text.contains("secret"), "{out:?}");
        std::fs::remove_dir_all(&base).unwrap();
    }

    /// Hidden paths inside another hidden one, listed before it (a run's input cache under
    /// `/dev/shm`, as the answers' builds are given them): the covers go on parents first, so
    /// the inner cover's mount point is made inside the outer one (the other order covered the
    /// inner mount, and bwrap failed to remount it: "realpath(destination): No such file").
    #[test]
    fn hidden_paths_inside_a_hidden_one_in_any_order_start_and_stay_hidden() {
        use std::os::unix::fs::PermissionsExt;
        let Some(s) = bwrap_or_skip() else { return };
        let base = std::env::temp_dir().join(format!("dlrm-sandbox-nested-{}", std::process::id()));
        let (shm, cache, seed) = (
            base.join("shm"),
            base.join("shm/run-1"),
            base.join("shm/seed"),
        );
        std::fs::create_dir_all(&cache).unwrap();
        std::fs::write(cache.join("set"), b"cache-secret").unwrap();
        std::fs::write(&seed, b"seed-secret").unwrap();
        for d in [&base, &shm, &cache] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let script = format!(
            "cat {0}/run-1/set {0}/seed; ls -R {0}; echo done",
            shm.display()
        );
        let hiding = s.hiding([cache.clone(), seed.clone(), shm.clone()]);
        for text in stdout_of_both(&hiding, &base.join("scratch"), &script) {
            assert!(!text.contains("secret"), "{text}");
        }
        std::fs::remove_dir_all(&base).unwrap();
    }
}
