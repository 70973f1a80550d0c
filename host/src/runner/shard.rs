//! Splitting a run for a cluster scheduler (`run --shard i/n`, docs/design.md §11) and choosing the
//! GPUs of a host (`run --devices`).
//!
//! An item is one record a run owes: a problem's reference, one of its candidates, one of its
//! KernelBench answers, or an invalid manifest. [`items`] lists them in an order every shard
//! computes alike (the run's problem order, then the load order of the candidate roots, which
//! depends on their contents, not on where the checkout lies); [`Shard::range`] gives shard i
//! a contiguous block of that list, so n shards cover every item exactly once and each touches
//! as few problems (reference measurements, input generation) as the split allows. A shard that
//! owns a candidate of a problem measures the problem's reference too, since speedups pair a
//! candidate with the reference on the same device; the reference's own record belongs to the
//! block that starts the problem, the lowest shard index touching it ([`crate::cmd::merge`] keeps
//! that one).
//!
//! All shards must share the secret seed: [`secret_seed`] reads it from `--secret-seed-file`
//! or [`SECRET_ENV`]; a shard's `run.json` holds only its [`secret_digest`], and the merge
//! publishes the seed.
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::ops::Range;
use std::path::Path;

/// The environment variable a scheduler may set to the shards' common secret seed.
pub const SECRET_ENV: &str = "DLRM_BENCH_SECRET_SEED";

/// What a shard's `run.json` says in place of the secret seed.
pub const SECRET_WITH_MERGE: &str = "(published by the merge of the shards)";

/// Shard `index` of `count` (0-based, as `SLURM_ARRAY_TASK_ID` of `--array=0-(n-1)` and
/// Kubernetes' `JOB_COMPLETION_INDEX` count).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    /// The whole run as one shard.
    pub(crate) const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// Parses `i/n` (0 ≤ i < n).
    pub fn parse(s: &str) -> Result<Shard, String> {
        let (i, n) = s
            .split_once('/')
            .ok_or_else(|| format!("`{s}`: a shard is i/n, e.g. 0/4"))?;
        let parse = |v: &str, what: &str| {
            v.trim()
                .parse::<usize>()
                .map_err(|_| format!("`{s}`: {what} `{v}` is not a whole number"))
        };
        let (index, count) = (parse(i, "the index")?, parse(n, "the count")?);
        if count == 0 {
            return Err(format!("`{s}`: the shard count must be at least 1"));
        }
        if index >= count {
            return Err(format!(
                "`{s}`: the index counts from 0, so it must be below the count {count}"
            ));
        }
        Ok(Shard { index, count })
    }

    /// The items `start..end` of `total` that this shard owns: contiguous blocks whose sizes
    /// differ by one at most (empty when there are more shards than items).
    pub(crate) fn range(self, total: usize) -> Range<usize> {
        let at = |i: usize| i * total / self.count;
        at(self.index)..at(self.index + 1)
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// One item of a run: `(problem, origin)`, as the record of it says (`-` for the problem of an
/// invalid manifest; `reference` for the origin of a reference).
pub type Item = (String, String);

/// The run's items in the order shards split them: for each problem (in the run's order) its
/// reference, its candidates and its KernelBench answers (in load order), then the invalid
/// manifests and answers (`refused`, in load order).
pub fn items(
    problems: &[&str],
    candidates: &[Item],
    answers: &[Item],
    refused: &[String],
) -> Vec<Item> {
    let mut out = Vec::new();
    for &p in problems {
        out.push((p.to_string(), "reference".to_string()));
        for (problem, origin) in candidates.iter().chain(answers) {
            if problem == p {
                out.push((p.to_string(), origin.clone()));
            }
        }
    }
    out.extend(refused.iter().map(|o| ("-".to_string(), o.clone())));
    out
}

/// The items of `all` that `shard` owns.
pub(crate) fn owned(all: &[Item], shard: Shard) -> std::collections::BTreeSet<Item> {
    all[shard.range(all.len())].iter().cloned().collect()
}

/// The secret seed the scheduler gave: from `file` (its first line, a decimal u64) when given,
/// else from [`SECRET_ENV`]; `None` when neither is there. Errors name the file or variable.
pub fn secret_seed(file: Option<&Path>) -> anyhow::Result<Option<u64>> {
    let (text, whence) = match file {
        Some(f) => {
            if let Some(warning) = readable_by_others(f) {
                eprintln!("warning: {warning}");
            }
            (
                std::fs::read_to_string(f).with_context(|| {
                    format!("--secret-seed-file {}: cannot read it", f.display())
                })?,
                format!("--secret-seed-file {}", f.display()),
            )
        }
        None => match std::env::var(SECRET_ENV) {
            Ok(v) => (v, SECRET_ENV.to_string()),
            Err(std::env::VarError::NotPresent) => return Ok(None),
            Err(e) => anyhow::bail!("{SECRET_ENV}: {e}"),
        },
    };
    let word = text.lines().next().unwrap_or("").trim();
    word.parse::<u64>().map(Some).map_err(|_| {
        anyhow::anyhow!("{whence}: `{word}` is not a secret seed (a decimal number below 2^64)")
    })
}

/// Why the secret file `f` is not private (its group or others may read it), if so.
pub(crate) fn readable_by_others(f: &Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(f).ok()?.permissions().mode() & 0o777;
    (mode & 0o044 != 0).then(|| {
        format!(
            "--secret-seed-file {}: readable by others (mode {mode:03o}): anyone who reads it \
             knows the secret input sets; `chmod 600 {}`",
            f.display(),
            f.display()
        )
    })
}

/// What shards publish of their secret seed: the SHA-256 of `dlrm-bench secret seed <seed>`,
/// in hex, so the merge can tell that all used one seed without any shard revealing it.
pub(crate) fn secret_digest(seed: u64) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("dlrm-bench secret seed {seed}").as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The GPUs named by `--devices`: `all`, or ordinals separated by commas (each once).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Devices {
    All,
    List(Vec<usize>),
}

/// Parses `--devices`.
pub fn parse_devices(s: &str) -> Result<Devices, String> {
    if s.trim() == "all" {
        return Ok(Devices::All);
    }
    let mut list = Vec::new();
    for word in s.split(',') {
        let d: usize = word
            .trim()
            .parse()
            .map_err(|_| format!("`{word}` is not a device ordinal (`0,1,...` or `all`)"))?;
        if list.contains(&d) {
            return Err(format!("device {d} is named twice"));
        }
        list.push(d);
    }
    Ok(Devices::List(list))
}

/// The device (among `devices`) that times chunk `chunk` of problem number `k` of a run: the
/// chunks of a problem go to distinct devices, and the first chunk of successive problems
/// rotates, so problems with one chunk (few candidates, or references alone) spread too.
pub(crate) fn device_of_chunk(devices: &[usize], k: usize, chunk: usize) -> usize {
    devices[(k + chunk) % devices.len()]
}

/// `items` split into at most `parts` contiguous chunks of sizes differing by one at most
/// (none empty, unless `items` is).
pub fn chunks<T: Clone>(items: &[T], parts: usize) -> Vec<Vec<T>> {
    let n = parts.clamp(1, items.len().max(1));
    (0..n)
        .map(|i| items[i * items.len() / n..(i + 1) * items.len() / n].to_vec())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_file_others_may_read_is_warned_about() {
        use std::os::unix::fs::PermissionsExt;
        let f = std::env::temp_dir().join(format!("dlrm-secret-mode-{}", std::process::id()));
        std::fs::write(&f, "77\n").unwrap();
        for (mode, warned) in [(0o644, true), (0o640, true), (0o604, true), (0o600, false)] {
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
            let w = readable_by_others(&f);
            assert_eq!(w.is_some(), warned, "{mode:o}: {w:?}");
            if let Some(w) = w {
                assert!(
                    w.contains(&format!("mode {mode:03o}")) && w.contains("chmod 600"),
                    "{w}"
                );
            }
        }
        assert_eq!(secret_seed(Some(&f)).unwrap(), Some(77));
        std::fs::remove_file(&f).unwrap();
    }

    #[test]
    fn shards_cover_every_item_exactly_once() {
        for total in [0, 1, 2, 5, 12, 13, 97] {
            for count in [1, 2, 3, 4, 7, 13, 50] {
                let mut seen = vec![0; total];
                let mut sizes = Vec::new();
                for index in 0..count {
                    let r = Shard { index, count }.range(total);
                    sizes.push(r.len());
                    for i in r {
                        seen[i] += 1;
                    }
                }
                assert!(
                    seen.iter().all(|&n| n == 1),
                    "{total} items, {count}: {seen:?}"
                );
                let (lo, hi) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
                assert!(hi - lo <= 1, "{total} items, {count} shards: {sizes:?}");
            }
        }
        // More shards than items: some are empty, none overlaps.
        let empty = (0..5).filter(|&i| Shard { index: i, count: 5 }.range(2).is_empty());
        assert_eq!(empty.count(), 3);
    }

    #[test]
    fn items_list_each_problem_reference_first_and_owned_sets_partition_them() {
        let c = |p: &str, o: &str| (p.to_string(), o.to_string());
        let all = items(
            &["a", "b"],
            &[c("b", "/x/b1"), c("a", "/x/a1"), c("a", "/x/a2")],
            &[c("a", "kernelbench:/k/a.py")],
            &["/x/bad".into()],
        );
        assert_eq!(
            all,
            [
                c("a", "reference"),
                c("a", "/x/a1"),
                c("a", "/x/a2"),
                c("a", "kernelbench:/k/a.py"),
                c("b", "reference"),
                c("b", "/x/b1"),
                c("-", "/x/bad"),
            ]
        );
        for count in 1..10 {
            let mut union = Vec::new();
            for index in 0..count {
                union.extend(owned(&all, Shard { index, count }));
            }
            union.sort();
            let mut want = all.clone();
            want.sort();
            assert_eq!(union, want, "{count} shards");
        }
    }

    #[test]
    fn shard_and_device_arguments_parse_or_say_why_not() {
        assert_eq!(Shard::parse("2/4"), Ok(Shard { index: 2, count: 4 }));
        assert!(Shard::parse("4/4")
            .unwrap_err()
            .contains("below the count 4"));
        assert!(Shard::parse("0/0").unwrap_err().contains("at least 1"));
        assert!(Shard::parse("1").unwrap_err().contains("i/n"));
        assert!(Shard::parse("a/2").unwrap_err().contains("`a`"));
        assert_eq!(parse_devices("all"), Ok(Devices::All));
        assert_eq!(parse_devices("0, 2"), Ok(Devices::List(vec![0, 2])));
        assert!(parse_devices("0,0").unwrap_err().contains("twice"));
        assert!(parse_devices("x").unwrap_err().contains("`x`"));
    }

    #[test]
    fn chunks_split_evenly_and_devices_rotate() {
        let sizes = |n: usize, p: usize| -> Vec<usize> {
            chunks(&vec![0; n], p).iter().map(Vec::len).collect()
        };
        assert_eq!(sizes(5, 2), [2, 3]);
        assert_eq!(sizes(1, 4), [1]);
        assert_eq!(sizes(0, 4), [0]);
        assert_eq!(device_of_chunk(&[3, 5], 0, 0), 3);
        assert_eq!(device_of_chunk(&[3, 5], 1, 0), 5);
        assert_eq!(device_of_chunk(&[3, 5], 1, 1), 3);
    }

    #[test]
    fn the_secret_comes_from_the_file_and_bad_text_names_it() {
        let dir = std::env::temp_dir().join(format!("dlrm-shard-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("seed");
        std::fs::write(&f, "12345\n").unwrap();
        assert_eq!(secret_seed(Some(&f)).unwrap(), Some(12345));
        std::fs::write(&f, "twelve").unwrap();
        let e = format!("{:#}", secret_seed(Some(&f)).unwrap_err());
        assert!(
            e.contains(&f.display().to_string()) && e.contains("`twelve`"),
            "{e}"
        );
        let e = format!("{:#}", secret_seed(Some(&dir.join("none"))).unwrap_err());
        assert!(e.contains("cannot read"), "{e}");
        assert_ne!(secret_digest(1), secret_digest(2));
        assert_eq!(secret_digest(1).len(), 64);
        // Python's hashlib.sha256(b"dlrm-bench secret seed 1").hexdigest():
        assert_eq!(
            secret_digest(1),
            "b139b903308bdf3bcf53a6348388a8538d325af9b32506078519a130c12b9097"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
