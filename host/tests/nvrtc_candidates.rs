//! CUDA C++ candidates that need more than NVRTC alone, compiled with NVRTC (no GPU): the CUDA
//! headers (`<cuda_bf16.h>`, CUB), an arch-specific target (`sm_90a`), and the manifest's
//! `include` directories and `-D` defines. A trial is reported as ignored, saying why, where
//! libnvrtc or the CUDA headers it needs are not here (`.ci/run` installs both).
use dlrm_bench::backend::cuda::{compile_cuda, compile_cuda_into, nvrtc_version};
use dlrm_bench::candidate::{load_candidate, ModuleSource};
use dlrm_bench::cmd::check::check_candidate;
use dlrm_bench::toolchain::cuda_include;
use std::path::{Path, PathBuf};

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../candidates/examples")
}

/// Why the NVRTC trials cannot run here, if so.
fn no_nvrtc() -> Option<String> {
    nvrtc_version()
        .is_none()
        .then(|| "libnvrtc is not on the loader path (.ci/run installs it)".to_string())
}

/// Why the trials that need the CUDA headers cannot run here, if so.
fn no_headers() -> Option<String> {
    no_nvrtc().or_else(|| {
        let search = cuda_include::current();
        search.found_in.is_none().then(|| {
            format!(
                "no CUDA headers here (.ci/run installs NVIDIA's header wheels): {}",
                search.describe()
            )
        })
    })
}

/// A trial: its name, its function, and what it lacks here (if anything).
type Listed<'a> = (&'static str, fn(), &'a Option<String>);

/// Each trial, reported as ignored (saying why on stderr) where its tools are missing.
fn main() {
    let args = libtest_mimic::Arguments::from_args();
    let (nvrtc, headers) = (no_nvrtc(), no_headers());
    let trials: Vec<Listed> = vec![
        (
            "a_candidate_including_cuda_bf16_h_compiles",
            a_candidate_including_cuda_bf16_h_compiles,
            &headers,
        ),
        (
            "a_cub_candidate_compiles",
            a_cub_candidate_compiles,
            &headers,
        ),
        (
            "the_sm_90a_candidate_compiles_to_compute_90a_ptx",
            the_sm_90a_candidate_compiles_to_compute_90a_ptx,
            &nvrtc,
        ),
        (
            "check_compiles_for_the_arch_the_manifest_names",
            check_compiles_for_the_arch_the_manifest_names,
            &nvrtc,
        ),
        (
            "the_manifests_include_directories_and_defines_reach_nvrtc",
            the_manifests_include_directories_and_defines_reach_nvrtc,
            &nvrtc,
        ),
        (
            "a_missing_cuda_header_lists_the_directories_searched",
            a_missing_cuda_header_lists_the_directories_searched,
            &nvrtc,
        ),
        (
            "ptx_is_compiled_once_into_the_run_s_cache",
            ptx_is_compiled_once_into_the_run_s_cache,
            &nvrtc,
        ),
    ];
    let trials = trials
        .into_iter()
        .map(|(name, f, missing)| {
            if let Some(why) = missing {
                eprintln!("SKIPPED {name}: {why}");
            }
            libtest_mimic::Trial::test(name, move || {
                f();
                Ok(())
            })
            .with_ignored_flag(missing.is_some())
        })
        .collect();
    libtest_mimic::run(&args, trials).exit();
}

/// NVRTC's PTX goes into the run's cache once: a second compile of the same source and flags
/// reads the file (and is much faster), another arch is another file, a compile error leaves
/// none.
fn ptx_is_compiled_once_into_the_run_s_cache() {
    let c = load_candidate(&examples().join("fm_interaction")).unwrap_or_else(|e| panic!("{e}"));
    let ModuleSource::Cuda { file, code, flags } = &c.source else {
        panic!("not CUDA C++")
    };
    let dir = std::env::temp_dir().join(format!("dlrm-bench-ptx-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let timed = |arch: &str| {
        let started = std::time::Instant::now();
        let ptx = compile_cuda_into(file, code, flags, arch, Some(&dir)).unwrap();
        (ptx, started.elapsed())
    };
    let (first, compiling) = timed("compute_90");
    let files = || std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(files(), 1);
    let (again, reading) = timed("compute_90");
    assert_eq!(again, first);
    assert!(
        reading < compiling,
        "read {reading:?}, compiled {compiling:?}"
    );
    let (other, _) = timed("compute_80");
    assert_ne!(other, first);
    assert!(
        other.contains(".target sm_80"),
        "{}",
        &other[..300.min(other.len())]
    );
    assert_eq!(files(), 2);
    let bad = compile_cuda_into(file, "this is not CUDA", flags, "compute_90", Some(&dir));
    assert!(bad.is_err());
    assert_eq!(files(), 2, "a compile error is not cached");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The PTX of the candidate in `dir`, compiled for its manifest's arch (else compute_90).
fn ptx_of(dir: &Path) -> String {
    let c = load_candidate(dir).unwrap_or_else(|e| panic!("{e}"));
    let ModuleSource::Cuda { file, code, flags } = &c.source else {
        panic!("{}: not CUDA C++", dir.display())
    };
    compile_cuda(file, code, flags, "compute_90").unwrap_or_else(|e| panic!("{e}"))
}

fn check(dir: &Path) {
    let lines = check_candidate(dir, "compute_90").unwrap_or_else(|e| panic!("{e}"));
    assert!(lines[0].starts_with("NVRTC: arch "), "{lines:?}");
}

fn a_candidate_including_cuda_bf16_h_compiles() {
    let dir = examples().join("embedding_bag_weighted_sum_bf16/cuda_bf16_intrinsics");
    assert!(std::fs::read_to_string(dir.join("kernel.cu"))
        .unwrap()
        .contains("#include <cuda_bf16.h>"));
    check(&dir);
    assert!(ptx_of(&dir).contains(".entry ebw_bf16_warp_per_bag("));
}

fn a_cub_candidate_compiles() {
    let dir = examples().join("unique_indices/cub_block_sort");
    let code = std::fs::read_to_string(dir.join("kernel.cu")).unwrap();
    for primitive in ["cub::BlockRadixSort", "cub::BlockScan", "cub::BlockReduce"] {
        assert!(code.contains(primitive), "{primitive}");
    }
    check(&dir);
    let ptx = ptx_of(&dir);
    for k in ["cubuq_count", "cubuq_tile_downsweep", "cubuq_inverse"] {
        assert!(ptx.contains(&format!(".entry {k}(")), "{k}");
    }
}

fn the_sm_90a_candidate_compiles_to_compute_90a_ptx() {
    let dir = examples().join("sequence_gather_padded_bf16/bulk_copy_sm90a");
    check(&dir);
    let ptx = ptx_of(&dir);
    assert!(
        ptx.contains(".target sm_90a"),
        "{}",
        &ptx[..ptx.len().min(400)]
    );
    assert!(ptx.contains("cp.async.bulk.shared::cluster.global"));
    assert!(ptx.contains("mbarrier.try_wait.parity"));
    // The same code without the manifest's arch is plain sm_90 PTX (the default).
    let c = load_candidate(&dir).unwrap();
    let ModuleSource::Cuda { file, code, .. } = &c.source else {
        unreachable!()
    };
    let plain = compile_cuda(file, code, &Default::default(), "compute_90").unwrap();
    assert!(plain.contains(".target sm_90\n") || plain.contains(".target sm_90\r"));
}

fn check_compiles_for_the_arch_the_manifest_names() {
    let dir = examples().join("sequence_gather_padded_bf16/bulk_copy_sm90a");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_dlrm-bench"))
        .arg("check")
        .arg(&dir)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("NVRTC: arch sm_90a"), "{out}");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_dlrm-bench"))
        .args(["check", "--arch", "sm_91"])
        .arg(&dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("unknown arch `sm_91`"),
        "{err}"
    );
}

/// A candidate directory under the temporary directory with `files` in it.
fn candidate(tag: &str, manifest: &str, files: &[(&str, &str)]) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dlrm-bench-nvrtc-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    for (name, body) in files {
        let p = d.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }
    std::fs::write(d.join("candidate.toml"), manifest).unwrap();
    d
}

const MANIFEST: &str = r#"
problem = "fm_interaction"
name = "t"
source = "kernel.cu"
EXTRA
[[launch]]
kernel = "k"
grid = [1, 1, 1]
block = [32, 1, 1]
args = ["out"]
"#;

const KERNEL: &str = r#"
#include <tile.cuh>
#if SCALE != 3
#error "the manifest's -DSCALE=3 did not arrive"
#endif
extern "C" __global__ void k(float* out) { out[threadIdx.x] = TILE * SCALE; }
"#;

fn the_manifests_include_directories_and_defines_reach_nvrtc() {
    let files = [("kernel.cu", KERNEL), ("inc/tile.cuh", "#define TILE 7\n")];
    let good = MANIFEST.replace(
        "EXTRA",
        "options = [\"-DSCALE=3\", \"--use_fast_math\"]\ninclude = [\"inc\"]",
    );
    let d = candidate("include", &good, &files);
    check(&d);
    // Without the define, the kernel's #error fires.
    let d = candidate(
        "no-define",
        &MANIFEST.replace("EXTRA", "include = [\"inc\"]"),
        &files,
    );
    let e = check_candidate(&d, "compute_90").unwrap_err();
    assert!(e.contains("did not arrive"), "{e}");
    // Without the include directory the header is missing, and the message lists where the
    // CUDA headers were looked for.
    let d = candidate(
        "no-include",
        &MANIFEST.replace("EXTRA", "options = [\"-DSCALE=3\"]"),
        &files,
    );
    let e = check_candidate(&d, "compute_90").unwrap_err();
    assert!(
        e.contains("tile.cuh") && e.contains("CUDA include directories searched"),
        "{e}"
    );
}

fn a_missing_cuda_header_lists_the_directories_searched() {
    let e = compile_cuda(
        Path::new("missing.cu"),
        "#include <dlrm_bench_no_such_header.h>\nextern \"C\" __global__ void k() {}",
        &Default::default(),
        "compute_90",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("dlrm_bench_no_such_header.h")
            && e.contains("CUDA include directories searched"),
        "{e}"
    );
    let search = cuda_include::current();
    for (_, d) in &search.searched {
        assert!(
            e.contains(&d.display().to_string()),
            "{} not in: {e}",
            d.display()
        );
    }
    match &search.found_in {
        Some(from) => assert!(e.contains(&format!("headers taken from: {from}")), "{e}"),
        None => assert!(
            e.contains("no CUDA headers found") && e.contains("/usr/local/cuda/include"),
            "{e}"
        ),
    }
}
