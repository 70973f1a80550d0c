//! The candidates of one `run` or `check`, each counted once. A directory named twice (the same
//! canonical path, however it is spelled) is one candidate, silently. Two candidates of one
//! problem and one name run side by side when their groups differ (the directories above
//! them: two samples of one model, `tuned` and a copy elsewhere); two different directories of
//! one group whose manifests give the same problem and name are a conflict: results are shown
//! by group and name, so the first (in the order given) is kept and every later one is refused
//! as an invalid manifest naming both files; rename one to run both.
use crate::candidate::{load_candidate, Candidate, CandidateError};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// `dirs` without repeats of the same directory (by canonical path), in their first order.
pub(crate) fn unique_dirs(dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut seen = BTreeSet::new();
    dirs.iter()
        .filter(|d| seen.insert(std::fs::canonicalize(d).unwrap_or_else(|_| d.to_path_buf())))
        .cloned()
        .collect()
}

/// Loads each directory of `dirs` once: per directory, its candidate or why it is refused
/// (its manifest is invalid, or an earlier directory has the same problem and name).
pub(crate) fn load_unique(dirs: &[PathBuf]) -> Vec<(PathBuf, Result<Candidate, CandidateError>)> {
    let mut first: BTreeMap<(String, String, String), PathBuf> = BTreeMap::new();
    unique_dirs(dirs)
        .into_iter()
        .map(|dir| {
            let loaded = load_candidate(&dir).and_then(|c| {
                let key = (c.problem.clone(), c.group.clone(), c.name.clone());
                match first.get(&key) {
                    Some(other) => Err(duplicate(&dir, other, &c)),
                    None => {
                        first.insert(key, dir.clone());
                        Ok(c)
                    }
                }
            });
            (dir, loaded)
        })
        .collect()
}

fn duplicate(dir: &Path, other: &Path, c: &Candidate) -> CandidateError {
    CandidateError::new(
        &dir.join("candidate.toml"),
        Some("name"),
        format!(
            "`{}` of problem `{}` is also the name of {} in group `{}`; names must be unique \
             per problem and group (rename one)",
            c.name,
            c.problem,
            other.join("candidate.toml").display(),
            c.group
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(dir: &Path, name: &str) {
        std::fs::create_dir_all(dir).unwrap();
        let manifest = format!(
            "problem = \"embedding_bag_sum\"\nname = \"{name}\"\nsource = \"gpu-kernels\"\n\
             [[launch]]\nkernel = \"k\"\ngrid = [1]\nblock = [32]\nargs = []\n"
        );
        std::fs::write(dir.join("candidate.toml"), manifest).unwrap();
    }

    #[test]
    fn a_directory_named_thrice_loads_once_and_a_second_name_is_refused() {
        let root = std::env::temp_dir().join(format!("dlrm-bench-cset-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        candidate(&root.join("a"), "same");
        candidate(&root.join("b"), "same");
        candidate(&root.join("c"), "other");
        let a = root.join("a");
        let a_again = root.join("c/../a");
        let dirs = [
            a.clone(),
            a_again,
            a.clone(),
            root.join("b"),
            root.join("c"),
        ];
        let loaded = load_unique(&dirs);
        let names: Vec<&Path> = loaded.iter().map(|(d, _)| d.as_path()).collect();
        assert_eq!(names, [a.as_path(), &root.join("b"), &root.join("c")]);
        assert!(loaded[0].1.is_ok() && loaded[2].1.is_ok());
        let e = loaded[1].1.as_ref().unwrap_err().to_string();
        assert!(
            e.contains(&format!("{}/candidate.toml", root.join("b").display()))
                && e.contains(&format!("{}/candidate.toml", a.display()))
                && e.contains("field `name`"),
            "{e}"
        );
        // `run` loads through the same function: one candidate runs, the other is invalid.
        let (ok, bad) = crate::runner::load_all(&[root.clone(), root.join("a")]);
        assert_eq!(ok.len(), 2, "a and c");
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0].file, root.join("b/candidate.toml"));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn one_name_in_two_groups_runs_twice() {
        let root = std::env::temp_dir().join(format!("dlrm-bench-cgrp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        // Two samples of one model answering with one name, and a copy of a tuned candidate.
        candidate(&root.join("model-s0/bag"), "same");
        candidate(&root.join("model-s1/bag"), "same");
        let loaded = load_unique(&[root.join("model-s1/bag"), root.join("model-s0/bag")]);
        let groups: Vec<String> = loaded
            .iter()
            .map(|(_, c)| c.as_ref().map(|c| c.group.clone()).unwrap())
            .collect();
        assert_eq!(groups, ["model-s1", "model-s0"]);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
