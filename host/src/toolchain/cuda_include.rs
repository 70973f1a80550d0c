//! Where NVRTC finds the CUDA headers (`cuda_runtime.h`, `cuda_bf16.h`, CUB, Thrust, libcu++):
//! NVRTC ships none of them, so a candidate that includes one needs the directories on its
//! include path. They are found, in this order:
//!
//! 1. every directory of `DLRM_BENCH_CUDA_INCLUDE` (colon-separated), always, first; when one
//!    of them holds `cuda_runtime.h`, they are the whole list;
//! 2. else the first of these that holds `cuda_runtime.h`, with its CCCL directory when it has
//!    one (CUDA 13 keeps CUB, Thrust and libcu++ in `include/cccl`):
//!    - a toolkit: `$CUDA_HOME`, `$CUDA_PATH`, `/usr/local/cuda` (`include`, `include/cccl`);
//!    - NVIDIA's PyPI header wheels next to the libnvrtc that was loaded (its directory `lib`
//!      and the `LD_LIBRARY_PATH` directories holding a libnvrtc): `lib/../include` and
//!      `lib/../include/cccl` (the cu13 wheels `nvidia-cuda-runtime`, `nvidia-cuda-cccl` and
//!      `nvidia-cuda-crt` unpack to `nvidia/cu13/include`, `.../include/cccl` and
//!      `.../include/crt`, beside `nvidia/cu13/lib`; a toolkit's `lib64` works the same way),
//!      and the cu12 layout `nvidia/cuda_runtime/include`, `nvidia/cuda_cccl/include` beside
//!      `nvidia/cuda_nvrtc/lib`;
//!    - the same wheels in Python's site-packages (`$VIRTUAL_ENV`, `$CONDA_PREFIX`,
//!      `~/.local`, `/usr/local`, `/usr`: `lib/python3*/site-packages` and `dist-packages`, and
//!      Debian's `/usr/lib/python3/dist-packages`).
//!
//! Headers of one location only are used: mixing two CUDA versions' headers breaks in
//! confusing ways. `include/crt` is never put on the path itself (its `math_functions.h` and
//! `host_config.h` would shadow the real ones): `cuda_runtime.h` includes `crt/...` through
//! `include`. [`search`] works on a [`SearchEnv`], so the tests run it over fake trees.
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The environment variable of extra include directories (colon-separated), searched first.
pub(crate) const ENV_VAR: &str = "DLRM_BENCH_CUDA_INCLUDE";

/// What the search reads: environment variables, the default toolkit, the directories of the
/// libnvrtc in use, the Python prefixes. [`SearchEnv::current`] is this process's.
#[derive(Clone, Debug, Default)]
pub struct SearchEnv {
    /// `DLRM_BENCH_CUDA_INCLUDE`.
    pub extra: Option<String>,
    pub cuda_home: Option<PathBuf>,
    pub cuda_path: Option<PathBuf>,
    /// `/usr/local/cuda`.
    pub default_install: PathBuf,
    /// Directories holding the libnvrtc that was loaded (or that would be).
    pub nvrtc_dirs: Vec<PathBuf>,
    /// Prefixes whose `lib/python3*/{site,dist}-packages` are searched, in order.
    pub python_prefixes: Vec<PathBuf>,
    /// Site-packages directories searched as they are (after those of the prefixes).
    pub site_packages: Vec<PathBuf>,
}

impl SearchEnv {
    /// This process's environment.
    pub fn current() -> Self {
        let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        let path = |k: &str| var(k).map(PathBuf::from);
        let mut python_prefixes: Vec<PathBuf> = ["VIRTUAL_ENV", "CONDA_PREFIX"]
            .iter()
            .filter_map(|k| path(k))
            .collect();
        if let Some(home) = path("HOME") {
            python_prefixes.push(home.join(".local"));
        }
        python_prefixes.extend([PathBuf::from("/usr/local"), PathBuf::from("/usr")]);
        SearchEnv {
            extra: var(ENV_VAR).map(|v| v.to_string_lossy().into_owned()),
            cuda_home: path("CUDA_HOME"),
            cuda_path: path("CUDA_PATH"),
            default_install: PathBuf::from("/usr/local/cuda"),
            nvrtc_dirs: nvrtc_dirs(),
            python_prefixes,
            site_packages: vec![PathBuf::from("/usr/lib/python3/dist-packages")],
        }
    }
}

/// Where the headers were looked for and what was found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IncludeSearch {
    /// The directories to pass to NVRTC, in order.
    pub dirs: Vec<PathBuf>,
    /// Which location they came from (`CUDA_HOME`, `next to libnvrtc`, ...), when one had the
    /// headers.
    pub found_in: Option<String>,
    /// Every directory looked at, with where it came from, for the message of a missing header.
    pub searched: Vec<(String, PathBuf)>,
}

impl IncludeSearch {
    /// The lines appended to a missing-header compile error.
    pub fn describe(&self) -> String {
        let mut s = String::from("CUDA include directories searched (first match wins):\n");
        for (from, dir) in &self.searched {
            let mark = if self.dirs.contains(dir) {
                "used"
            } else if dir.is_dir() {
                "no cuda_runtime.h"
            } else {
                "missing"
            };
            s.push_str(&format!("  {} ({from}; {mark})\n", dir.display()));
        }
        match &self.found_in {
            Some(f) => s.push_str(&format!("headers taken from: {f}\n")),
            None => s.push_str(
                "no CUDA headers found: set CUDA_HOME, install the toolkit, or unpack the \
                 nvidia-cuda-runtime, nvidia-cuda-cccl and nvidia-cuda-crt wheels next to \
                 libnvrtc (as .ci/run does), or name the directories in DLRM_BENCH_CUDA_INCLUDE\n",
            ),
        }
        s
    }
}

/// One place that may hold the headers: its main directory (which must hold
/// `cuda_runtime.h`) and the directories used with it when they exist.
struct Location {
    from: String,
    main: PathBuf,
    with: Vec<PathBuf>,
}

fn toolkit(from: &str, root: &Path) -> Location {
    Location {
        from: from.into(),
        main: root.join("include"),
        with: vec![root.join("include/cccl")],
    }
}

/// The wheels' layouts under `nvidia/` (site-packages, or the directory above a wheel's lib).
fn wheels(from: &str, nvidia: &Path) -> [Location; 2] {
    [
        Location {
            from: format!("{from}, cu13 wheels"),
            main: nvidia.join("cu13/include"),
            with: vec![nvidia.join("cu13/include/cccl")],
        },
        Location {
            from: format!("{from}, cu12 wheels"),
            main: nvidia.join("cuda_runtime/include"),
            with: vec![nvidia.join("cuda_cccl/include")],
        },
    ]
}

/// `prefix/lib/python3*/{site,dist}-packages`, sorted by name (newest Python last).
fn site_packages_of(prefix: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for lib in ["lib", "lib64"] {
        let Ok(entries) = std::fs::read_dir(prefix.join(lib)) else {
            continue;
        };
        let mut pythons: Vec<PathBuf> = entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
            .map(|e| e.path())
            .collect();
        pythons.sort();
        for py in pythons {
            for sp in ["site-packages", "dist-packages"] {
                if py.join(sp).is_dir() {
                    found.push(py.join(sp));
                }
            }
        }
    }
    found
}

/// Searches `env` in the order of the module's documentation.
pub fn search(env: &SearchEnv) -> IncludeSearch {
    let mut out = IncludeSearch::default();
    for d in env.extra.iter().flat_map(|v| v.split(':')) {
        if d.is_empty() {
            continue;
        }
        let d = PathBuf::from(d);
        out.searched.push((ENV_VAR.into(), d.clone()));
        if d.is_dir() {
            if out.found_in.is_none() && d.join("cuda_runtime.h").is_file() {
                out.found_in = Some(ENV_VAR.into());
            }
            out.dirs.push(d);
        }
    }
    if out.found_in.is_some() {
        // The variable names a toolkit's headers: no second one is mixed in.
        return out;
    }
    let mut locations = Vec::new();
    if let Some(r) = &env.cuda_home {
        locations.push(toolkit("CUDA_HOME", r));
    }
    if let Some(r) = &env.cuda_path {
        locations.push(toolkit("CUDA_PATH", r));
    }
    locations.push(toolkit("the default install", &env.default_install));
    for lib in &env.nvrtc_dirs {
        let from = format!("next to libnvrtc in {}", lib.display());
        let Some(parent) = lib.parent() else { continue };
        locations.push(Location {
            from: from.clone(),
            main: parent.join("include"),
            with: vec![parent.join("include/cccl")],
        });
        // cu12: nvidia/cuda_nvrtc/lib beside nvidia/cuda_runtime and nvidia/cuda_cccl.
        if let Some(nvidia) = parent.parent() {
            let [_, cu12] = wheels(&from, nvidia);
            locations.push(cu12);
        }
    }
    let mut sites: Vec<PathBuf> = env
        .python_prefixes
        .iter()
        .flat_map(|p| site_packages_of(p))
        .collect();
    sites.extend(env.site_packages.iter().cloned());
    for sp in sites {
        let from = format!("site-packages {}", sp.display());
        locations.extend(wheels(&from, &sp.join("nvidia")));
    }
    for loc in locations {
        if out.searched.iter().any(|(_, d)| *d == loc.main) {
            continue;
        }
        out.searched.push((loc.from.clone(), loc.main.clone()));
        if out.found_in.is_none() && loc.main.join("cuda_runtime.h").is_file() {
            out.dirs.push(loc.main.clone());
            for w in &loc.with {
                out.searched.push((loc.from.clone(), w.clone()));
                if w.is_dir() {
                    out.dirs.push(w.clone());
                }
            }
            out.found_in = Some(loc.from);
        }
    }
    out
}

/// The directories of the libnvrtc this process has loaded (from `/proc/self/maps`), then
/// those of `LD_LIBRARY_PATH` that hold a `libnvrtc.so*`, each once.
fn nvrtc_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut add = |d: PathBuf| {
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    };
    if let Ok(maps) = std::fs::read_to_string("/proc/self/maps") {
        for line in maps.lines() {
            let Some(p) = line.split_whitespace().nth(5) else {
                continue;
            };
            let p = Path::new(p);
            let is_nvrtc = p
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("libnvrtc.so"));
            if let (true, Some(d)) = (is_nvrtc, p.parent()) {
                add(d.to_path_buf());
            }
        }
    }
    for d in std::env::var("LD_LIBRARY_PATH")
        .unwrap_or_default()
        .split(':')
        .filter(|d| !d.is_empty())
    {
        let holds = std::fs::read_dir(d).is_ok_and(|entries| {
            entries
                .flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("libnvrtc.so"))
        });
        if holds {
            // The directory as named: a link farm beside the headers keeps its layout.
            add(PathBuf::from(d));
        }
    }
    dirs
}

/// This process's search, done once (after libnvrtc is loaded, so that its directory counts).
pub fn current() -> &'static IncludeSearch {
    static SEARCH: OnceLock<IncludeSearch> = OnceLock::new();
    SEARCH.get_or_init(|| search(&SearchEnv::current()))
}

/// Whether an NVRTC log says a header could not be opened.
pub(crate) fn is_missing_header(log: &str) -> bool {
    log.contains("open source file")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory under the system's temporary directory.
    fn tmp(tag: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("dlrm-bench-include-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// Makes `root/rel` with a `cuda_runtime.h` in it.
    fn headers(root: &Path, rel: &str) -> PathBuf {
        let d = root.join(rel);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("cuda_runtime.h"), "").unwrap();
        d
    }

    fn dir(root: &Path, rel: &str) -> PathBuf {
        let d = root.join(rel);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn env(root: &Path) -> SearchEnv {
        SearchEnv {
            default_install: root.join("usr/local/cuda"),
            ..Default::default()
        }
    }

    #[test]
    fn nothing_found_says_so_and_lists_where_it_looked() {
        let root = tmp("none");
        let s = search(&env(&root));
        assert!(s.dirs.is_empty() && s.found_in.is_none());
        let text = s.describe();
        assert!(text.contains("usr/local/cuda/include") && text.contains("missing"));
        assert!(text.contains("no CUDA headers found") && text.contains(ENV_VAR));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn the_toolkits_come_in_order_cuda_home_cuda_path_default() {
        let root = tmp("toolkits");
        let home = root.join("home");
        let path = root.join("path");
        let mut e = env(&root);
        e.cuda_home = Some(home.clone());
        e.cuda_path = Some(path.clone());
        let default = headers(&root, "usr/local/cuda/include");
        assert_eq!(search(&e).dirs, std::slice::from_ref(&default));
        let p = headers(&path, "include");
        let cccl = dir(&path, "include/cccl");
        assert_eq!(search(&e).dirs, [p.clone(), cccl]);
        assert_eq!(search(&e).found_in.as_deref(), Some("CUDA_PATH"));
        let h = headers(&home, "include");
        let s = search(&e);
        assert_eq!(s.dirs, std::slice::from_ref(&h));
        assert_eq!(s.found_in.as_deref(), Some("CUDA_HOME"));
        // Every location is still listed for the message, the losers too.
        let listed: Vec<&PathBuf> = s.searched.iter().map(|(_, d)| d).collect();
        assert!(listed.contains(&&p) && listed.contains(&&default), "{s:?}");
        // A CUDA_HOME without headers is passed over.
        std::fs::remove_file(h.join("cuda_runtime.h")).unwrap();
        assert_eq!(search(&e).found_in.as_deref(), Some("CUDA_PATH"));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn the_env_var_comes_first_and_keeps_every_existing_directory() {
        let root = tmp("envvar");
        let a = dir(&root, "a");
        let b = dir(&root, "b");
        let tk = headers(&root, "usr/local/cuda/include");
        let mut e = env(&root);
        e.extra = Some(format!(
            "{}::{}:{}",
            a.display(),
            root.join("gone").display(),
            b.display()
        ));
        let s = search(&e);
        assert_eq!(s.dirs, [a.clone(), b.clone(), tk]);
        assert!(s
            .searched
            .iter()
            .any(|(from, d)| from == ENV_VAR && d.ends_with("gone")));
        // Directories of the variable that hold the headers are the whole list: no second
        // toolkit is mixed in.
        std::fs::write(b.join("cuda_runtime.h"), "").unwrap();
        let s = search(&e);
        assert_eq!(s.dirs, [a, b]);
        assert_eq!(s.found_in.as_deref(), Some(ENV_VAR));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn cu13_wheels_next_to_libnvrtc_are_found_with_cccl() {
        // The layout .ci/run makes in target/nvrtc: every wheel unzipped into one directory.
        let root = tmp("cu13");
        let lib = dir(&root, "nvrtc/nvidia/cu13/lib");
        let inc = headers(&root, "nvrtc/nvidia/cu13/include");
        dir(&root, "nvrtc/nvidia/cu13/include/crt");
        let cccl = dir(&root, "nvrtc/nvidia/cu13/include/cccl");
        let mut e = env(&root);
        e.nvrtc_dirs = vec![root.join("elsewhere"), lib.clone()];
        let s = search(&e);
        assert_eq!(s.dirs, [inc, cccl]);
        assert!(s.found_in.unwrap().contains("next to libnvrtc"));
        // A toolkit still wins.
        let tk = headers(&root, "usr/local/cuda/include");
        assert_eq!(search(&e).dirs, [tk]);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn cu12_wheels_next_to_libnvrtc_are_found() {
        let root = tmp("cu12");
        let lib = dir(&root, "sp/nvidia/cuda_nvrtc/lib");
        let rt = headers(&root, "sp/nvidia/cuda_runtime/include");
        let cccl = dir(&root, "sp/nvidia/cuda_cccl/include");
        let mut e = env(&root);
        e.nvrtc_dirs = vec![lib];
        assert_eq!(search(&e).dirs, [rt, cccl]);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn wheels_in_site_packages_are_found_in_prefix_order() {
        let root = tmp("site");
        let venv = root.join("venv");
        let usr = root.join("usr");
        let usr_inc = headers(&usr, "lib/python3.12/site-packages/nvidia/cu13/include");
        let deb = headers(&root, "debian/nvidia/cuda_runtime/include");
        let mut e = env(&root);
        e.python_prefixes = vec![venv.clone(), usr.clone()];
        e.site_packages = vec![root.join("debian")];
        assert_eq!(search(&e).dirs, std::slice::from_ref(&usr_inc));
        let venv_inc = headers(
            &venv,
            "lib/python3.11/dist-packages/nvidia/cuda_runtime/include",
        );
        let venv_cccl = dir(
            &venv,
            "lib/python3.11/dist-packages/nvidia/cuda_cccl/include",
        );
        let s = search(&e);
        assert_eq!(s.dirs, [venv_inc, venv_cccl]);
        assert!(s.found_in.unwrap().contains("cu12 wheels"));
        // Next to libnvrtc comes before site-packages.
        let lib = dir(&root, "t/nvidia/cu13/lib");
        let t = headers(&root, "t/nvidia/cu13/include");
        e.nvrtc_dirs = vec![lib];
        assert_eq!(search(&e).dirs, [t]);
        let s = search(&e);
        let listed: Vec<&PathBuf> = s.searched.iter().map(|(_, d)| d).collect();
        assert!(listed.contains(&&usr_inc) && listed.contains(&&deb));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn the_message_marks_what_was_used() {
        let root = tmp("describe");
        let inc = headers(&root, "usr/local/cuda/include");
        let s = search(&env(&root));
        let text = s.describe();
        assert!(
            text.contains(&format!("{} (the default install; used)", inc.display())),
            "{text}"
        );
        assert!(
            text.contains("include/cccl")
                && text.contains("headers taken from: the default install")
        );
        assert!(is_missing_header(
            "k.cu(1): catastrophic error: could not open source file \"cuda_bf16.h\""
        ));
        assert!(is_missing_header("cannot open source file \"cub/cub.cuh\""));
        assert!(!is_missing_header("error: identifier \"x\" is undefined"));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
