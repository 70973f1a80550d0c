//! Running `tools/triton_compile.py` for a Triton candidate ([`compile`]): the candidate's
//! module-level Python runs while it is imported, so the tool runs sandboxed
//! ([`crate::toolchain::sandbox`], as the caller: it must import the caller's Python and
//! Triton), in a scratch directory of its own, killed after a time limit; what it leaves there
//! is read as untrusted (regular files only, bounded).
//!
//! What the sandbox hides, beyond `/dev/shm`, a worker is told by its orchestrator in
//! [`SANDBOX_HIDE_ENV`] (the run's input cache and results directory, a secret-seed file).
//! Where bubblewrap does not work, the compile is refused (the candidate `skipped`, saying
//! why) unless the run was given `--unsandboxed` ([`UNSANDBOXED_ENV`]) or the caller is
//! `check` ([`WeakSandbox::Warn`]).
use super::triton::{
    parse_answer, tool_args, CompileFailure, Compiled, TritonSpec, COMPILE_TIMEOUT_S,
    EXIT_NO_TRITON, NO_TRITON, TRITON_COMPILE,
};
use crate::toolchain::limited::Ending;
use crate::toolchain::sandbox::Isolation;
use crate::toolchain::untrusted::read_untrusted;
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// Names, to a worker, the paths a Triton compile must not see, joined like `PATH`.
pub(crate) const SANDBOX_HIDE_ENV: &str = "DLRM_BENCH_SANDBOX_HIDE";
/// Set for the workers of a run given `--unsandboxed`: a Triton compile then runs under the
/// best isolation found, however weak.
pub(crate) const UNSANDBOXED_ENV: &str = "DLRM_BENCH_UNSANDBOXED";
/// The most of `answer.json` read (its cubin and PTX, base64).
const ANSWER_MAX_BYTES: u64 = 64 << 20;
/// The most of `log.txt` read, from its end.
const LOG_MAX_BYTES: u64 = 64 << 10;

/// What a compile does where bubblewrap does not work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeakSandbox {
    /// Refuse (a run's worker), unless [`UNSANDBOXED_ENV`] is set.
    Refuse,
    /// Warn once on stderr and go on (`check`, on the user's own files).
    Warn,
}

/// Compiles `spec` of `file` for `arch` (compute capability × 10 + minor, e.g. 90) by running
/// the tool sandboxed in a process of its own, killed after the time limit
/// (`DLRM_BENCH_TRITON_TIMEOUT_S`, default [`COMPILE_TIMEOUT_S`]). Nothing of the candidate's
/// Python runs in this process.
pub fn compile(
    file: &Path,
    spec: &TritonSpec,
    arch: u32,
    weak: WeakSandbox,
) -> Result<Compiled, CompileFailure> {
    let limit = std::env::var("DLRM_BENCH_TRITON_TIMEOUT_S")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| *s > 0.0)
        .unwrap_or(COMPILE_TIMEOUT_S);
    let python = super::triton::python();
    if !on_path(&python) {
        return Err(CompileFailure::NoTriton(format!(
            "{NO_TRITON} here: `{python}` is not on PATH"
        )));
    }
    refuse_weak_sandbox(weak)?;
    let mut args = tool_args(file, spec, arch);
    let dir = std::env::temp_dir().join(format!(
        "dlrm-bench-triton-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&dir)
        .map_err(|e| CompileFailure::Failed(format!("{}: {e}", dir.display())))?;
    let answer = dir.join("answer.json");
    args.extend(["--out".into(), answer.display().to_string()]);
    let r = run_tool(&python, &args, &dir, limit).and_then(|()| {
        let text = read_untrusted(&answer, ANSWER_MAX_BYTES, false).map_err(|e| {
            CompileFailure::Failed(format!(
                "{TRITON_COMPILE} wrote no answer ({e}):\n{}",
                log_tail(&dir)
            ))
        })?;
        parse_answer(&text)
    });
    let _ = std::fs::remove_dir_all(&dir);
    r
}

/// `Err` when bubblewrap does not work here and `weak` (with the environment) says not to go
/// on; a warning, once, when it goes on.
fn refuse_weak_sandbox(weak: WeakSandbox) -> Result<(), CompileFailure> {
    let sandbox = crate::toolchain::sandbox::detected();
    if sandbox.isolation == Isolation::Bubblewrap {
        return Ok(());
    }
    if weak == WeakSandbox::Refuse && std::env::var_os(UNSANDBOXED_ENV).is_none() {
        return Err(CompileFailure::Refused(format!(
            "not compiled: importing a Triton candidate runs its Python, and bubblewrap (bwrap) \
             does not work here (the best isolation left, {}, would let it read the run's \
             input sets and write outside its directory); install bubblewrap, or run with \
             --unsandboxed",
            sandbox.isolation.describe()
        )));
    }
    static WARNED: std::sync::Once = std::sync::Once::new();
    WARNED.call_once(|| {
        eprintln!(
            "WARNING: Triton candidates compile under {}: install bubblewrap (bwrap) to confine \
             their Python",
            sandbox.isolation.describe()
        );
    });
    Ok(())
}

/// Whether `program` can be started: a path to a file, or a name found on `PATH`.
fn on_path(program: &str) -> bool {
    if program.contains('/') {
        return Path::new(program).is_file();
    }
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
}

/// The paths the orchestrator named in [`SANDBOX_HIDE_ENV`].
fn hidden_paths() -> Vec<PathBuf> {
    std::env::var_os(SANDBOX_HIDE_ENV)
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default()
}

/// Runs `python args...` sandboxed with its output in `dir/log.txt`, in its own process
/// group, which is killed after `limit_s` seconds.
fn run_tool(python: &str, args: &[String], dir: &Path, limit_s: f64) -> Result<(), CompileFailure> {
    let failed = |e: std::io::Error| CompileFailure::Failed(format!("{}: {e}", dir.display()));
    let log = std::fs::File::create(dir.join("log.txt")).map_err(failed)?;
    let err_log = log.try_clone().map_err(failed)?;
    let mut command = crate::toolchain::sandbox::detected()
        .hiding(hidden_paths())
        .command_as_caller(dir, python, args)
        .map_err(failed)?;
    // HOME becomes the scratch directory: the caller's user site-packages (a `pip install
    // --user` Triton) stay where Python looks.
    if std::env::var_os("PYTHONUSERBASE").is_none() {
        if let Some(home) = std::env::var_os("HOME") {
            command.env("PYTHONUSERBASE", Path::new(&home).join(".local"));
        }
    }
    command
        .env("TRITON_CACHE_DIR", dir.join("cache"))
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err_log);
    let status = match crate::toolchain::limited::run(&mut command, limit_s) {
        Ok(Ending::Exited(status)) => status,
        // The tool's own process group (ptxas included) was killed.
        Ok(Ending::Killed) => {
            return Err(CompileFailure::Failed(format!(
                "{TRITON_COMPILE} did not finish within {limit_s:.0} s: killed"
            )))
        }
        Err(e) => {
            return Err(CompileFailure::NoTriton(format!(
                "{NO_TRITON} here: `{python}` could not be started or waited for ({e})"
            )))
        }
    };
    if status.code() == Some(EXIT_NO_TRITON) || status.success() {
        // The answer file says what happened (a missing Triton is an answer too).
        return Ok(());
    }
    if !dir.join("answer.json").exists() {
        return Err(CompileFailure::Failed(format!(
            "{TRITON_COMPILE} failed ({status}):\n{}",
            log_tail(dir)
        )));
    }
    Ok(())
}

/// The last lines of the tool's log in `dir`, for a message.
fn log_tail(dir: &Path) -> String {
    let log = read_untrusted(&dir.join("log.txt"), LOG_MAX_BYTES, true).unwrap_or_default();
    crate::toolchain::limited::tail(&log, 40)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::triton::{check_against, python, tool_path};
    use std::process::Command;
    use std::time::{Duration, Instant};

    fn python_present() -> bool {
        let ok = Command::new(python())
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            eprintln!("SKIPPED: {} is not on PATH", python());
        }
        ok
    }

    #[test]
    fn the_tool_compiles_the_example_or_says_triton_is_not_installed() {
        if !python_present() {
            return;
        }
        let help = Command::new(python())
            .arg(tool_path())
            .arg("--help")
            .output()
            .unwrap();
        assert!(help.status.success());
        assert!(String::from_utf8_lossy(&help.stdout).contains("--signature"));
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../candidates/examples/fm_interaction/triton_fused");
        let cand = crate::candidate::load_candidate(&dir).unwrap();
        let super::super::ModuleSource::Triton { file, spec } = cand.source else {
            panic!("not a Triton source")
        };
        match compile(&file, &spec, 90, WeakSandbox::Warn) {
            Err(CompileFailure::NoTriton(m)) => {
                assert!(m.starts_with(NO_TRITON), "{m}");
                eprintln!("SKIPPED the compilation: {m}");
            }
            Ok(c) => {
                // Triton is installed: the real compilation of the example.
                check_against(&spec, &c).unwrap();
                let ptx = c.ptx.as_deref().unwrap();
                let params = super::super::ptx_params::entry_params(ptx, &c.kernel).unwrap();
                assert_eq!(params.len(), c.params.len() + c.scratch.len());
                assert!(c.cubin.is_some());
            }
            Err(CompileFailure::Failed(m) | CompileFailure::Refused(m)) => panic!("{m}"),
        }
        // A bad request is refused by the tool's own checks, Triton or not, naming the field.
        let mut bad = spec.clone();
        bad.signature[0].1 = "*float".into();
        match compile(&file, &bad, 90, WeakSandbox::Warn) {
            Err(CompileFailure::Failed(m)) => assert!(m.contains("signature['x']"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_compilation_past_its_time_limit_is_killed() {
        if !python_present() {
            return;
        }
        let dir =
            std::env::temp_dir().join(format!("dlrm-bench-triton-slow-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let args = vec!["-c".to_string(), "import time; time.sleep(30)".to_string()];
        let started = Instant::now();
        match run_tool(&python(), &args, &dir, 0.5) {
            Err(CompileFailure::Failed(m)) => assert!(m.contains("did not finish"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert!(started.elapsed() < Duration::from_secs(10));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_python_that_is_not_there_means_no_triton() {
        assert!(on_path("sh"));
        assert!(!on_path("dlrm-no-such-python-3.99"));
        assert!(!on_path("/nonexistent/python3"));
    }
}
