//! A run's directory, `results/<run-id>/`: made atomically (two runs started in the same
//! second get two directories), its files written through a temporary file and a rename, the
//! secret seed kept so that no state of the directory loses it, and the checks that a
//! `--resume` runs on the backend and preset of the run it finishes.
//!
//! The secret seed's life: a new run writes it to [`SECRET_FILE`] before anything else, and
//! `run.json` says "(written when the run ends)"; at the end `run.json` publishes it and only
//! then is [`SECRET_FILE`] removed. A resume writes [`SECRET_FILE`] again (from `run.json` when
//! the run had ended) before it rewrites `run.json`, so a resume killed at any point leaves the
//! seed in one of the two.
use crate::backend::DeviceInfo;
use crate::results::{RunMeta, SecretSeed};
use anyhow::Context;
use bench_problems::Preset;
use std::path::{Path, PathBuf};

/// The file holding the secret seed while it is not (or not yet again) in `run.json`.
pub(crate) const SECRET_FILE: &str = ".secret_seed";
/// Where the run holding a result set writes its pid (removed when it ends).
pub(crate) const LOCK_FILE: &str = "run.lock";

/// A run's hold on its result set: an advisory lock on the directory itself, released when
/// dropped (or when the process ends, however it ends), and [`LOCK_FILE`] naming the holder.
#[derive(Debug)]
pub(crate) struct RunLock {
    _dir: std::fs::File,
    pid_file: PathBuf,
}

impl Drop for RunLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.pid_file);
    }
}

/// Takes the result set `dir`'s lock, or refuses, naming the pid that holds it: two runs (two
/// `--resume`s, say) appending to one `results.jsonl` would record the same work twice.
/// Refusing leaves the directory as it was.
pub(crate) fn lock(dir: &Path) -> anyhow::Result<RunLock> {
    let handle = std::fs::File::open(dir)
        .with_context(|| format!("{}: cannot open the result set", dir.display()))?;
    let pid_file = dir.join(LOCK_FILE);
    match handle.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let holder = std::fs::read_to_string(&pid_file).unwrap_or_default();
            let holder = match holder.trim() {
                "" => String::new(),
                pid => format!(" (pid {pid})"),
            };
            anyhow::bail!(
                "{}: another dlrm-bench{holder} is running on this result set; wait for it to \
                 end (then `--resume` it if it was cut short)",
                dir.display()
            );
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(e).with_context(|| format!("{}: cannot take the lock", dir.display()))
        }
    }
    std::fs::write(&pid_file, std::process::id().to_string())
        .with_context(|| format!("{}: cannot write the holder's pid", pid_file.display()))?;
    Ok(RunLock {
        _dir: handle,
        pid_file,
    })
}

/// What `run.json` says in place of the secret seed until the run ends.
pub(crate) const SECRET_HIDDEN: &str = "(written when the run ends)";

/// Makes the run directory `out/run_id` (and `out`), or `out/run_id-2`, `-3`, … when another
/// run took that name: `create_dir` either makes the directory or fails, so two runs never
/// share one. Errors name the path.
pub(crate) fn create_run_dir(out: &Path, run_id: &str) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(out).with_context(|| {
        format!(
            "--out {}: cannot create the results directory",
            out.display()
        )
    })?;
    for n in 1.. {
        let name = match n {
            1 => run_id.to_string(),
            n => format!("{run_id}-{n}"),
        };
        let dir = out.join(name);
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(e).with_context(|| {
                    format!("--out {}: cannot create {}", out.display(), dir.display())
                })
            }
        }
    }
    unreachable!("the suffixes are endless")
}

/// Writes `bytes` to `path` through a temporary file beside it and a rename, so a crash or a
/// full disk leaves the previous complete file (or none), never a truncated one; the
/// temporary file is removed on error.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp-{}", std::process::id()));
    let tmp = path.with_file_name(name);
    let written = std::fs::write(&tmp, bytes)
        .with_context(|| format!("writing {}", tmp.display()))
        .and_then(|()| {
            std::fs::rename(&tmp, path)
                .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
        });
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Writes `v` (pretty JSON) to `path` with [`write_atomically`].
pub(crate) fn write_json(path: &Path, v: &serde_json::Value) -> anyhow::Result<()> {
    write_atomically(path, serde_json::to_string_pretty(v)?.as_bytes())
}

/// Stores the secret seed in the run's [`SECRET_FILE`] (atomically), readable only by its
/// owner (a sandboxed answer runs as another user).
pub(crate) fn store_secret(dir: &Path, seed: u64) -> anyhow::Result<()> {
    let path = dir.join(SECRET_FILE);
    write_atomically(&path, seed.to_string().as_bytes())?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("{}: cannot make it private", path.display()))
}

/// The secret seed of the run in `dir` whose `run.json` says `in_run_json`: from
/// [`SECRET_FILE`], else from `run.json` (a run that ended). Either way it is (re)stored in [`SECRET_FILE`]
/// before returning, so the caller may rewrite `run.json` without losing it. Also says
/// whether `run.json` had published it.
pub(crate) fn resume_secret(dir: &Path, in_run_json: &SecretSeed) -> anyhow::Result<(u64, bool)> {
    let file = dir.join(SECRET_FILE);
    let published = in_run_json.published();
    let seed = match std::fs::read_to_string(&file) {
        Ok(s) => s
            .trim()
            .parse()
            .with_context(|| format!("{}: `{}` is not a secret seed", file.display(), s.trim()))?,
        Err(_) => published.with_context(|| {
            format!(
                "{}: no {SECRET_FILE} and no secret_seed in run.json: the run's secret input \
                 sets cannot be made again",
                dir.display()
            )
        })?,
    };
    store_secret(dir, seed)?;
    Ok((seed, published.is_some()))
}

/// Refuses a resume that would run on another kind of backend (GPU or emulator), another
/// device or another preset than the run in `dir` (its `run.json` is `run_json`): its records
/// would be mixed with ones they cannot be compared with. The message names both.
pub(crate) fn check_resume_backend(
    dir: &Path,
    run: &RunMeta,
    on_gpu: bool,
    info: &DeviceInfo,
    preset: Preset,
) -> anyhow::Result<()> {
    let was_gpu = run.timings_are_gpu_timings;
    let was_device = &run.device.name;
    let was_preset = run.config["preset"].as_str().unwrap_or("?");
    let kind = |gpu: bool| if gpu { "the GPU" } else { "the CPU emulator" };
    if was_gpu != on_gpu || *was_device != info.name || was_preset != preset.name() {
        anyhow::bail!(
            "cannot resume {}: it ran on {} `{was_device}` at preset `{was_preset}`, but this \
             resume would run on {} `{}` at preset `{}`; records of different backends, devices \
             or presets cannot be mixed in one run (resume it where it ran, or start a new run)",
            dir.display(),
            kind(was_gpu),
            kind(on_gpu),
            info.name,
            preset.name()
        );
    }
    check_resume_binary(dir, run)
}

/// The SHA-256 of the running binary (`None` when it cannot be read).
pub(crate) fn binary_sha256() -> Option<String> {
    use sha2::{Digest, Sha256};
    let bytes = std::fs::read(std::env::current_exe().ok()?).ok()?;
    Some(
        Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
    )
}

/// Refuses to resume `dir` with another commit or another binary than the one that made its
/// records: they would be credited to this one.
fn check_resume_binary(dir: &Path, run: &RunMeta) -> anyhow::Result<()> {
    let current = crate::results::record::GIT_COMMIT;
    anyhow::ensure!(
        run.git_commit == current,
        "cannot resume {}: its records were made by commit {}, this binary is commit {current}; \
         resume it with the binary that started it, or start a new run",
        dir.display(),
        run.git_commit
    );
    if let (Some(was), Some(now)) = (&run.binary_sha256, binary_sha256()) {
        anyhow::ensure!(
            *was == now,
            "cannot resume {}: its records were made by another dlrm-bench binary of commit \
             {current} (sha256 {was}, this one {now}: rebuilt from changed sources); resume it \
             with the binary that started it, or start a new run",
            dir.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_secret_seed_file_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("dlrm-secret-mode-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        store_secret(&dir, 42).unwrap();
        let mode = std::fs::metadata(dir.join(SECRET_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let _ = std::fs::remove_dir_all(&dir);
    }

    use super::*;

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("dlrm-run-dir-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn runs_started_in_the_same_second_get_distinct_directories() {
        let out = tmp("same-second");
        let id = "20260101T000000Z-cpu-ci";
        let dirs: Vec<PathBuf> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| create_run_dir(&out, id).unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut names: Vec<String> = dirs
            .iter()
            .map(|d| d.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 8, "{names:?}");
        assert!(names.contains(&id.to_string()) && names.contains(&format!("{id}-8")));
        std::fs::remove_dir_all(&out).unwrap();
    }

    #[test]
    fn an_out_that_is_a_file_is_an_error_naming_it() {
        let root = tmp("out-file");
        std::fs::create_dir_all(&root).unwrap();
        let file = root.join("plain");
        std::fs::write(&file, "x").unwrap();
        let e = format!("{:#}", create_run_dir(&file, "r").unwrap_err());
        assert!(e.contains(&format!("--out {}", file.display())), "{e}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn the_secret_seed_survives_a_resume_of_an_ended_run_killed_at_any_point() {
        let dir = tmp("secret");
        std::fs::create_dir_all(&dir).unwrap();
        // An ended run: the seed is in run.json only.
        let ended = SecretSeed::Published(42);
        assert!(!dir.join(SECRET_FILE).exists());
        assert_eq!(resume_secret(&dir, &ended).unwrap(), (42, true));
        // The resume rewrote run.json without the seed, then was killed: the file has it.
        let hidden = SecretSeed::Withheld(SECRET_HIDDEN.into());
        assert_eq!(resume_secret(&dir, &hidden).unwrap(), (42, false));
        let left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(left.iter().all(|f| !f.contains(".tmp-")), "{left:?}");
        // Neither: an error that says what is lost, not a new seed.
        std::fs::remove_file(dir.join(SECRET_FILE)).unwrap();
        let e = format!("{:#}", resume_secret(&dir, &hidden).unwrap_err());
        assert!(e.contains("no .secret_seed"), "{e}");
        std::fs::write(dir.join(SECRET_FILE), "").unwrap();
        let e = format!("{:#}", resume_secret(&dir, &ended).unwrap_err());
        assert!(e.contains("is not a secret seed"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
