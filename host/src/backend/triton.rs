//! Triton candidates: a `@triton.jit` function compiled ahead of time by
//! `tools/triton_compile.py` (in a process of its own, with a time limit, before anything of the
//! candidate is checked or timed), then loaded like any cubin or PTX.
//!
//! This module holds what the manifest's `[triton]` table becomes ([`TritonSpec`]), the rules for
//! its type strings, the JSON the tool answers with ([`Compiled`], parsed by [`parse_answer`]),
//! how a compiled kernel's trailing scratch parameters are sized ([`trailing_args`]), and the
//! tool's command line ([`tool_args`]); running it is [`super::triton_tool`]'s. A leaf of
//! `backend`, like `source`.
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The script that compiles a Triton candidate, relative to the repository root.
pub(crate) const TRITON_COMPILE: &str = "tools/triton_compile.py";
/// The version of the JSON answer this runner reads (`protocol` in the answer).
pub(crate) const PROTOCOL: u32 = 1;
/// Seconds one compilation may take (`DLRM_BENCH_TRITON_TIMEOUT_S` overrides it).
pub(crate) const COMPILE_TIMEOUT_S: f64 = 300.0;
/// Exit status of the tool when Triton (or Python) is not installed: the candidate is skipped.
pub(crate) const EXIT_NO_TRITON: i32 = 3;
/// The start of the message of a candidate skipped for want of Triton.
pub(crate) const NO_TRITON: &str = "triton is not installed";

/// A Triton candidate's `[triton]` table, checked.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TritonSpec {
    /// The `@triton.jit` function (and the kernel every launch names).
    pub function: String,
    /// Type string of each parameter passed at launch (`*fp32`, `i64`, ...), by name.
    pub signature: Vec<(String, String)>,
    /// Value of each `tl.constexpr` parameter (compiled in; not passed at launch), by name.
    pub constexprs: Vec<(String, i64)>,
    pub num_warps: u32,
    pub num_stages: u32,
}

impl TritonSpec {
    /// Threads per block: `num_warps` × 32, as Triton's launcher uses.
    pub(crate) fn block_threads(&self) -> u32 {
        self.num_warps * 32
    }
}

/// Triton's defaults on NVIDIA GPUs.
pub(crate) const DEFAULT_NUM_WARPS: u32 = 4;
pub(crate) const DEFAULT_NUM_STAGES: u32 = 3;

/// Element types a pointer parameter may point to.
const POINTEE: &[&str] = &[
    "i1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "fp8e4nv", "fp8e5", "fp16", "bf16",
    "fp32", "fp64",
];
/// Scalar types a parameter may have, with their byte widths (the launch plan passes 4- and
/// 8-byte scalars only).
const SCALARS: &[(&str, usize)] = &[("i32", 4), ("u32", 4), ("fp32", 4), ("i64", 8), ("u64", 8)];

/// The byte width of a parameter of Triton type `ty` (`*fp32` → 8, `i32` → 4), or why the type
/// is not one a candidate may use.
pub(crate) fn param_width(ty: &str) -> Result<usize, String> {
    if let Some(pointee) = ty.strip_prefix('*') {
        // `*k` marks a pointer to constant memory in some Triton versions.
        let pointee = pointee.strip_prefix('k').unwrap_or(pointee);
        return if POINTEE.contains(&pointee) {
            Ok(8)
        } else {
            Err(format!(
                "`{ty}` is not a Triton pointer type (`*` then one of: {})",
                POINTEE.join(", ")
            ))
        };
    }
    if ty == "constexpr" {
        return Err("`constexpr`: give a constexpr's value in [triton.constexprs], not its type in the signature".into());
    }
    SCALARS
        .iter()
        .find(|(name, _)| *name == ty)
        .map(|&(_, w)| w)
        .ok_or_else(|| {
            let scalars: Vec<&str> = SCALARS.iter().map(|(n, _)| *n).collect();
            format!(
                "`{ty}` is not a Triton type a launch can pass (a pointer such as `*fp32`, or one of: {})",
                scalars.join(", ")
            )
        })
}

/// One trailing scratch parameter of a compiled kernel (`global_scratch`, `profile_scratch`):
/// bytes per program (block) and alignment, as Triton's metadata gives them.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct TrailingScratch {
    pub name: String,
    pub size: u64,
    pub align: u64,
}

/// A parameter passed at launch, in order (constexprs excluded).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct Param {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: String,
}

/// What `tools/triton_compile.py` answers for a compiled kernel (its docstring has the format).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compiled {
    pub kernel: String,
    pub params: Vec<Param>,
    pub num_warps: u32,
    pub num_ctas: u32,
    /// Dynamic shared memory every launch needs, in bytes.
    pub shared: u32,
    /// The trailing pointer parameters after the launch parameters, in order.
    pub scratch: Vec<TrailingScratch>,
    pub cubin: Option<Vec<u8>>,
    pub ptx: Option<String>,
    pub triton_version: String,
}

#[derive(Deserialize)]
struct Answer {
    ok: bool,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    protocol: Option<u32>,
    #[serde(default)]
    kernel: Option<String>,
    #[serde(default)]
    params: Vec<Param>,
    #[serde(default)]
    num_warps: Option<u32>,
    #[serde(default)]
    num_ctas: Option<u32>,
    #[serde(default)]
    shared: Option<u32>,
    #[serde(default)]
    scratch: Vec<TrailingScratch>,
    #[serde(default)]
    cubin_base64: Option<String>,
    #[serde(default)]
    ptx: Option<String>,
    #[serde(default)]
    triton_version: Option<String>,
    #[serde(default)]
    launch_cooperative_grid: bool,
    #[serde(default)]
    launch_pdl: bool,
}

/// Why a compilation gave no kernel: Triton is missing (the candidate is skipped), or the
/// compilation failed (a compile error, with the tool's log).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CompileFailure {
    /// No Python or no Triton here: the candidate is skipped.
    NoTriton(String),
    /// Not compiled for want of a sandbox ([`super::triton_tool::WeakSandbox`]): skipped.
    Refused(String),
    /// Triton or the tool refused it: a compile error.
    Failed(String),
}

/// Parses the tool's JSON answer and checks it against what the runner can launch: the
/// protocol version, a kernel with cubin or PTX, one CTA per program, no cooperative or PDL
/// launch, scratch alignments that are powers of two.
pub(crate) fn parse_answer(json: &str) -> Result<Compiled, CompileFailure> {
    let failed = |m: String| CompileFailure::Failed(m);
    let a: Answer = serde_json::from_str(json.trim()).map_err(|e| {
        failed(format!(
            "{TRITON_COMPILE} answered what is not its JSON ({e})"
        ))
    })?;
    if !a.ok {
        let error = a.error.unwrap_or_else(|| "no reason given".into());
        return Err(if error.starts_with(NO_TRITON) {
            CompileFailure::NoTriton(error)
        } else {
            failed(error)
        });
    }
    if a.protocol != Some(PROTOCOL) {
        return Err(failed(format!(
            "{TRITON_COMPILE} speaks protocol {:?}, this runner reads {PROTOCOL}",
            a.protocol
        )));
    }
    let kernel = a
        .kernel
        .filter(|k| !k.is_empty())
        .ok_or_else(|| failed("the answer names no kernel".into()))?;
    let cubin = a
        .cubin_base64
        .map(|b| decode_base64(&b).ok_or_else(|| failed("`cubin_base64` is not base64".into())))
        .transpose()?;
    if cubin.is_none() && a.ptx.is_none() {
        return Err(failed("the answer holds neither a cubin nor PTX".into()));
    }
    let num_ctas = a.num_ctas.unwrap_or(1);
    if num_ctas != 1 {
        return Err(failed(format!(
            "the kernel was compiled for clusters of {num_ctas} CTAs; the runner launches one CTA per program (num_ctas = 1)"
        )));
    }
    if a.launch_cooperative_grid || a.launch_pdl {
        return Err(failed(
            "the kernel needs a cooperative or programmatic-dependent launch, which the runner does not make".into(),
        ));
    }
    if let Some(s) = a.scratch.iter().find(|s| !s.align.is_power_of_two()) {
        return Err(failed(format!(
            "{}: alignment {} is not a power of two",
            s.name, s.align
        )));
    }
    Ok(Compiled {
        kernel,
        params: a.params,
        num_warps: a
            .num_warps
            .ok_or_else(|| failed("the answer gives no num_warps".into()))?,
        num_ctas,
        shared: a.shared.unwrap_or(0),
        scratch: a.scratch,
        cubin,
        ptx: a.ptx,
        triton_version: a.triton_version.unwrap_or_default(),
    })
}

/// Checks the compiled kernel against the manifest: the parameters passed at launch are the
/// signature's, in the function's order (the tool gives it), and the warps are the manifest's.
pub(crate) fn check_against(spec: &TritonSpec, c: &Compiled) -> Result<(), String> {
    if c.num_warps != spec.num_warps {
        return Err(format!(
            "compiled with num_warps = {}, the manifest says {}",
            c.num_warps, spec.num_warps
        ));
    }
    let mut want: Vec<&str> = spec.signature.iter().map(|(n, _)| n.as_str()).collect();
    let mut got: Vec<&str> = c.params.iter().map(|p| p.name.as_str()).collect();
    want.sort_unstable();
    got.sort_unstable();
    if want != got {
        return Err(format!(
            "the compiled kernel takes {got:?}, the signature names {want:?}"
        ));
    }
    Ok(())
}

/// The words a launch of a compiled kernel passes after its plan's arguments: for each
/// trailing scratch parameter, null when its size is 0, else the address of a buffer of size ×
/// programs (grid x·y·z) bytes, which `alloc(bytes, name)` provides (as Triton's launcher
/// allocates `grid_size * num_ctas * size` bytes through its allocator).
pub(crate) fn trailing_args(
    scratch: &[TrailingScratch],
    grid: [u32; 3],
    alloc: &mut dyn FnMut(usize, &TrailingScratch) -> Result<u64, String>,
) -> Result<Vec<u64>, String> {
    let programs: u64 = grid.iter().map(|&g| g as u64).product();
    scratch
        .iter()
        .map(|s| {
            if s.size == 0 {
                return Ok(0);
            }
            let bytes = s
                .size
                .checked_mul(programs)
                .and_then(|b| usize::try_from(b).ok())
                .ok_or_else(|| {
                    format!(
                        "{}: {} bytes per program × {programs} programs overflows",
                        s.name, s.size
                    )
                })?;
            alloc(bytes, s)
        })
        .collect()
}

/// Standard base64 (with or without padding; whitespace ignored), or `None` if it is not.
pub(crate) fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let digits: Vec<u8> = text.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    let body = digits
        .iter()
        .rposition(|&c| c != b'=')
        .map_or(&digits[..0], |end| &digits[..=end]);
    if digits.len() - body.len() > 2 || body.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(body.len() * 3 / 4);
    for chunk in body.chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= value(c)? << (18 - 6 * i);
        }
        let bytes = acc.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Some(out)
}

/// The tool's path: `tools/triton_compile.py` under the working directory (the repository
/// root, as for the PyTorch peer), else under the repository this binary was built from.
pub(crate) fn tool_path() -> PathBuf {
    let here = PathBuf::from(TRITON_COMPILE);
    if here.is_file() {
        // Absolute: the tool runs with its scratch directory as working directory.
        return std::path::absolute(&here).unwrap_or(here);
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(TRITON_COMPILE)
}

/// The Python that runs the tool: `DLRM_BENCH_PYTHON`, else `python3`.
pub(crate) fn python() -> String {
    std::env::var("DLRM_BENCH_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// The tool's command line for `spec` of `file` and target `arch` (e.g. 90).
pub(crate) fn tool_args(file: &Path, spec: &TritonSpec, arch: u32) -> Vec<String> {
    let map = |entries: Vec<(String, serde_json::Value)>| {
        serde_json::Value::Object(entries.into_iter().collect()).to_string()
    };
    let signature = map(spec
        .signature
        .iter()
        .map(|(n, t)| (n.clone(), t.clone().into()))
        .collect());
    let constexprs = map(spec
        .constexprs
        .iter()
        .map(|(n, v)| (n.clone(), (*v).into()))
        .collect());
    vec![
        tool_path().display().to_string(),
        "--source".into(),
        file.display().to_string(),
        "--function".into(),
        spec.function.clone(),
        "--signature".into(),
        signature,
        "--constexprs".into(),
        constexprs,
        "--num-warps".into(),
        spec.num_warps.to_string(),
        "--num-stages".into(),
        spec.num_stages.to_string(),
        "--arch".into(),
        arch.to_string(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer recorded from `tools/triton_compile.py` (Triton 3.5 layout: both scratch
    /// parameters declared), trimmed: the cubin is the first bytes of an ELF.
    pub(crate) const RECORDED: &str = r#"{"ok": true, "tool": "triton_compile", "protocol": 1,
      "triton_version": "3.5.1", "target": "cuda:90", "kernel": "ebs_triton",
      "params": [{"name": "weight", "type": "*fp32"}, {"name": "indices", "type": "*i64"},
                 {"name": "offsets", "type": "*i64"}, {"name": "out", "type": "*fp32"},
                 {"name": "B", "type": "i64"}, {"name": "D", "type": "i64"}],
      "constexprs": {"BLOCK_D": 128}, "num_warps": 4, "num_stages": 3, "num_ctas": 1,
      "shared": 0, "launch_cooperative_grid": false, "launch_pdl": false,
      "scratch": [{"name": "global_scratch", "size": 0, "align": 1},
                  {"name": "profile_scratch", "size": 0, "align": 1}],
      "cubin_base64": "f0VMRgIBATMHAAAAAAAAAAIAvgABAAAA",
      "ptx": ".version 8.7\n.target sm_90a\n.address_size 64\n.visible .entry ebs_triton(\n\t.param .u64 .ptr .global .align 1 ebs_triton_param_0,\n\t.param .u64 .ptr .global .align 1 ebs_triton_param_1,\n\t.param .u64 .ptr .global .align 1 ebs_triton_param_2,\n\t.param .u64 .ptr .global .align 1 ebs_triton_param_3,\n\t.param .u64 ebs_triton_param_4,\n\t.param .u64 ebs_triton_param_5,\n\t.param .u64 .ptr .global .align 1 ebs_triton_param_6,\n\t.param .u64 .ptr .global .align 1 ebs_triton_param_7\n)\n{\n\tret;\n}\n"}"#;

    #[test]
    fn a_recorded_answer_parses() {
        let c = parse_answer(RECORDED).unwrap();
        assert_eq!(c.kernel, "ebs_triton");
        assert_eq!(c.params.len(), 6);
        assert_eq!(c.params[4].ty, "i64");
        assert_eq!(c.scratch.len(), 2);
        assert_eq!(c.scratch[1].name, "profile_scratch");
        assert_eq!(&c.cubin.as_ref().unwrap()[..4], b"\x7fELF");
        assert_eq!(
            super::super::binary::check_image(c.cubin.as_ref().unwrap()),
            Ok(super::super::binary::Kind::Cubin)
        );
        let ptx = c.ptx.as_deref().unwrap();
        let params = super::super::ptx_params::entry_params(ptx, &c.kernel).unwrap();
        assert_eq!(params.len(), c.params.len() + c.scratch.len());
        // Triton 3.0 and 3.1 declare no scratch, 3.2 to 3.4 one: the answer says which.
        let old = RECORDED.replace(
            r#""scratch": [{"name": "global_scratch", "size": 0, "align": 1},
                  {"name": "profile_scratch", "size": 0, "align": 1}],"#,
            "",
        );
        assert!(parse_answer(&old).unwrap().scratch.is_empty());
    }

    #[test]
    fn a_real_answer_of_triton_3_5_parses_and_its_ptx_has_the_trailing_pointers() {
        // Recorded from `tools/triton_compile.py` with Triton 3.5.1 (target cuda:90) on the
        // fm_interaction example (candidates/examples/fm_interaction/triton_fused).
        let text = include_str!("../../tests/data/triton_answer_fm_interaction.json");
        let c = parse_answer(text).unwrap();
        assert_eq!(c.kernel, "fm_triton");
        assert_eq!(c.num_warps, 4);
        let names: Vec<&str> = c.params.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["x", "out", "B", "F", "K"]);
        let scratch: Vec<&str> = c.scratch.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(scratch, ["global_scratch", "profile_scratch"]);
        assert_eq!(
            super::super::binary::check_image(c.cubin.as_ref().unwrap()),
            Ok(super::super::binary::Kind::Cubin)
        );
        let ptx = super::super::ptx_params::entry_params(c.ptx.as_ref().unwrap(), &c.kernel);
        assert_eq!(ptx, Some(vec![8, 8, 4, 4, 4, 8, 8]));
    }

    #[test]
    fn answers_the_runner_cannot_launch_are_refused() {
        let failed = |text: &str| match parse_answer(text) {
            Err(CompileFailure::Failed(m)) => m,
            other => panic!("{other:?}"),
        };
        assert!(
            failed(&RECORDED.replace("\"num_ctas\": 1", "\"num_ctas\": 2")).contains("num_ctas")
        );
        assert!(
            failed(&RECORDED.replace("\"protocol\": 1", "\"protocol\": 9")).contains("protocol")
        );
        assert!(
            failed(&RECORDED.replace("\"launch_pdl\": false", "\"launch_pdl\": true"))
                .contains("programmatic")
        );
        assert!(
            failed(&RECORDED.replace("\"align\": 1}]", "\"align\": 3}]")).contains("power of two")
        );
        assert!(failed("not json").contains("not its JSON"));
        let err = r#"{"ok": false, "error": "kernel.py:3: NameError: name 'tl' is not defined"}"#;
        assert!(failed(err).contains("NameError"));
        let none =
            r#"{"ok": false, "error": "triton is not installed (No module named 'triton')"}"#;
        assert!(matches!(
            parse_answer(none),
            Err(CompileFailure::NoTriton(_))
        ));
    }

    #[test]
    fn type_strings_have_widths_or_say_what_is_allowed() {
        assert_eq!(param_width("*fp32"), Ok(8));
        assert_eq!(param_width("*kbf16"), Ok(8));
        assert_eq!(param_width("i32"), Ok(4));
        assert_eq!(param_width("i64"), Ok(8));
        assert_eq!(param_width("fp32"), Ok(4));
        for bad in [
            "*float",
            "int",
            "fp16",
            "",
            "*",
            "constexpr",
            "tensordesc<fp32[16]>",
        ] {
            let e = param_width(bad).unwrap_err();
            assert!(
                e.contains(&format!("`{bad}`")) || bad == "constexpr",
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn trailing_scratch_is_null_or_sized_per_program() {
        let s = |name: &str, size| TrailingScratch {
            name: name.into(),
            size,
            align: 16,
        };
        let mut asked = Vec::new();
        let mut alloc = |bytes: usize, t: &TrailingScratch| {
            asked.push((bytes, t.name.clone()));
            Ok(0x1000 + bytes as u64)
        };
        let words = trailing_args(
            &[s("global_scratch", 96), s("profile_scratch", 0)],
            [10, 2, 3],
            &mut alloc,
        )
        .unwrap();
        assert_eq!(words, vec![0x1000 + 96 * 60, 0]);
        assert_eq!(asked, vec![(96 * 60, "global_scratch".to_string())]);
        let mut never = |_: usize, _: &TrailingScratch| -> Result<u64, String> { panic!() };
        assert_eq!(
            trailing_args(&[], [5, 1, 1], &mut never).unwrap(),
            Vec::<u64>::new()
        );
        assert!(trailing_args(&[s("g", u64::MAX)], [2, 1, 1], &mut never)
            .unwrap_err()
            .contains("overflows"));
    }

    #[test]
    fn base64_round_trips() {
        assert_eq!(decode_base64("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(decode_base64("aGVsbG8").unwrap(), b"hello");
        assert_eq!(decode_base64("aGVs\nbG8h").unwrap(), b"hello!");
        assert_eq!(decode_base64("").unwrap(), b"");
        assert!(decode_base64("a$==").is_none());
        assert!(decode_base64("a").is_none());
    }

    #[test]
    fn the_manifest_and_the_compiled_kernel_must_agree() {
        let c = parse_answer(RECORDED).unwrap();
        let names = ["weight", "indices", "offsets", "out", "B", "D"];
        let mut spec = TritonSpec {
            function: "ebs_triton".into(),
            signature: names
                .iter()
                .map(|n| (n.to_string(), "*fp32".to_string()))
                .collect(),
            constexprs: vec![("BLOCK_D".into(), 128)],
            num_warps: 4,
            num_stages: 3,
        };
        check_against(&spec, &c).unwrap();
        spec.num_warps = 8;
        assert!(check_against(&spec, &c).unwrap_err().contains("num_warps"));
        spec.num_warps = 4;
        spec.signature.pop();
        assert!(check_against(&spec, &c).unwrap_err().contains("takes"));
    }
}
