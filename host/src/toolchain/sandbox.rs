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
}

impl Sandbox {
    /// The strongest isolation that works here: each is tried on `true` under the same
    /// wrapping a real command gets.
    pub fn detect(limits: Limits) -> Sandbox {
        let probe_dir =
            std::env::temp_dir().join(format!("dlrm-sandbox-probe-{}", std::process::id()));
        for isolation in [Isolation::Bubblewrap, Isolation::Namespaces] {
            let s = Sandbox { isolation, limits };
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
        self.command_as(scratch, program, args, uid, &[])
    }

    /// [`Sandbox::command`] keeping the caller's uid: for a tool that must import the caller's
    /// own packages (Triton installed under a private home, mode 0700, which another uid
    /// cannot read). The caller's files are then readable, so the directories in `hidden` (the
    /// run's input cache: sets and oracles) are covered by empty ones under bubblewrap, and
    /// `/dev/shm` always is. Limits are the same, but a root caller's `RLIMIT_NPROC` does not
    /// bind (Linux exempts root), so only its wall-clock limit stops a process bomb.
    pub fn command_as_caller<I, S>(
        &self,
        scratch: &Path,
        program: &str,
        args: I,
        hidden: &[&Path],
    ) -> std::io::Result<Command>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut hide = vec![Path::new("/dev/shm")];
        hide.extend_from_slice(hidden);
        self.command_as(scratch, program, args, None, &hide)
    }

    fn command_as<I, S>(
        &self,
        scratch: &Path,
        program: &str,
        args: I,
        uid: Option<u32>,
        hidden: &[&Path],
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
                c.args([
                    "--ro-bind",
                    "/",
                    "/",
                    "--dev-bind",
                    "/dev",
                    "/dev",
                    "--proc",
                    "/proc",
                ])
                // /dev/shm holds the run's input cache: read-only like the rest.
                .args(shm_read_only())
                // Daemons' Unix sockets (D-Bus, docker) live under /run: a read-only mount
                // does not stop connect(2), so it is hidden behind an empty read-only tmpfs.
                .args(hide_run())
                .args(cover(hidden))
                .arg("--bind")
                .arg(&scratch)
                .arg(&scratch)
                .args(["--unshare-net", "--unshare-pid", "--unshare-ipc"])
                .args(["--die-with-parent", "--new-session", "--chdir"])
                .arg(&scratch)
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
            if secret_name(&name.to_string_lossy()) {
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

/// bwrap arguments covering each existing directory of `dirs` with an empty read-only tmpfs.
fn cover(dirs: &[&Path]) -> Vec<std::ffi::OsString> {
    let mut out = Vec::new();
    for d in dirs.iter().filter(|d| d.is_dir()) {
        let d = std::path::absolute(d).unwrap_or_else(|_| d.to_path_buf());
        out.extend([
            "--tmpfs".into(),
            d.clone().into_os_string(),
            "--remount-ro".into(),
            d.into_os_string(),
        ]);
    }
    out
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

/// Gives `dir` and what it holds to `uid` (its group too), so the sandboxed process can write
/// its scratch.
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
