//! The NVRTC settings a CUDA C++ candidate may ask for in `candidate.toml`: `arch` (one of
//! [`ARCHES`]), `options` (the allow-list of [`check_option`]), and how they become NVRTC's
//! command line ([`command_line`]). Modules stay PTX: an `sm_XX` arch compiles to the PTX of
//! `compute_XX` (the same `.target`), which the driver JIT-compiles when it loads it.
use std::path::PathBuf;

/// The architectures a manifest may name, as `sm_XX` (and `compute_XX` alike). `a` is
/// arch-specific (wgmma, TMA, `setmaxnreg` on `sm_90a`: runs on that compute capability only),
/// `f` family-specific (runs on the same major version, that minor or later).
pub const ARCHES: &[&str] = &[
    "75", "80", "86", "87", "89", "90", "90a", "100", "100a", "100f", "103", "103a", "103f", "110",
    "110a", "120", "120a", "120f", "121", "121a",
];

/// The arch compiled for when neither the manifest nor the device says (`check` without a
/// GPU): an H100/H200's.
pub const DEFAULT_ARCH: &str = "compute_90";

/// `compute_XX` for `sm_XX` or `compute_XX` of [`ARCHES`], else `None`.
pub fn ptx_arch(arch: &str) -> Option<String> {
    let v = arch
        .strip_prefix("sm_")
        .or_else(|| arch.strip_prefix("compute_"))?;
    ARCHES.contains(&v).then(|| format!("compute_{v}"))
}

/// What a device of compute capability `cc` can load PTX of `arch` ([`ptx_arch`] form), or why
/// not.
pub(crate) fn runs_on(arch: &str, cc: (i32, i32)) -> Result<(), String> {
    let v = arch
        .trim_start_matches("compute_")
        .trim_start_matches("sm_");
    let (digits, suffix) = v.split_at(v.trim_end_matches(['a', 'f']).len());
    let n: i32 = digits
        .parse()
        .map_err(|_| format!("unknown arch `{arch}`"))?;
    let want = (n / 10, n % 10);
    let ok = match suffix {
        "a" => cc == want,
        "f" => cc.0 == want.0 && cc.1 >= want.1,
        _ => cc >= want,
    };
    if ok {
        return Ok(());
    }
    let needs = match suffix {
        "a" => format!("exactly compute capability {}.{}", want.0, want.1),
        "f" => format!(
            "compute capability {}.{} or a later {}.x",
            want.0, want.1, want.0
        ),
        _ => format!("compute capability {}.{} or later", want.0, want.1),
    };
    Err(format!(
        "`arch = \"{arch}\"` needs {needs}; this device is {}.{}",
        cc.0, cc.1
    ))
}

/// The PTX arch of a device of compute capability `cc`, for a manifest without `arch`.
pub(crate) fn device_arch(cc: Option<(i32, i32)>) -> &'static str {
    match cc {
        Some((9, _)) => "compute_90",
        Some((10, _)) => "compute_100",
        Some((12, _)) => "compute_120",
        Some((8, 9)) => "compute_89",
        Some((8, 6)) => "compute_86",
        Some((8, _)) => "compute_80",
        _ => "compute_75",
    }
}

/// The allowed options, as shown in errors.
pub(crate) const ALLOWED: &str = "-DNAME, -DNAME=VALUE, -UNAME, --use_fast_math, -lineinfo, \
     --fmad=true|false, --ftz=true|false, --prec-div=true|false, --prec-sqrt=true|false, \
     -std=c++17|c++20, --extra-device-vectorization, -maxrregcount=N (16..=255); \
     one flag per string";

fn is_identifier(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

/// Checks one `options` entry against the allow-list; the error says why and what is allowed.
/// Options spelled with one dash or two (`-use_fast_math`, `--std=c++20`) are both taken.
pub(crate) fn check_option(opt: &str) -> Result<(), String> {
    let refuse = |why: &str| Err(format!("`{opt}` {why} (allowed: {ALLOWED})"));
    if let Some(def) = opt.strip_prefix("-D") {
        let (name, value) = def.split_once('=').unwrap_or((def, ""));
        if !is_identifier(name) {
            return refuse("must define a C identifier, written -DNAME or -DNAME=VALUE");
        }
        if value.chars().any(|c| c.is_control()) {
            return refuse("holds a control character");
        }
        return Ok(());
    }
    if let Some(name) = opt.strip_prefix("-U") {
        return if is_identifier(name) {
            Ok(())
        } else {
            refuse("must undefine a C identifier")
        };
    }
    let flag = opt.strip_prefix("--").or_else(|| opt.strip_prefix('-'));
    let Some(flag) = flag else {
        return refuse("is not an option");
    };
    let (key, value) = match flag.split_once('=') {
        Some((k, v)) => (k, Some(v)),
        None => (flag, None),
    };
    if opt.starts_with("-I") || key == "include-path" {
        return refuse("is not allowed: list the directories in `include`");
    }
    if matches!(key, "arch" | "gpu-architecture") {
        return refuse("is not allowed: name it in `arch`");
    }
    let boolean = |v: Option<&str>| matches!(v, Some("true" | "false"));
    let ok = match key {
        "use_fast_math"
        | "use-fast-math"
        | "lineinfo"
        | "generate-line-info"
        | "extra-device-vectorization" => value.is_none(),
        "fmad" | "ftz" | "prec-div" | "prec-sqrt" => boolean(value),
        "std" => matches!(value, Some("c++17" | "c++20")),
        "maxrregcount" => value
            .and_then(|v| v.parse::<u32>().ok())
            .is_some_and(|n| (16..=255).contains(&n)),
        _ => return refuse("is not allowed"),
    };
    if ok {
        Ok(())
    } else {
        refuse("has a value outside the allow-list")
    }
}

/// NVRTC's options for a candidate: `--gpu-architecture`, the candidate's `include`
/// directories, then the CUDA headers' ([`crate::toolchain::cuda_include`]), `--std=c++17` unless the
/// candidate names a standard, and the candidate's options.
pub fn command_line(
    arch: &str,
    candidate_include: &[PathBuf],
    cuda_include: &[PathBuf],
    options: &[String],
) -> Vec<String> {
    let mut out = vec![format!("--gpu-architecture={arch}")];
    for d in candidate_include.iter().chain(cuda_include) {
        out.push(format!("--include-path={}", d.display()));
    }
    let names_std = options
        .iter()
        .any(|o| o.starts_with("-std=") || o.starts_with("--std="));
    if !names_std {
        out.push("--std=c++17".into());
    }
    out.extend(options.iter().cloned());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arches_map_to_their_ptx_form() {
        assert_eq!(ptx_arch("sm_90a"), Some("compute_90a".into()));
        assert_eq!(ptx_arch("compute_90"), Some("compute_90".into()));
        assert_eq!(ptx_arch("sm_100f"), Some("compute_100f".into()));
        for bad in ["sm_91", "90", "sm_90b", "compute_", "SM_90", "sm_90 "] {
            assert_eq!(ptx_arch(bad), None, "{bad}");
        }
    }

    #[test]
    fn arch_specific_code_runs_only_where_it_was_built_for() {
        assert!(runs_on("compute_90a", (9, 0)).is_ok());
        let e = runs_on("compute_90a", (10, 0)).unwrap_err();
        assert!(e.contains("exactly compute capability 9.0"), "{e}");
        assert!(runs_on("compute_90", (10, 0)).is_ok());
        assert!(runs_on("compute_100", (9, 0)).is_err());
        assert!(runs_on("compute_100f", (10, 3)).is_ok());
        assert!(runs_on("compute_100f", (12, 0)).is_err());
        assert_eq!(device_arch(Some((9, 0))), "compute_90");
    }

    #[test]
    fn the_allow_list_takes_its_flags_and_nothing_else() {
        for ok in [
            "-DTILE",
            "-DTILE=128",
            "-D_X=(4*32)",
            "-UNDEBUG",
            "--use_fast_math",
            "-use_fast_math",
            "-lineinfo",
            "--fmad=false",
            "--ftz=true",
            "-std=c++20",
            "--std=c++17",
            "--extra-device-vectorization",
            "-maxrregcount=64",
            "--maxrregcount=255",
        ] {
            check_option(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for (bad, why) in [
            ("-I/usr/include", "`include`"),
            ("--include-path=x", "`include`"),
            ("-arch=sm_90", "`arch`"),
            ("--gpu-architecture=sm_90", "`arch`"),
            ("-D", "C identifier"),
            ("-D1X=2", "C identifier"),
            ("-D X", "C identifier"),
            ("-DX=a\nb", "control"),
            ("--fmad=maybe", "outside"),
            ("-std=c++11", "outside"),
            ("-maxrregcount=8", "outside"),
            ("-maxrregcount=lots", "outside"),
            ("-lineinfo=1", "outside"),
            ("--use_fast_math --fmad=true", "not allowed"),
            ("-G", "not allowed"),
            ("--device-debug", "not allowed"),
            ("-Xptxas", "not allowed"),
            ("--pre-include=x.h", "not allowed"),
            ("kernel.cu", "not an option"),
        ] {
            let e = check_option(bad).unwrap_err();
            assert!(e.contains(why) && e.contains("allowed:"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_command_line_puts_the_candidates_includes_first_and_one_standard() {
        let p = |s: &str| vec![PathBuf::from(s)];
        let cl = command_line("compute_90a", &p("/c/inc"), &p("/cuda/include"), &[]);
        assert_eq!(
            cl,
            [
                "--gpu-architecture=compute_90a",
                "--include-path=/c/inc",
                "--include-path=/cuda/include",
                "--std=c++17"
            ]
        );
        let cl = command_line("compute_90", &[], &[], &["-std=c++20".into()]);
        assert_eq!(cl, ["--gpu-architecture=compute_90", "-std=c++20"]);
    }
}
