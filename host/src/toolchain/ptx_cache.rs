//! NVRTC's PTX kept on disk for the rest of a run: a CUDA C++ candidate is compiled once however
//! many workers load it (one per shape of its problem, and a fresh one after every crash or
//! timeout), and `run` compiles every candidate ahead, in parallel, before the workers ask
//! ([`crate::runner`]). The directory is [`PTX_CACHE_ENV`] (the run sets it for its workers,
//! under its input cache); without it nothing is cached. A file is named by a hash of
//! everything the PTX depends on — the source, the target arch, the options, the include
//! directories searched and their headers, NVRTC's version and the build; a compile error is never
//! cached.
use std::path::{Path, PathBuf};

/// The environment variable naming the cache's directory.
pub const PTX_CACHE_ENV: &str = "DLRM_BENCH_PTX_CACHE";

/// The cache's directory, when the run set one.
pub(crate) fn dir() -> Option<PathBuf> {
    std::env::var_os(PTX_CACHE_ENV).map(PathBuf::from)
}

/// The PTX of `parts` (everything it depends on) from the cache in `dir`, else `compile()`'s,
/// then stored (atomically; a cache that cannot be written is passed by).
pub(crate) fn cached<E>(
    dir: Option<&Path>,
    parts: &[&str],
    compile: impl FnOnce() -> Result<String, E>,
) -> Result<String, E> {
    let Some(dir) = dir else {
        return compile();
    };
    let mut key = String::from(crate::results::record::build_identity());
    for p in parts {
        key.push('\u{1f}');
        key.push_str(p);
    }
    let path = dir.join(format!("{:016x}.ptx", data_gen::seed::derive_str(0, &key)));
    if let Ok(ptx) = std::fs::read_to_string(&path) {
        return Ok(ptx);
    }
    let ptx = compile()?;
    let tmp = path.with_extension(format!(
        "tmp-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    let stored = std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&tmp, &ptx))
        .and_then(|()| std::fs::rename(&tmp, &path));
    if stored.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    Ok(ptx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiled_once_per_key_and_errors_never_kept() {
        let dir = std::env::temp_dir().join(format!("dlrm-bench-ptx-cache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut calls = 0;
        let mut get = |parts: &[&str], out: Result<&str, &str>| -> Result<String, String> {
            cached(Some(&dir), parts, || {
                calls += 1;
                out.map(str::to_string).map_err(str::to_string)
            })
        };
        assert_eq!(get(&["src", "sm_90"], Ok("ptx a")), Ok("ptx a".into()));
        assert_eq!(
            get(&["src", "sm_90"], Ok("other")),
            Ok("ptx a".into()),
            "read back"
        );
        assert_eq!(
            get(&["src", "sm_89"], Ok("ptx b")),
            Ok("ptx b".into()),
            "another key"
        );
        // The parts are kept apart: ("ab", "c") is not ("a", "bc").
        assert_eq!(get(&["ab", "c"], Ok("x")), Ok("x".into()));
        assert_eq!(get(&["a", "bc"], Ok("y")), Ok("y".into()));
        assert_eq!(get(&["bad"], Err("log")), Err("log".into()));
        assert_eq!(
            get(&["bad"], Ok("fixed")),
            Ok("fixed".into()),
            "an error is not cached"
        );
        assert_eq!(calls, 6);
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
        assert_eq!(left.len(), 5, "one file a key, no temporary left");
        std::fs::remove_dir_all(&dir).unwrap();
        // Without a directory, every call compiles.
        let mut n = 0;
        for _ in 0..2 {
            let _ = cached(None, &["src"], || {
                n += 1;
                Ok::<_, ()>("p".to_string())
            });
        }
        assert_eq!(n, 2);
    }
}
