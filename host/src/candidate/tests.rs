//! Tests of [`super`].
use super::*;

fn write(dir: &Path, manifest: &str, files: &[(&str, &str)]) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("candidate.toml"), manifest).unwrap();
    for (name, body) in files {
        std::fs::write(dir.join(name), body).unwrap();
    }
}

/// A scratch directory of a test, removed when the test lets it go.
struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tmp(tag: &str) -> Scratch {
    let d = std::env::temp_dir().join(format!("dlrm-bench-cand-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    Scratch(d)
}

#[test]
fn candidate_roots_must_hold_candidates_and_are_made_absolute() {
    let root = tmp("roots");
    let empty = root.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let file = root.join("plain.toml");
    std::fs::write(&file, "x").unwrap();
    let missing = root.join("missing");
    for (bad, why) in [
        (&missing, "cannot read it"),
        (&empty, "no candidate.toml"),
        (&file, "a file, not a directory"),
    ] {
        let e = check_roots(std::slice::from_ref(bad))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("--candidates {}", bad.display())) && e.contains(why),
            "{e}"
        );
    }
    write(&root.join("tree/one"), "problem = \"x\"", &[]);
    let back = check_roots(&[root.join("tree/../tree")]).unwrap();
    assert_eq!(back, [std::fs::canonicalize(root.join("tree")).unwrap()]);
    assert!(back[0].is_absolute());
    std::fs::remove_dir_all(&root).unwrap();
}

const GOOD: &str = r#"
problem = "embedding_bag_sum"
name = "t"
source = "kernel.cu"
[[launch]]
kernel = "k"
grid = ["ceil_div(B * 32, 256)", 1, 1]
block = [256, 1, 1]
args = ["weight", "indices", "offsets", "out", "B", "D"]
"#;

#[test]
fn a_good_manifest_loads() {
    let root = tmp("good");
    let d = root.join("examples").join("t");
    write(
        &d,
        GOOD,
        &[("kernel.cu", "extern \"C\" __global__ void k() {}")],
    );
    let c = load_candidate(&d).unwrap();
    assert_eq!(c.group, "examples");
    let group = |p: &str| candidate_group(Path::new(p), "embedding_bag_sum");
    assert_eq!(
        group("candidates/exploits/embedding_bag_sum/zeros"),
        "exploits"
    );
    assert_eq!(group("candidates/examples/embedding_bag_sum"), "examples");
    assert!(matches!(c.source, ModuleSource::Cuda { .. }));
    assert_eq!(c.launches[0].shared_bytes, bench_problems::Dim::Number(0));
}

#[test]
fn errors_name_the_file_and_the_field() {
    let cases = [
            (
                GOOD.replace("embedding_bag_sum", "no_such_problem"),
                "problem",
            ),
            (
                GOOD.replace("ceil_div(B * 32, 256)", "ceil_div(B * 32,"),
                "launch[0].grid[0]",
            ),
            (
                GOOD.replace("\"B\", \"D\"]", "\"B\", \"Q\"]"),
                "launch[0].args[5]",
            ),
            (GOOD.replace("kernel.cu", "missing.cu"), "source"),
            (
                GOOD.replace("block = [256, 1, 1]", "block = [256, 1, 1]\nblok = 3"),
                "blok",
            ),
            ("problem = 3".to_string(), "problem"),
            // Issue 13: a scratch buffer named like a tensor replaced it as an argument.
            (
                GOOD.replace("[[launch]]", "[[scratch]]\nname = \"out\"\nbytes = 8\n[[launch]]"),
                "scratch[0].name",
            ),
            (
                GOOD.replace("[[launch]]", "[[scratch]]\nname = \"B\"\nbytes = 8\n[[launch]]"),
                "scratch[0].name",
            ),
            (
                GOOD.replace(
                    "[[launch]]",
                    "[[scratch]]\nname = \"t\"\nbytes = 8\n[[scratch]]\nname = \"t\"\nbytes = 8\n[[launch]]",
                ),
                "scratch[1].name",
            ),
        ];
    for (i, (manifest, field)) in cases.iter().enumerate() {
        let d = tmp(&format!("bad{i}"));
        write(&d, manifest, &[("kernel.cu", "")]);
        let e = load_candidate(&d).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("candidate.toml"), "case {i}: {text}");
        assert!(
            text.contains(&format!("field `{field}`")),
            "case {i}: expected field {field} in: {text}"
        );
    }
}

#[test]
fn a_source_outside_the_candidates_directory_is_refused() {
    let root = tmp("source-out");
    let d = root.join("c");
    write(&d, GOOD, &[("kernel.cu", "")]);
    // A file beside the directory, named by `..`, by an absolute path, and through a link.
    std::fs::write(
        root.join("outside.cu"),
        "extern \"C\" __global__ void k() {}",
    )
    .unwrap();
    std::os::unix::fs::symlink(root.join("outside.cu"), d.join("link.cu")).unwrap();
    let outside = root.join("outside.cu").display().to_string();
    for src in [
        "../outside.cu",
        outside.as_str(),
        "sub/../../outside.cu",
        "link.cu",
    ] {
        std::fs::write(d.join("candidate.toml"), GOOD.replace("kernel.cu", src)).unwrap();
        let e = load_candidate(&d).unwrap_err().to_string();
        assert!(
            e.contains("field `source`") && e.contains("leads out of the candidate's directory"),
            "{src}: {e}"
        );
    }
    // A manifest that is a directory is found, and refused naming it.
    let m = root.join("m");
    std::fs::create_dir_all(m.join("candidate.toml")).unwrap();
    assert_eq!(crate::candidate::discover(&root), [d.clone(), m.clone()]);
    let e = load_candidate(&m).unwrap_err().to_string();
    assert!(
        e.contains("m/candidate.toml") && e.contains("cannot read"),
        "{e}"
    );
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn nvrtc_fields_reach_the_source_and_include_is_made_absolute() {
    let d = tmp("nvrtc-fields");
    let text = GOOD.replace(
            "source = \"kernel.cu\"",
            "source = \"kernel.cu\"\narch = \"sm_90a\"\noptions = [\"-DTILE=4\"]\ninclude = [\"inc\", \".\"]",
        );
    write(&d, &text, &[("kernel.cu", "")]);
    std::fs::create_dir_all(d.join("inc")).unwrap();
    let c = load_candidate(&d).unwrap();
    let ModuleSource::Cuda { flags, .. } = &c.source else {
        panic!("{:?}", c.source)
    };
    assert_eq!(flags.arch.as_deref(), Some("sm_90a"));
    assert_eq!(flags.options, ["-DTILE=4"]);
    let root = std::fs::canonicalize(&d).unwrap();
    assert_eq!(flags.include, [root.join("inc"), root.clone()]);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn include_directories_must_exist_inside_and_fields_need_a_cu_source() {
    let d = tmp("nvrtc-bad");
    let with = |line: &str| {
        GOOD.replace(
            "source = \"kernel.cu\"",
            &format!("source = \"kernel.cu\"\n{line}"),
        )
    };
    // A link inside the directory that leads out of it.
    std::fs::create_dir_all(&d).unwrap();
    std::os::unix::fs::symlink(std::env::temp_dir(), d.join("out")).unwrap();
    std::fs::write(d.join("plain"), "").unwrap();
    let cases = [
        (with("include = [\"missing\"]"), "include[0]", "cannot read"),
        (
            with("include = [\".\", \"plain\"]"),
            "include[1]",
            "not a directory",
        ),
        (with("include = [\"out\"]"), "include[0]", "leads out"),
        (with("include = [\"../x\"]"), "include[0]", "leads out"),
        (
            with("arch = \"sm_90a\"").replace("kernel.cu", "kernel.ptx"),
            "arch",
            "only a CUDA C++",
        ),
        (
            with("options = [\"-DX\"]").replace("\"kernel.cu\"", "\"gpu-kernels\""),
            "options",
            "only a CUDA C++",
        ),
    ];
    for (i, (manifest, field, why)) in cases.iter().enumerate() {
        write(&d, manifest, &[("kernel.cu", ""), ("kernel.ptx", "")]);
        let e = load_candidate(&d).unwrap_err().to_string();
        assert!(
            e.contains("candidate.toml")
                && e.contains(&format!("field `{field}`"))
                && e.contains(why),
            "case {i}: {e}"
        );
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn float_scalars_and_data_dependent_sizes_are_valid_arguments() {
    let manifest = r#"
problem = "embedding_backward_rowwise_adagrad"
name = "t"
source = "kernel.cu"
[[launch]]
kernel = "k"
grid = ["ceil_div(N, 256)", 1, 1]
block = [256, 1, 1]
args = ["lr", "eps", "N"]
"#;
    let d = tmp("scalars");
    write(&d, manifest, &[("kernel.cu", "")]);
    load_candidate(&d).unwrap();
    let d = tmp("scalars-bad");
    write(
        &d,
        &manifest.replace("\"eps\"", "\"epsilon\""),
        &[("kernel.cu", "")],
    );
    let e = load_candidate(&d).unwrap_err().to_string();
    assert!(
        e.contains("launch[0].args[1]") && e.contains("epsilon"),
        "{e}"
    );
}

#[test]
fn links_to_a_parent_do_not_loop_and_a_root_named_twice_counts_once() {
    // Issue 13: two links to a parent made discovery hang (one candidate found 41 times).
    let root = tmp("links");
    write(&root.join("a"), "", &[]);
    write(&root.join("b/c"), "", &[]);
    std::os::unix::fs::symlink(&root, root.join("b/up")).unwrap();
    std::os::unix::fs::symlink(root.join("b"), root.join("a/side")).unwrap();
    let found = discover(&root);
    assert_eq!(found, [root.join("a"), root.join("b/c")]);
    let twice = discover_all(&[root.to_path_buf(), root.join("b"), root.to_path_buf()]);
    assert_eq!(twice, [root.join("a"), root.join("b/c")]);
    // A root that is itself a link is read.
    let link = tmp("links-root");
    std::os::unix::fs::symlink(&root, &link).unwrap();
    assert_eq!(discover(&link), [link.join("a"), link.join("b/c")]);
    std::fs::remove_file(&link).unwrap();
    std::fs::remove_dir_all(&root).unwrap();
}

const TRITON: &str = r#"
problem = "fm_interaction"
name = "t"
source = "kernel.py"
[triton]
function = "fm"
[triton.signature]
out = "*fp32"
x = "*fp32"
B = "i32"
[triton.constexprs]
BLOCK = 32
[[launch]]
kernel = "fm"
grid = ["ceil_div(B, 32)"]
args = ["x", "out", "B"]
"#;

const TRITON_PY: &str = "import triton\nimport triton.language as tl\n\n@triton.jit\ndef fm(x,  # the input\n       out, B: int,\n       BLOCK: tl.constexpr = 32):\n    pass\n";

#[test]
fn a_triton_candidate_loads_with_its_signature_in_the_functions_order() {
    let d = tmp("triton");
    write(&d, TRITON, &[("kernel.py", TRITON_PY)]);
    let c = load_candidate(&d).unwrap();
    let ModuleSource::Triton { spec, file } = &c.source else {
        panic!("{:?}", c.source)
    };
    assert!(file.ends_with("kernel.py"));
    let names: Vec<&str> = spec.signature.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["x", "out", "B"]);
    assert_eq!(c.launches[0].block[0], bench_problems::Dim::Number(128));
    assert_eq!(
        python_params("def  g(a, b=(1, 2), *, c: tl.constexpr):", "g").unwrap(),
        ["a", "b", "c"]
    );
    assert!(python_params("x = fm(1)\n", "fm").is_none());
}

#[test]
fn triton_source_errors_name_the_file_and_the_field() {
    let cases = [
        (
            TRITON_PY.replace("def fm(", "def other("),
            "triton.function",
            "defines no function `fm`",
        ),
        (
            TRITON_PY.replace("@triton.jit\n", ""),
            "triton.function",
            "@triton.jit",
        ),
        (
            TRITON_PY.replace("out, B", "out, y, B"),
            "triton.signature",
            "parameter `y`",
        ),
        (
            TRITON_PY.replace(" B: int,", ""),
            "triton.signature.B",
            "no parameter `B`",
        ),
        (
            TRITON_PY.replace("BLOCK: tl.constexpr = 32", "BLK: tl.constexpr"),
            "triton.signature",
            "`BLK`",
        ),
    ];
    for (i, (py, field, want)) in cases.iter().enumerate() {
        let d = tmp(&format!("triton-bad{i}"));
        write(&d, TRITON, &[("kernel.py", py)]);
        let e = load_candidate(&d).unwrap_err().to_string();
        assert!(
            e.contains("candidate.toml")
                && e.contains(&format!("field `{field}`"))
                && e.contains(want),
            "case {i}: {e}"
        );
    }
    let d = tmp("triton-missing");
    write(&d, TRITON, &[]);
    let e = load_candidate(&d).unwrap_err().to_string();
    assert!(
        e.contains("field `source`") && e.contains("kernel.py"),
        "{e}"
    );
}

#[test]
fn a_cubin_is_checked_by_its_magic_and_a_missing_one_says_how_to_build_it() {
    let manifest = GOOD.replace("kernel.cu", "kernel.cubin");
    let d = tmp("cubin-missing");
    write(&d, &manifest, &[]);
    let c = load_candidate(&d).unwrap();
    let ModuleSource::Unavailable { reason, .. } = &c.source else {
        panic!("{:?}", c.source)
    };
    assert!(
        reason.contains("tools/build_cubin.sh") && reason.contains("nvcc"),
        "{reason}"
    );
    let d = tmp("cubin-bad");
    write(
        &d,
        &manifest,
        &[("kernel.cubin", "extern \"C\" __global__ void k() {}")],
    );
    let e = load_candidate(&d).unwrap_err().to_string();
    assert!(
        e.contains("field `source`") && e.contains("neither a cubin"),
        "{e}"
    );
    let mut elf = b"\x7fELF\x02\x01\x01\x33".to_vec();
    elf.resize(18, 0);
    elf.extend_from_slice(&190u16.to_le_bytes());
    elf.resize(64, 0);
    std::fs::write(d.join("kernel.cubin"), &elf).unwrap();
    let c = load_candidate(&d).unwrap();
    assert!(matches!(&c.source, ModuleSource::Binary { image, .. } if image == &elf));
    let fat = GOOD.replace("kernel.cu", "kernel.fatbin");
    write(&d, &fat, &[]);
    std::fs::write(d.join("kernel.fatbin"), 0xBA55_ED50u32.to_le_bytes()).unwrap();
    assert!(matches!(
        load_candidate(&d).unwrap().source,
        ModuleSource::Binary { .. }
    ));
}

#[test]
fn the_shipped_candidates_load() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../candidates");
    let dirs = discover(&root);
    assert!(!dirs.is_empty());
    for d in dirs {
        load_candidate(&d).unwrap_or_else(|e| panic!("{e}"));
    }
}
