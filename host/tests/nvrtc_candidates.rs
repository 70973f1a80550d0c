//! CUDA C++ candidates that need more than NVRTC alone, compiled with NVRTC (no GPU): the CUDA
//! headers (`<cuda_bf16.h>`, CUB), an arch-specific target (`sm_90a`), and the manifest's
//! `include` directories and `-D` defines. Each test skips with a printed message when
//! libnvrtc, or the CUDA headers it needs, are not here (`.ci/run` installs both).
use dlrm_bench::backend::cuda::{compile_cuda, nvrtc_version};
use dlrm_bench::candidate::{load_candidate, ModuleSource};
use dlrm_bench::cmd::check::check_candidate;
use dlrm_bench::toolchain::cuda_include;
use std::path::{Path, PathBuf};

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../candidates/examples")
}

fn nvrtc_here() -> bool {
    let here = nvrtc_version().is_some();
    if !here {
        eprintln!("SKIPPED: libnvrtc is not on the loader path (.ci/run installs it)");
    }
    here
}

fn headers_here() -> bool {
    if !nvrtc_here() {
        return false;
    }
    let search = cuda_include::current();
    if search.found_in.is_none() {
        eprintln!(
            "SKIPPED: no CUDA headers here (.ci/run installs NVIDIA's header wheels)\n{}",
            search.describe()
        );
        return false;
    }
    true
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

#[test]
fn a_candidate_including_cuda_bf16_h_compiles() {
    if !headers_here() {
        return;
    }
    let dir = examples().join("embedding_bag_weighted_sum_bf16/cuda_bf16_intrinsics");
    assert!(std::fs::read_to_string(dir.join("kernel.cu"))
        .unwrap()
        .contains("#include <cuda_bf16.h>"));
    check(&dir);
    assert!(ptx_of(&dir).contains(".entry ebw_bf16_warp_per_bag("));
}

#[test]
fn a_cub_candidate_compiles() {
    if !headers_here() {
        return;
    }
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

#[test]
fn the_sm_90a_candidate_compiles_to_compute_90a_ptx() {
    if !nvrtc_here() {
        return;
    }
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

#[test]
fn check_compiles_for_the_arch_the_manifest_names() {
    if !nvrtc_here() {
        return;
    }
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

#[test]
fn the_manifests_include_directories_and_defines_reach_nvrtc() {
    if !nvrtc_here() {
        return;
    }
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

#[test]
fn a_missing_cuda_header_lists_the_directories_searched() {
    if !nvrtc_here() {
        return;
    }
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
