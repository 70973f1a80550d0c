//! `dlrm-bench gen`: writes a problem's input sets to safetensors files — the very sets `run`
//! uses for a seed (file k is the run's public set k) — with their problem, preset, seed, sizes
//! and recipe as metadata, optionally printing each set's statistics. With `--trace`, one table
//! of a lookup trace ([`TraceReplay`]) gives the bags in place of the generated ones.
//! Each file is written under a temporary name beside it and renamed when complete, so a full
//! disk leaves no truncated `.safetensors`. `--stats` alone prints statistics and writes
//! nothing; with `--out` it writes too.
use anyhow::Context;
use bench_problems::{find_problem, InputSet, Preset, Problem, Role, Sizes};
use data_gen::HostTensor;
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct GenArgs {
    /// Problem name (see `list`).
    pub problem: String,
    /// The sizes: ci, small or full.
    #[arg(long, default_value = "full", value_parser = crate::parse_preset)]
    pub preset: Preset,
    /// Public seed (the run's `--seed`).
    #[arg(long, default_value_t = 2026)]
    pub seed: u64,
    /// How many input sets (set k is the run's public set k).
    #[arg(long, default_value_t = 1, value_parser = crate::cmd::arg_bounds::set_count)]
    pub sets: usize,
    /// Directory the files are written to (default `inputs`; with `--stats`, files are
    /// written only when `--out` is given).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print each set's input statistics (unique fraction, top-1%/10% share, pooling
    /// histogram, empty bags, reuse), computed from its `indices` and `offsets`. Writes no
    /// file unless `--out` is given too.
    #[arg(long)]
    pub stats: bool,
    /// Replay a trace (safetensors or a directory of .npy; see data-gen's `trace` module):
    /// `indices`/`offsets` come from one table of the trace, the rest is generated as usual.
    /// Only for problems whose inputs are (weight, indices, offsets).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Which table of the trace to replay.
    #[arg(long, default_value_t = 0, requires = "trace")]
    pub table: usize,
    /// Rows E of the replayed table (default: the trace's largest index + 1).
    #[arg(long, requires = "trace")]
    pub rows: Option<u64>,
}

/// One table of a trace, replayed as the bags of a problem whose inputs are (weight, indices,
/// offsets): B and N come from the trace, E from `--rows` or the largest index + 1, and the
/// weight is generated as usual.
#[derive(Clone, Debug)]
pub(crate) struct TraceReplay {
    path: PathBuf,
    table: usize,
    indices: Vec<i64>,
    offsets: Vec<i64>,
    rows: u64,
}

impl TraceReplay {
    /// Reads table `table` of the trace at `path` for `problem`.
    pub fn load(
        problem: &dyn Problem,
        path: &Path,
        table: usize,
        rows: Option<u64>,
    ) -> anyhow::Result<Self> {
        let inputs: Vec<&str> = problem
            .tensors()
            .iter()
            .filter(|t| t.role != Role::Output)
            .map(|t| t.name)
            .collect();
        let mut sorted = inputs.clone();
        sorted.sort_unstable();
        anyhow::ensure!(
            sorted == ["indices", "offsets", "weight"],
            "--trace replays problems whose inputs are (weight, indices, offsets); `{}` takes ({})",
            problem.name(),
            inputs.join(", ")
        );
        let t = data_gen::Trace::read(path)?;
        let (indices, offsets) = t.table(table)?;
        let seen = t.rows_seen(table)?;
        let rows = rows.unwrap_or(seen);
        anyhow::ensure!(
            seen <= rows,
            "trace table {table} looks up row {} but --rows is {rows}",
            seen - 1
        );
        println!(
            "trace {}: table {table} of {}, B={} N={} E={rows}",
            path.display(),
            t.tables,
            offsets.len() - 1,
            indices.len()
        );
        Ok(TraceReplay {
            path: path.to_path_buf(),
            table,
            indices,
            offsets,
            rows,
        })
    }

    /// The sizes of a set replaying the table: E, B and N from the trace.
    fn resize(&self, sizes: &mut Sizes) {
        sizes.insert("E".into(), self.rows as i64);
        sizes.insert("B".into(), self.offsets.len() as i64 - 1);
        sizes.insert("N".into(), self.indices.len() as i64);
    }

    /// Puts the table's bags into a set generated with [`Self::resize`]d sizes.
    fn apply(&self, set: &mut InputSet) -> anyhow::Result<()> {
        let (indices, offsets) = (&self.indices, &self.offsets);
        let tensors = &mut set.tensors.tensors;
        let indices_tensor = HostTensor::from_i64(vec![indices.len()], indices.clone())?;
        tensors.insert("indices".into(), indices_tensor);
        let offsets_tensor = HostTensor::from_i64(vec![offsets.len()], offsets.clone())?;
        tensors.insert("offsets".into(), offsets_tensor);
        set.sizes.insert("N".into(), indices.len() as i64);
        let source = format!("{} table {}", self.path.display(), self.table);
        set.tensors.metadata.insert("trace".into(), source);
        Ok(())
    }
}

/// The file set `k` of `problem` at `preset` is written to.
pub(crate) fn set_path(out: &Path, problem: &dyn Problem, preset: Preset, k: usize) -> PathBuf {
    out.join(format!(
        "{}.{}.set{k}.safetensors",
        problem.name(),
        preset.name()
    ))
}

/// Refuses, before anything is written, `sets` sets like `first` that would not fit in the
/// free space of `out` (with a 5% margin), saying how much they need and how much there is.
fn check_room(out: &Path, first: &InputSet, sets: usize) -> anyhow::Result<()> {
    let per_set = set_bytes(first);
    let need = per_set.saturating_mul(sets as u64);
    let Some(free) = crate::evaluate::free_bytes(out) else {
        return Ok(());
    };
    anyhow::ensure!(
        need <= free / 20 * 19,
        "--sets {sets}: would write about {:.1} GB ({:.2} GB a set) to {}, which has {:.1} GB \
         free",
        need as f64 / 1e9,
        per_set as f64 / 1e9,
        out.display(),
        free as f64 / 1e9
    );
    Ok(())
}

/// The bytes of a set's tensors (about what its file takes).
fn set_bytes(set: &InputSet) -> u64 {
    set.tensors
        .tensors
        .values()
        .map(|t| t.bytes.len() as u64)
        .sum()
}

/// `dlrm-bench gen`: writes the sets and prints a line (and optionally statistics) for each.
pub fn gen(a: &GenArgs) -> anyhow::Result<()> {
    let p = find_problem(&a.problem)
        .with_context(|| format!("unknown problem `{}` (see `dlrm-bench list`)", a.problem))?;
    let preset = a.preset;
    // `--stats` alone is a statistics command: it writes only when asked to.
    let out = match (&a.out, a.stats) {
        (Some(out), _) => Some(out.as_path()),
        (None, false) => Some(Path::new("inputs")),
        (None, true) => None,
    };
    if let Some(out) = out {
        std::fs::create_dir_all(out)
            .with_context(|| format!("--out {}: cannot create it", out.display()))?;
    }
    let replay = a
        .trace
        .as_deref()
        .map(|path| TraceReplay::load(p, path, a.table, a.rows))
        .transpose()?;
    let mut previous = None;
    for k in 0..a.sets {
        let set_seed = crate::evaluate::public_seed(a.seed, k);
        let mut sizes = p.sizes(preset);
        if let Some(r) = &replay {
            r.resize(&mut sizes);
        }
        let seeds = bench_problems::Seeds {
            set: set_seed,
            table: crate::evaluate::table_seed(a.seed),
        };
        let mut set = p.generate(preset, &sizes, seeds)?;
        if let Some(r) = &replay {
            r.apply(&mut set)?;
        }
        if let (0, Some(out)) = (k, out) {
            check_room(out, &set, a.sets)?;
        }
        let work = p.work(&set);
        let meta = &mut set.tensors.metadata;
        meta.insert("problem".into(), p.name().into());
        meta.insert("preset".into(), preset.name().into());
        meta.insert("seed".into(), set_seed.to_string());
        meta.insert("table_seed".into(), seeds.table.to_string());
        meta.insert("sizes".into(), serde_json::to_string(&set.sizes)?);
        meta.insert("recipe".into(), p.recipe(preset).to_string());
        let sizes: Vec<String> = set.sizes.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let name = match out {
            Some(out) => {
                let path = set_path(out, p, preset, k);
                write_atomically(&set.tensors, &path)?;
                path.display().to_string()
            }
            None => format!("set {k} (not written: --stats without --out)"),
        };
        println!(
            "{}: {} (compulsory {:.1} MB, logical {:.1} MB)",
            name,
            sizes.join(" "),
            work.compulsory_bytes / 1e6,
            work.logical_bytes / 1e6
        );
        if a.stats {
            print_bag_stats(&set)?;
        }
        // Held until the next set is made: the sets share their tables (made once).
        previous = Some(set);
    }
    drop(previous);
    Ok(())
}

/// Writes `set` to a temporary file beside `path`, then renames it to `path`; on any error the
/// temporary file is removed and the error names `path`.
fn write_atomically(set: &data_gen::TensorSet, path: &Path) -> anyhow::Result<()> {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp-{}", std::process::id()));
    let tmp = path.with_file_name(name);
    let written = set
        .write(&tmp)
        .map_err(anyhow::Error::from)
        .and_then(|()| std::fs::rename(&tmp, path).map_err(anyhow::Error::from))
        .with_context(|| format!("writing {}", path.display()));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// The statistics of a set's `indices` and `offsets`, when it has them.
fn print_bag_stats(set: &InputSet) -> anyhow::Result<()> {
    match (set.tensors.get("indices"), set.tensors.get("offsets")) {
        (Ok(i), Ok(o)) => {
            let rows = set.sizes.get("E").map_or(0, |&e| e as u64);
            let s = data_gen::bag_stats(&i.to_i64_vec()?, &o.to_i64_vec()?, rows);
            println!("{s}");
        }
        _ => println!("(no `indices` and `offsets` in this problem's inputs: no statistics)"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use data_gen::TensorSet;

    fn args(problem: &str, out: &Path) -> GenArgs {
        GenArgs {
            problem: problem.into(),
            preset: Preset::Ci,
            seed: 5,
            sets: 2,
            out: Some(out.to_path_buf()),
            stats: true,
            trace: None,
            table: 0,
            rows: None,
        }
    }

    fn temp(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("dlrm-gen-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn sets_that_would_not_fit_the_free_space_are_refused_before_any_is_written() {
        let dir = temp("room");
        std::fs::create_dir_all(&dir).unwrap();
        let p = find_problem("embedding_bag_sum").unwrap();
        let seeds = bench_problems::Seeds { set: 1, table: 2 };
        let set = p.generate(Preset::Ci, &p.sizes(Preset::Ci), seeds).unwrap();
        assert!(check_room(&dir, &set, 2).is_ok());
        let free = crate::evaluate::free_bytes(&dir).unwrap();
        let per_set = set_bytes(&set);
        let too_many = (free / per_set + 1) as usize;
        let e = check_room(&dir, &set, too_many).unwrap_err().to_string();
        assert!(
            e.contains(&format!("--sets {too_many}: would write about")),
            "{e}"
        );
        assert!(e.contains("GB free"), "{e}");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn the_files_hold_the_runs_public_sets_with_their_metadata() {
        let dir = temp("sets");
        let p = find_problem("embedding_bag_sum").unwrap();
        gen(&args("embedding_bag_sum", &dir)).unwrap();
        for k in 0..2 {
            let file = TensorSet::read(&set_path(&dir, p, Preset::Ci, k)).unwrap();
            let seed = crate::evaluate::public_seed(5, k);
            let seeds = bench_problems::Seeds {
                set: seed,
                table: crate::evaluate::table_seed(5),
            };
            let want = p.generate(Preset::Ci, &p.sizes(Preset::Ci), seeds).unwrap();
            assert_eq!(file.tensors, want.tensors.tensors);
            assert_eq!(file.metadata["seed"], seed.to_string());
            assert_eq!(file.metadata["problem"], "embedding_bag_sum");
            assert_eq!(file.metadata["preset"], "ci");
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn stats_alone_writes_nothing_and_a_failed_write_leaves_no_file() {
        let p = find_problem("embedding_bag_sum").unwrap();
        // `--stats` without `--out`: the default directory is not written to.
        let default_file = set_path(Path::new("inputs"), p, Preset::Ci, 0);
        let before = default_file.exists();
        let mut a = args("embedding_bag_sum", Path::new("unused"));
        a.out = None;
        gen(&a).unwrap();
        assert_eq!(default_file.exists(), before);
        assert!(!Path::new("unused").exists());
        // A write that fails (here the rename: a directory is in the way) leaves neither a
        // temporary nor a truncated file, and the error names the file.
        let dir = temp("failed-write");
        let blocked = set_path(&dir, p, Preset::Ci, 0);
        std::fs::create_dir_all(blocked.join("occupied")).unwrap();
        let e = format!("{:#}", gen(&args("embedding_bag_sum", &dir)).unwrap_err());
        assert!(e.contains(&blocked.display().to_string()), "{e}");
        let left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(left.iter().all(|f| !f.contains(".tmp-")), "{left:?}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_trace_table_replaces_the_bags_and_sets_b_n_and_e() {
        let dir = temp("trace");
        let p = find_problem("embedding_bag_sum").unwrap();
        // A one-table trace: the bags of a generated set.
        let mut trace_args = args("embedding_bag_sum", &dir.join("trace"));
        trace_args.sets = 1;
        gen(&trace_args).unwrap();
        let trace = set_path(&dir.join("trace"), p, Preset::Ci, 0);
        let traced = TensorSet::read(&trace).unwrap();

        let mut a = args("embedding_bag_sum", &dir.join("replay"));
        a.trace = Some(trace.clone());
        let rows = p.sizes(Preset::Ci)["E"] as u64 + 7;
        a.rows = Some(rows);
        gen(&a).unwrap();
        let file = TensorSet::read(&set_path(&dir.join("replay"), p, Preset::Ci, 1)).unwrap();
        for name in ["indices", "offsets"] {
            assert_eq!(file.tensors[name], traced.tensors[name], "{name}");
        }
        let sizes: Sizes = serde_json::from_str(&file.metadata["sizes"]).unwrap();
        let n = traced.tensors["indices"].numel() as i64;
        let b = traced.tensors["offsets"].numel() as i64 - 1;
        assert_eq!((sizes["E"], sizes["B"], sizes["N"]), (rows as i64, b, n));
        assert_eq!(file.tensors["weight"].shape[0], rows as usize);
        assert_eq!(
            file.metadata["trace"],
            format!("{} table 0", trace.display())
        );

        let mut few_rows = a;
        few_rows.rows = Some(1);
        let err = gen(&few_rows).unwrap_err().to_string();
        assert!(err.contains("but --rows is 1"), "{err}");
        let err = TraceReplay::load(find_problem("kjt_permute").unwrap(), &trace, 0, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("replays problems whose inputs are (weight, indices, offsets)"));
        std::fs::remove_dir_all(&dir).ok();
    }
}
