//! The candidates of one `run` or `check`, each counted once. A directory named twice (the same
//! canonical path, however it is spelled) is one candidate, silently. Two candidates of one
//! problem and one name both run, told apart: in different groups (the directories above them:
//! two samples of one model, `tuned` and a copy elsewhere) by their group; in one group the
//! later one (in the order given) is reported as `name (its directory)`, with a note. No
//! candidate is refused, nor renamed, because of another.
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

/// Loads each directory of `dirs` once: per directory, its candidate or why it is refused (its
/// manifest is invalid); a later candidate of an earlier one's problem, group and name is
/// reported under its directory too.
pub(crate) fn load_unique(dirs: &[PathBuf]) -> Vec<(PathBuf, Result<Candidate, CandidateError>)> {
    let mut first: BTreeMap<(String, String, String), PathBuf> = BTreeMap::new();
    unique_dirs(dirs)
        .into_iter()
        .map(|dir| {
            let loaded = load_candidate(&dir).map(|c| {
                let key = (c.problem.clone(), c.group.clone(), c.name.clone());
                match first.get(&key) {
                    Some(other) => told_apart(&dir, other, c),
                    None => {
                        first.insert(key, dir.clone());
                        c
                    }
                }
            });
            (dir, loaded)
        })
        .collect()
}

/// `c` (of `dir`) under a name of its own: an earlier candidate (of `other`) of its group has
/// its name.
fn told_apart(dir: &Path, other: &Path, mut c: Candidate) -> Candidate {
    let name = format!("{} ({})", c.name, dir.display());
    eprintln!(
        "note: {}: `{}` of problem `{}` is also the name of {} in group `{}`: both run, this \
         one reported as `{name}`",
        dir.join("candidate.toml").display(),
        c.name,
        c.problem,
        other.join("candidate.toml").display(),
        c.group
    );
    c.name = name;
    c
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
    fn a_directory_named_thrice_loads_once_and_a_second_name_runs_told_apart() {
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
        let names: Vec<String> = loaded
            .iter()
            .map(|(_, c)| c.as_ref().unwrap().name.clone())
            .collect();
        // The first keeps its name; the later one of the same group is told apart.
        let b_name = format!("same ({})", root.join("b").display());
        assert_eq!(names, ["same".to_string(), b_name, "other".into()]);
        // `run` loads through the same function: all three run, none refused.
        let (ok, bad) = crate::runner::load_all(&[root.clone(), root.join("a")]);
        assert_eq!(ok.len(), 3);
        assert!(bad.is_empty());
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
