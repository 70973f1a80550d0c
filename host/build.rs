//! Builds `gpu-kernels` to PTX (sm_80) with rustc's NVPTX backend and hands the file to the
//! crate as `$OUT_DIR/gpu_kernels.ptx` (embedded by `src/toolchain/ptx.rs`).
//!
//! The nested build runs `cargo rustc` for `nvptx64-nvidia-cuda` with `-Zbuild-std=core`
//! (`RUSTC_BOOTSTRAP=1`) into its own target directory, `target/nvptx-kernels` (sharing the outer
//! one would deadlock on its lock). It needs the rustup components `rust-src`,
//! `llvm-bitcode-linker` and `llvm-tools`; when they are missing it installs them with rustup,
//! and if that fails it stops with the exact command to run. `DLRM_BENCH_PTX=/path/file.ptx`
//! skips the nested build and embeds that file instead. The kernels' `launch_bounds!` markers
//! become `.maxntid`/`.minnctapersm` directives here ([`launch_bounds`]). It also embeds the
//! problems' KernelBench files and module sources for `dlrm-bench prompt` ([`embed_problem_sources`]).
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "src/toolchain/launch_bounds.rs"]
mod launch_bounds;

const COMPONENTS: [&str; 3] = ["rust-src", "llvm-bitcode-linker", "llvm-tools"];

fn main() {
    record_git_commit();
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    embed_problem_sources(&out_dir);
    let dest = out_dir.join("gpu_kernels.ptx");
    println!("cargo:rerun-if-env-changed=DLRM_BENCH_PTX");
    if let Ok(prebuilt) = env::var("DLRM_BENCH_PTX") {
        println!("cargo:rerun-if-changed={prebuilt}");
        write_ptx(Path::new(&prebuilt), &dest);
        return;
    }
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let kernels_dir = manifest_dir.parent().unwrap().join("gpu-kernels");
    println!(
        "cargo:rerun-if-changed={}",
        kernels_dir.join("src").display()
    );
    println!(
        "cargo:rerun-if-changed={}",
        kernels_dir.join("Cargo.toml").display()
    );

    ensure_components();
    let target_dir = nested_target_dir(&out_dir);
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let flags = [
        "-Ctarget-cpu=sm_80",
        "-Copt-level=3",
        // A MIR pass can duplicate bar.sync into divergent branches.
        "-Zmir-enable-passes=-JumpThreading",
        // No panic machinery on the device (bounds checks would pull it in).
        "-Zunstable-options",
        "-Cpanic=immediate-abort",
    ];
    let mut cmd = Command::new(&cargo);
    cmd.current_dir(&kernels_dir)
        .args([
            "rustc",
            "--release",
            "--lib",
            "--crate-type",
            "cdylib",
            "--target",
            "nvptx64-nvidia-cuda",
        ])
        .args(["-Zbuild-std=core", "--target-dir"])
        .arg(&target_dir)
        .env("RUSTC_BOOTSTRAP", "1")
        .env("CARGO_ENCODED_RUSTFLAGS", flags.join("\x1f"));
    for var in [
        "RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_BUILD_RUSTC_WRAPPER",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_MAKEFLAGS",
        "MAKEFLAGS",
        "MFLAGS",
    ] {
        cmd.env_remove(var);
    }
    let output = cmd
        .output()
        .unwrap_or_else(|e| fail(&format!("could not run {cargo}: {e}")));
    if !output.status.success() {
        fail(&format!(
            "the PTX build of gpu-kernels failed ({}).\n--- stderr ---\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let ptx = target_dir.join("nvptx64-nvidia-cuda/release/gpu_kernels.ptx");
    let ptx = if ptx.exists() {
        ptx
    } else {
        target_dir.join("nvptx64-nvidia-cuda/release/deps/gpu_kernels.ptx")
    };
    write_ptx(&ptx, &dest);
}

/// Copies the PTX at `src` to `dest` with the kernels' launch bounds applied.
fn write_ptx(src: &Path, dest: &Path) {
    let text = std::fs::read_to_string(src)
        .unwrap_or_else(|e| fail(&format!("no PTX at {}: {e}", src.display())));
    let text = launch_bounds::apply_launch_bounds(&text)
        .unwrap_or_else(|e| fail(&format!("{}: {e}", src.display())));
    std::fs::write(dest, text)
        .unwrap_or_else(|e| fail(&format!("cannot write {}: {e}", dest.display())));
}

/// Writes `$OUT_DIR/problem_sources.rs` for `src/cmd/prompt.rs`: every KernelBench file
/// (`bench-problems/kernelbench/*.py`) and every problem module
/// (`bench-problems/src/problems/*.rs`) as `(file name, include_str!(..))`, sorted by name, so a
/// problem added with `new-problem` is embedded without a line written for it here.
fn embed_problem_sources(out_dir: &Path) {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("../bench-problems");
    let table = |dir: &str, ext: &str| {
        let dir = root.join(dir);
        println!("cargo:rerun-if-changed={}", dir.display());
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| fail(&format!("cannot read {}: {e}", dir.display())))
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == ext))
            .collect();
        files.sort();
        let entries: Vec<String> = files
            .iter()
            .map(|p| {
                let name = p.file_name().unwrap().to_string_lossy();
                let path = p
                    .canonicalize()
                    .unwrap_or_else(|e| fail(&format!("{}: {e}", p.display())));
                format!(
                    "    ({name:?}, include_str!({:?})),\n",
                    path.display().to_string()
                )
            })
            .collect();
        format!("&[\n{}]", entries.concat())
    };
    let text = format!(
        "/// `(file name, text)` of every `bench-problems/kernelbench/*.py`.\n\
         pub static KERNELBENCH_FILES: &[(&str, &str)] = {};\n\
         /// `(file name, text)` of every `bench-problems/src/problems/*.rs`.\n\
         pub static PROBLEM_MODULES: &[(&str, &str)] = {};\n",
        table("kernelbench", "py"),
        table("src/problems", "rs")
    );
    let dest = out_dir.join("problem_sources.rs");
    std::fs::write(&dest, text)
        .unwrap_or_else(|e| fail(&format!("cannot write {}: {e}", dest.display())));
}

/// Exposes the source commit as `DLRM_BENCH_GIT_COMMIT` (`unknown` outside a git checkout;
/// `-dirty` when the tree has uncommitted changes) for run records.
fn record_git_commit() {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("..");
    let git = |args: &[&str]| {
        Command::new("git")
            .current_dir(&root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = match git(&["rev-parse", "HEAD"]) {
        Some(c) if !c.is_empty() => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{c}-dirty")
            } else {
                c
            }
        }
        _ => "unknown".into(),
    };
    println!("cargo:rustc-env=DLRM_BENCH_GIT_COMMIT={commit}");
    // Any edit to the sources the binary is built from reruns this, so `-dirty` is never stale.
    for dir in ["host/src", "bench-problems/src", "data-gen/src"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    for f in ["../.git/HEAD", "../.git/index"] {
        let p = root.join(f.trim_start_matches("../"));
        if p.exists() {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }
}

/// `<target>/nvptx-kernels`, found by walking up from OUT_DIR (`<target>/<profile>/build/<pkg>/out`).
fn nested_target_dir(out_dir: &Path) -> PathBuf {
    out_dir
        .ancestors()
        .nth(4)
        .map(|t| t.join("nvptx-kernels"))
        .unwrap_or_else(|| out_dir.join("nvptx-kernels"))
}

fn ensure_components() {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let present = |sysroot: &Path| {
        sysroot.join("lib/rustlib/src/rust/library/core").exists()
            && std::fs::read_dir(sysroot.join("lib/rustlib"))
                .map(|dirs| {
                    dirs.flatten().any(|d| {
                        let bin = d.path().join("bin");
                        bin.join("llvm-bitcode-linker").exists()
                            || bin.join("self-contained/llvm-bitcode-linker").exists()
                    })
                })
                .unwrap_or(false)
    };
    let Some(sysroot) = sysroot else { return };
    if present(&sysroot) {
        return;
    }
    let toolchain = env::var("RUSTUP_TOOLCHAIN").ok();
    let mut add = Command::new("rustup");
    add.args(["component", "add"]).args(COMPONENTS);
    if let Some(t) = &toolchain {
        add.args(["--toolchain", t]);
    }
    println!(
        "cargo:warning=installing rustup components {} for the PTX build",
        COMPONENTS.join(" ")
    );
    let ok = add.status().map(|s| s.success()).unwrap_or(false);
    if !ok || !present(&sysroot) {
        fail(&format!(
            "the PTX build needs rustup components that are missing and could not be installed.\nRun: rustup component add {}{}",
            COMPONENTS.join(" "),
            toolchain.map(|t| format!(" --toolchain {t}")).unwrap_or_default()
        ));
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("error: {msg}");
    panic!("{msg}");
}
