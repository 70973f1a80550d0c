//! KernelBench answers' `load_inline` extensions built before any answer meets the GPU
//! ([`build_all`]): every answer imported once by `tools/kernelbench_eval.py --compile`, the
//! GPU hidden, in the sandbox, [`BuildSettings::jobs`] at a time, in the order the answers are
//! evaluated and below the measurements' CPU priority, the first answers' before the rest
//! (`Priority`), each build kept in a
//! cache directory named by the hash of what decides it (the answer's bytes, the evaluator's,
//! the target architecture), so a re-run or a resumed run builds nothing twice. The builds run
//! on threads of their own while the GPU measures the references and candidates
//! ([`AheadBuilds`]: an answer's evaluation waits only for its own build, and only if it is not
//! done yet). The evaluation then loads those builds ([`Build::Built`]); a build the compiler
//! rejected is the answer's `compile_error` at once, with the compiler's message.
use super::Answer;
use crate::toolchain::limited;
use crate::toolchain::sandbox::Sandbox;
use crate::toolchain::untrusted::read_untrusted;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

/// The cache's directory name (under [`crate::toolchain::sandbox::shared_dir`]).
pub const CACHE_DIR: &str = "kernelbench-builds";

/// The most of a build's `result.json` read (its extensions' names and paths, or a compiler's
/// message).
const RESULT_MAX_BYTES: u64 = 4 << 20;

/// What building one answer ahead gave.
#[derive(Clone, Debug, PartialEq)]
pub enum Build {
    /// Its extensions (none for an answer that builds nothing), each `{key, name, library}`
    /// with `library` an absolute path, for the evaluation to load.
    Built(Vec<Value>),
    /// The compiler (or Python's parser) rejected it: the message.
    CompileError(String),
    /// Importing it failed without a GPU, or the build could not run: the evaluation decides
    /// (and compiles what it needs itself).
    Undecided(String),
}

impl Build {
    /// The extensions the evaluation may load (none unless built).
    pub fn libraries(&self) -> &[Value] {
        match self {
            Build::Built(b) => b,
            _ => &[],
        }
    }
}

/// Builds of a run's answers, by answer file.
pub type Builds = BTreeMap<PathBuf, Build>;

/// The settings of a run's builds.
pub struct BuildSettings<'a> {
    /// The evaluator script.
    pub script: &'a Path,
    /// Where builds are kept, one directory per hash.
    pub cache: &'a Path,
    /// `TORCH_CUDA_ARCH_LIST` (e.g. `9.0`), from the device the run measures.
    pub arch: String,
    pub sandbox: &'a Sandbox,
    /// Seconds one answer's build may take.
    pub limit_s: f64,
    /// Builds at a time.
    pub jobs: usize,
}

/// The builds of a run's answers as they finish, shared between the threads that make them
/// ([`build_all`]) and the evaluations that wait for them ([`AheadBuilds::wait`]).
#[derive(Default)]
pub struct AheadBuilds {
    /// The answer files being built; an answer not among them has no build to wait for.
    expected: BTreeSet<PathBuf>,
    done: Mutex<Builds>,
    /// Notified on each build done, on cancelling and on finishing.
    ready: Condvar,
    /// Set when the run stops early: no build starts after it.
    cancelled: AtomicBool,
    /// Set when the builder is done (or died): an answer without a build then waits no more.
    finished: AtomicBool,
}

impl AheadBuilds {
    /// Builds to come for `answers`.
    pub fn new(answers: &[&Answer]) -> Self {
        AheadBuilds {
            expected: answers.iter().map(|a| a.file.clone()).collect(),
            ..AheadBuilds::default()
        }
    }

    /// The build of `file` (waiting for it when it is still being made) and the seconds
    /// waited; `None` for an answer no build was started for (or whose build was cancelled).
    pub fn wait(&self, file: &Path) -> (Option<Build>, f64) {
        let clock = Instant::now();
        let mut done = self.done.lock().unwrap_or_else(|e| e.into_inner());
        if !self.expected.contains(file) {
            return (None, 0.0);
        }
        loop {
            if let Some(b) = done.get(file) {
                return (Some(b.clone()), clock.elapsed().as_secs_f64());
            }
            if self.cancelled.load(Ordering::Relaxed) || self.finished.load(Ordering::Relaxed) {
                return (None, clock.elapsed().as_secs_f64());
            }
            done = self.ready.wait(done).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// No build starts after this (the run stopped); builds under way finish.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Relaxed);
        let _guard = self.done.lock();
        self.ready.notify_all();
    }

    /// A guard that, dropped however its scope ends (a panic included), says the builder is
    /// done: waiters stop waiting for builds never made.
    pub fn finisher(&self) -> Finisher<'_> {
        Finisher(self)
    }

    /// The builder is done, or died: whatever was not built never will be.
    fn finish(&self) {
        self.finished.store(true, Ordering::Relaxed);
        let _guard = self.done.lock();
        self.ready.notify_all();
    }

    fn insert(&self, file: PathBuf, build: Build) {
        self.done
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(file, build);
        self.ready.notify_all();
    }

    /// The builds made so far.
    pub fn snapshot(&self) -> Builds {
        self.done.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// See [`AheadBuilds::finisher`].
pub struct Finisher<'a>(&'a AheadBuilds);

impl Drop for Finisher<'_> {
    fn drop(&mut self) {
        self.0.finish();
    }
}

/// Builds every answer of `answers` into `into`, `settings.jobs` at a time; `done` is called
/// after each. Returns when all are built, or when `into` is cancelled and the builds under
/// way are done.
pub fn build_all(
    answers: &[&Answer],
    settings: &BuildSettings,
    into: &AheadBuilds,
    done: &(dyn Fn() + Sync),
) {
    let _finish = into.finisher();
    let _ = std::fs::create_dir_all(settings.cache);
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..settings.jobs.clamp(1, answers.len().max(1)) {
            scope.spawn(|| loop {
                if into.cancelled.load(Ordering::Relaxed) {
                    return;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(answer) = answers.get(i) else { return };
                let b = build_one(&answer.file, settings, Priority::of(i));
                into.insert(answer.file.clone(), b);
                done();
            });
        }
    });
}

/// The cache directory's name for `answer`: the hash of its bytes, the evaluator's and the
/// architecture.
fn cache_key(answer: &[u8], script: &[u8], arch: &str) -> String {
    let mut h = Sha256::new();
    for part in [answer, script, arch.as_bytes()] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    }
    h.finalize()
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// One answer's build: from the cache when it holds one, else built now into a fresh
/// directory that takes the cache's name once complete.
fn build_one(answer: &Path, s: &BuildSettings, priority: Priority) -> Build {
    let (source, script) = match (std::fs::read(answer), std::fs::read(s.script)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) => return Build::Undecided(format!("{}: {e}", answer.display())),
        (_, Err(e)) => return Build::Undecided(format!("{}: {e}", s.script.display())),
    };
    let dir = s.cache.join(cache_key(&source, &script, &s.arch));
    if let Some(b) = read_result(&dir) {
        return b;
    }
    // A directory of this build's own: two answers with the same bytes (k samples of one
    // model often are) build at once without touching each other's files.
    static BUILDS: AtomicUsize = AtomicUsize::new(0);
    let fresh = s.cache.join(format!(
        "tmp-{}-{}-{}",
        std::process::id(),
        BUILDS.fetch_add(1, Ordering::Relaxed),
        dir.file_name().unwrap_or_default().to_string_lossy()
    ));
    // A process that dies without a result (a signal, a crash) is tried once more: its
    // evaluation would otherwise compile it on the GPU's time.
    let mut tries = 0;
    loop {
        tries += 1;
        let _ = std::fs::remove_dir_all(&fresh);
        match compile_into(answer, &fresh, s, priority) {
            Ok(()) => break,
            Err((why, again)) => {
                let _ = std::fs::remove_dir_all(&fresh);
                if !(again && tries < 2) {
                    return Build::Undecided(why);
                }
            }
        }
    }
    // The build's files belong to its uid until taken back (`reclaim`).
    if let Err(e) = crate::toolchain::sandbox::reclaim(&fresh) {
        let _ = std::fs::remove_dir_all(&fresh);
        return Build::Undecided(format!(
            "cannot take back the build of {} from its sandbox's uid: {e}",
            answer.display()
        ));
    }
    // A finished entry is never removed (an evaluation may be loading from it): the first
    // build to finish names the entry, a later one of the same key is dropped. Only an entry
    // left incomplete (no readable result) is replaced.
    if dir.exists() && read_result(&dir).is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    if std::fs::rename(&fresh, &dir).is_err() {
        let _ = std::fs::remove_dir_all(&fresh);
    }
    read_result(&dir).unwrap_or_else(|| {
        Build::Undecided(format!(
            "the build of {} left no readable result in {}",
            answer.display(),
            dir.display()
        ))
    })
}

/// [`run_compile`] into `dir`, its output kept beside `dir` (out of the build's reach) for the
/// message of a build that ends without a readable result. Err: why, and whether trying again
/// may help (the process ended without a result, not past its limit).
fn compile_into(
    answer: &Path,
    dir: &Path,
    s: &BuildSettings,
    priority: Priority,
) -> Result<(), (String, bool)> {
    let log = dir.with_extension("log");
    let ran = std::fs::File::create(&log)
        .map_err(|e| (format!("cannot create {}: {e}", log.display()), false))
        .and_then(|f| run_compile(answer, dir, f, s, priority).map_err(|e| (e, false)));
    // The answer's own output: no escape sequence or carriage return reaches a terminal.
    let text: String = read_untrusted(&log, 16 << 10, true)
        .unwrap_or_default()
        .chars()
        .map(|c| match c {
            '\n' | '\t' => c,
            c if c.is_control() => '?',
            c => c,
        })
        .collect();
    let _ = std::fs::remove_file(&log);
    let status = ran?;
    if read_result(dir).is_some() {
        return Ok(());
    }
    Err((
        format!(
            "the build of {} left no readable result ({status}); its output ends:\n{}",
            answer.display(),
            limited::tail(&text, 20)
        ),
        true,
    ))
}

/// How a build competes for the CPU: its `nice` level and the compiler processes it runs at
/// once (`MAX_JOBS`, torch's ninja `-j`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Priority {
    nice: u32,
    max_jobs: u32,
}

impl Priority {
    /// The build of the `position`-th answer in evaluation order. Every build runs well below
    /// the measurements (which must not slow: eager PyTorch's launches are CPU-bound, and a
    /// build runs the answer's Python), but the first answers' builds, which the GPU waits
    /// for, come before later ones, and the first four compile their C++ and CUDA files at
    /// once. (The first answer waited 55 s for its build at nice 10 on an H100: the answers
    /// now come two units after their reference, `runner::units::ANSWER_LAG`, rather than the
    /// builds rising in priority.)
    fn of(position: usize) -> Priority {
        Priority {
            nice: (10 + position / 2).min(19) as u32,
            max_jobs: if position < 4 { 2 } else { 1 },
        }
    }
}

/// `kernelbench_eval.py --compile ANSWER` in the sandbox, the GPU hidden, into `dir`, its
/// output to `log`: how it exited.
fn run_compile(
    answer: &Path,
    dir: &Path,
    log: std::fs::File,
    s: &BuildSettings,
    priority: Priority,
) -> Result<std::process::ExitStatus, String> {
    let script = std::path::absolute(s.script).unwrap_or_else(|_| s.script.to_path_buf());
    // Below the measurements' CPU priority, the first answers' builds first (`Priority`).
    let args = [
        "-n".into(),
        priority.nice.to_string().into(),
        "python3".into(),
        script.into_os_string(),
        "--compile".into(),
        answer.as_os_str().to_owned(),
        "--build-dir".into(),
        dir.join("ext").into_os_string(),
        "--out".into(),
        dir.join("result.json").into_os_string(),
    ];
    let mut c = s
        .sandbox
        .command(dir, "nice", args)
        .map_err(|e| format!("cannot prepare the sandbox: {e}"))?;
    c.env("CUDA_VISIBLE_DEVICES", "")
        .env("TORCH_CUDA_ARCH_LIST", &s.arch)
        .env("MAX_JOBS", priority.max_jobs.to_string())
        .stdin(Stdio::null())
        .stdout(
            log.try_clone()
                .map_err(|e| format!("cannot share the build's log: {e}"))?,
        )
        .stderr(log);
    match limited::run(&mut c, s.limit_s) {
        Ok(limited::Ending::Exited(status)) => Ok(status),
        Ok(limited::Ending::Killed) => Err(format!(
            "building {} ran past {:.0} s and was killed",
            answer.display(),
            s.limit_s
        )),
        Err(e) => Err(format!("cannot run python3 {}: {e}", s.script.display())),
    }
}

/// The build recorded in `dir/result.json`, its libraries made absolute under `dir/ext`;
/// `None` without one (or with one the evaluator did not write whole).
fn read_result(dir: &Path) -> Option<Build> {
    let text = read_untrusted(&dir.join("result.json"), RESULT_MAX_BYTES, false).ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    let message = v["message"].as_str().unwrap_or("").to_string();
    Some(match v["status"].as_str()? {
        "built" => {
            let ext = dir.join("ext");
            let libs = v["builds"].as_array()?.iter().filter_map(|b| {
                let rel = Path::new(b["library"].as_str()?);
                // The library must lie in the build's own directory.
                let inside = rel.components().all(|c| matches!(c, Component::Normal(_)));
                inside.then(|| {
                    let mut b = b.clone();
                    b["library"] = Value::from(ext.join(rel).to_string_lossy().into_owned());
                    b
                })
            });
            Build::Built(libs.collect())
        }
        "compile_error" => Build::CompileError(message),
        _ => Build::Undecided(message),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(file: &str) -> Answer {
        Answer {
            problem: "embedding_bag_sum",
            file: PathBuf::from(file),
            group: "g".into(),
        }
    }

    #[test]
    fn an_evaluation_waits_for_its_own_build_only() {
        let (a, b) = (
            answer("/a/01_embedding_bag_sum.py"),
            answer("/b/01_embedding_bag_sum.py"),
        );
        let builds = AheadBuilds::new(&[&a, &b]);
        // An answer no build was started for does not wait.
        assert_eq!(builds.wait(Path::new("/c/x.py")), (None, 0.0));
        std::thread::scope(|s| {
            s.spawn(|| {
                builds.insert(b.file.clone(), Build::CompileError("b".into()));
                std::thread::sleep(std::time::Duration::from_millis(200));
                builds.insert(a.file.clone(), Build::Built(Vec::new()));
            });
            let (got, waited) = builds.wait(&a.file);
            assert_eq!(got, Some(Build::Built(Vec::new())));
            assert!(waited >= 0.15, "{waited}");
        });
        // Done already: no wait.
        let (got, waited) = builds.wait(&b.file);
        assert_eq!(got, Some(Build::CompileError("b".into())));
        assert!(waited < 0.1, "{waited}");
    }

    #[test]
    fn cancelling_releases_the_waiters_of_builds_never_made() {
        let a = answer("/a/01_embedding_bag_sum.py");
        let builds = AheadBuilds::new(&[&a]);
        std::thread::scope(|s| {
            let waiter = s.spawn(|| builds.wait(&a.file).0);
            std::thread::sleep(std::time::Duration::from_millis(100));
            builds.cancel();
            assert_eq!(waiter.join().unwrap(), None);
        });
    }

    #[test]
    fn a_builder_that_dies_releases_the_waiters() {
        let a = answer("/a/01_embedding_bag_sum.py");
        let builds = AheadBuilds::new(&[&a]);
        std::thread::scope(|s| {
            let waiter = s.spawn(|| builds.wait(&a.file).0);
            let builder = s.spawn(|| {
                let _finish = builds.finisher();
                std::thread::sleep(std::time::Duration::from_millis(100));
                panic!("a build thread's bug");
            });
            assert!(builder.join().is_err());
            assert_eq!(waiter.join().unwrap(), None);
        });
    }

    #[test]
    fn the_first_answers_builds_come_first_and_every_build_stays_below_the_measurements() {
        let p: Vec<Priority> = (0..30).map(Priority::of).collect();
        assert_eq!(
            p[0],
            Priority {
                nice: 10,
                max_jobs: 2
            }
        );
        assert!(p.windows(2).all(|w| w[0].nice <= w[1].nice));
        assert!(p.iter().all(|q| (10..=19).contains(&q.nice)));
        assert_eq!(p[29].nice, 19);
        assert_eq!(p.iter().filter(|q| q.max_jobs == 2).count(), 4);
    }

    #[test]
    fn the_key_changes_with_each_part_and_not_otherwise() {
        let k = cache_key(b"answer", b"script", "9.0");
        assert_eq!(k, cache_key(b"answer", b"script", "9.0"));
        assert_eq!(k.len(), 32);
        assert_ne!(k, cache_key(b"answer!", b"script", "9.0"));
        assert_ne!(k, cache_key(b"answer", b"script!", "9.0"));
        assert_ne!(k, cache_key(b"answer", b"script", "10.0"));
        // Lengths are hashed too: moving bytes from one part to the next changes the key.
        assert_ne!(k, cache_key(b"answers", b"cript", "9.0"));
    }

    #[test]
    fn results_are_read_with_libraries_kept_inside_the_build() {
        let dir = std::env::temp_dir().join(format!("dlrm-builds-read-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let write = |v: &str| std::fs::write(dir.join("result.json"), v).unwrap();
        write(
            r#"{"status": "built", "builds": [{"key": "k", "name": "m", "library": "k/m.so"},
                  {"key": "x", "name": "x", "library": "../../etc/x.so"}]}"#,
        );
        let Some(Build::Built(libs)) = read_result(&dir) else {
            panic!("not built")
        };
        assert_eq!(libs.len(), 1, "{libs:?}");
        assert_eq!(
            libs[0]["library"],
            dir.join("ext/k/m.so").to_string_lossy().as_ref()
        );
        write(r#"{"status": "compile_error", "message": "error: expected ';'"}"#);
        assert_eq!(
            read_result(&dir),
            Some(Build::CompileError("error: expected ';'".into()))
        );
        write(r#"{"status": "import_failed", "message": "no GPU"}"#);
        assert_eq!(read_result(&dir), Some(Build::Undecided("no GPU".into())));
        write("{\"status\": \"bui");
        assert_eq!(read_result(&dir), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A stand-in for the evaluator's `--compile`: the answer file's text says how it ends; it
    /// counts its tries beside the answer.
    const FAKE_COMPILE: &str = r#"
import json, os, sys
a = sys.argv
answer, out = a[a.index("--compile") + 1], a[a.index("--out") + 1]
mode = open(answer).read().strip()
tries = answer + ".tries"
n = int(open(tries).read())
open(tries, "w").write(str(n + 1))
print("building, try", n + 1, "\x1b[2J", flush=True)
if mode == "dies" or (mode == "flaky" and n == 0):
    print("the compiler was killed", flush=True)
    os._exit(9)
json.dump({"status": "built", "builds": []}, open(out, "w"))
"#;

    #[test]
    fn a_build_that_dies_without_a_result_is_tried_once_more_then_says_why() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("dlrm-builds-retry-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("cache")).unwrap();
        // As root the build runs as a uid of its own: it must write its tries here.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let script = dir.join("compile.py");
        std::fs::write(&script, FAKE_COMPILE).unwrap();
        let sandbox = Sandbox {
            isolation: crate::toolchain::sandbox::Isolation::LimitsOnly,
            limits: Default::default(),
            hidden: Vec::new(),
            exposed: Vec::new(),
        };
        let settings = BuildSettings {
            script: &script,
            cache: &dir.join("cache"),
            arch: "9.0".into(),
            sandbox: &sandbox,
            limit_s: 60.0,
            jobs: 1,
        };
        let tries = |name: &str| std::fs::read_to_string(dir.join(format!("{name}.tries")));
        for name in ["flaky", "dies"] {
            std::fs::write(dir.join(name), name).unwrap();
            let count = dir.join(format!("{name}.tries"));
            std::fs::write(&count, "0").unwrap();
            std::fs::set_permissions(&count, std::fs::Permissions::from_mode(0o666)).unwrap();
        }
        assert_eq!(
            build_one(&dir.join("flaky"), &settings, Priority::of(0)),
            Build::Built(vec![])
        );
        assert_eq!(tries("flaky").unwrap(), "2");
        // The kept build is the caller's, not its sandbox uid's (which a later command reuses).
        {
            use std::os::unix::fs::MetadataExt;
            // SAFETY: geteuid has no preconditions.
            let me = unsafe { libc::geteuid() };
            for e in std::fs::read_dir(dir.join("cache")).unwrap().flatten() {
                for f in [e.path(), e.path().join("result.json")] {
                    assert_eq!(std::fs::metadata(&f).unwrap().uid(), me, "{}", f.display());
                }
            }
        }
        match build_one(&dir.join("dies"), &settings, Priority::of(9)) {
            Build::Undecided(why) => {
                assert!(why.contains("left no readable result"), "{why}");
                assert!(why.contains("exit status: 9"), "{why}");
                assert!(why.contains("the compiler was killed"), "{why}");
                assert!(!why.contains('\x1b'), "no escape reaches the log: {why:?}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(tries("dies").unwrap(), "2", "tried twice, no more");
        // The finished build is kept: asked again, nothing runs.
        assert_eq!(
            build_one(&dir.join("flaky"), &settings, Priority::of(0)),
            Build::Built(vec![])
        );
        assert_eq!(tries("flaky").unwrap(), "2");
        // Nothing of the failed tries is left in the cache but the finished build.
        let left: Vec<_> = std::fs::read_dir(dir.join("cache")).unwrap().collect();
        assert_eq!(left.len(), 1, "{left:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
