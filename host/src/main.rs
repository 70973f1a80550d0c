//! `dlrm-bench`: the command line. Subcommands `list`, `gen`, `stats`, `run`, `check`,
//! `report` and `project`; all work lives in the library.
use anyhow::Context;
use bench_problems::{all_problems, find_problem, Preset};
use clap::{Parser, Subcommand};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use dlrm_bench::evaluate::{public_seed, EvalConfig};
use dlrm_bench::runner::{self, RunOptions};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "dlrm-bench",
    version,
    about = "A benchmark suite for recommender-system GPU kernels"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the problems with their sizes.
    List {
        /// Print only the names, one per line (for scripts).
        #[arg(long)]
        names: bool,
    },
    /// Write a problem's input sets to safetensors (the same sets `run` uses for its seed).
    Gen {
        /// Problem name (see `list`).
        problem: String,
        #[arg(long, default_value = "full", value_parser = parse_preset)]
        preset: Preset,
        /// Public seed (the run's `--seed`).
        #[arg(long, default_value_t = 2026)]
        seed: u64,
        /// How many input sets (set k is the run's public set k).
        #[arg(long, default_value_t = 1)]
        sets: usize,
        #[arg(long, default_value = "inputs")]
        out: PathBuf,
        /// Print each set's input statistics (unique fraction, top-1%/10% share, pooling
        /// histogram, empty bags, reuse), computed from its `indices` and `offsets`.
        #[arg(long)]
        stats: bool,
        /// Replay a trace (safetensors or a directory of .npy; see data-gen's `trace` module):
        /// `indices`/`offsets` come from one table of the trace, the rest is generated as usual.
        /// Only for problems whose inputs are (weight, indices, offsets).
        #[arg(long)]
        trace: Option<PathBuf>,
        /// Which table of the trace to replay.
        #[arg(long, default_value_t = 0, requires = "trace")]
        table: usize,
        /// Rows E of the replayed table (default: the trace's largest index + 1).
        #[arg(long, requires = "trace")]
        rows: Option<u64>,
    },
    /// Print input statistics of a table-set preset (a generated batch) or of a trace.
    Stats(StatsArgs),
    /// Check and time candidates against the references.
    Run(RunArgs),
    /// (internal) One worker process of `run`: reads its spec from stdin.
    #[command(hide = true)]
    Worker,
    /// Tables and metrics of one or more result sets, pooled (each problem from the last set
    /// that measured it), optionally with a projection.
    Report {
        /// Results directories of `run` (or their results.jsonl files).
        #[arg(required = true)]
        results: Vec<PathBuf>,
        /// Also project the pooled wins onto this workload profile.
        #[arg(long)]
        workload: Option<PathBuf>,
        /// Also write summary.md, summary.csv and the pooled results.jsonl here.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Project a run's speedups onto a workload profile (Amdahl): the addressable fraction of
    /// the step and the projected step speedup.
    Project {
        /// Results directories of `run` (or their results.jsonl files); their records are
        /// pooled, so problems measured in different runs project together.
        #[arg(required = true)]
        results: Vec<PathBuf>,
        /// The workload profile (see workloads/README.md).
        #[arg(long)]
        workload: PathBuf,
        /// Use only this candidate group's wins (default: the fastest win of any group).
        #[arg(long)]
        group: Option<String>,
    },
    /// Validate candidates without running them: manifest, NVRTC compile (no GPU needed), and
    /// each launch's arguments against the kernel's parameters.
    Check {
        /// Candidate directories (each with a candidate.toml).
        dirs: Vec<PathBuf>,
        /// NVRTC target architecture.
        #[arg(long, default_value = "compute_90", value_parser = ["compute_80", "compute_89", "compute_90", "compute_100"])]
        arch: String,
    },
}

#[derive(clap::Args)]
struct RunArgs {
    /// Problems to run (default: all).
    #[arg(long = "problem")]
    problems: Vec<String>,
    /// Directories searched for candidate.toml (default: candidates/examples and candidates/tuned).
    #[arg(long = "candidates")]
    candidates: Vec<PathBuf>,
    /// Size preset (default: full on a GPU; the emulator always runs ci).
    #[arg(long, value_parser = parse_preset)]
    preset: Option<Preset>,
    /// Use the CPU emulator even if a GPU is present.
    #[arg(long)]
    cpu: bool,
    /// Fail instead of falling back to the emulator.
    #[arg(long, conflicts_with = "cpu")]
    require_gpu: bool,
    #[arg(long, default_value_t = 2026)]
    seed: u64,
    #[arg(long, default_value_t = 3)]
    public_sets: usize,
    #[arg(long, default_value_t = 2)]
    secret_sets: usize,
    /// Input sets the timing rotates among.
    #[arg(long, default_value_t = 3)]
    rotation: usize,
    /// Time without flushing L2 first.
    #[arg(long)]
    warm_l2: bool,
    #[arg(long)]
    min_pairs: Option<usize>,
    #[arg(long)]
    max_pairs: Option<usize>,
    /// Seconds of timing per candidate at most.
    #[arg(long)]
    budget_s: Option<f64>,
    /// A win needs the speedup's lower 95% bound above this.
    #[arg(long, default_value_t = 1.0)]
    win_threshold: f64,
    /// PyTorch peer timings (JSONL from tools/torch_peer.py) to show beside the references.
    #[arg(long)]
    peer: Vec<PathBuf>,
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Seconds one candidate may take before its worker is killed (`timeout`).
    #[arg(long, default_value_t = 180.0)]
    timeout_s: f64,
    /// Project the run's wins onto this workload profile (workloads/README.md): the
    /// addressable fraction and the projected step speedup, in the summary and run.json.
    #[arg(long)]
    workload: Option<PathBuf>,
    /// Finish the interrupted run in this results directory (its options are reused).
    #[arg(long)]
    resume: Option<PathBuf>,
}

fn parse_preset(s: &str) -> Result<Preset, String> {
    Preset::parse(s).ok_or_else(|| format!("unknown preset `{s}` (ci, small, full)"))
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::List { names } => list(names),
        Command::Gen {
            problem,
            preset,
            seed,
            sets,
            out,
            stats,
            trace,
            table,
            rows,
        } => gen(
            &problem,
            preset,
            seed,
            sets,
            &out,
            stats,
            trace.as_deref(),
            table,
            rows,
        ),
        Command::Stats(args) => stats(args),
        Command::Run(args) => run(args),
        Command::Worker => dlrm_bench::worker::main(),
        Command::Check { dirs, arch } => check(&dirs, &arch),
        Command::Report {
            results,
            workload,
            out,
        } => report(&results, workload.as_deref(), out.as_deref()),
        Command::Project {
            results,
            workload,
            group,
        } => project(&results, &workload, group.as_deref()),
    }
}

fn report(
    results: &[PathBuf],
    workload: Option<&std::path::Path>,
    out: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    use dlrm_bench::{metrics, report};
    let records = report::pool_runs(results)?;
    let mut problems: Vec<&str> = records.iter().map(|r| r.problem.as_str()).collect();
    problems.dedup();
    let metrics = metrics::summarize(&records, problems.len());
    println!("{}", report::terminal_tables(&records, &metrics));
    if let Some(dir) = out {
        let same = |p: &PathBuf| {
            let input = if p.is_dir() {
                p.clone()
            } else {
                p.parent().unwrap_or(p).to_path_buf()
            };
            input.canonicalize().ok() == dir.canonicalize().ok()
        };
        anyhow::ensure!(
            !results.iter().any(same),
            "--out {} is one of the result sets read; give a new directory",
            dir.display()
        );
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        // A fresh pooled results.jsonl (RecordLog appends).
        let _ = std::fs::remove_file(dir.join("results.jsonl"));
        let sources: Vec<String> = results.iter().map(|p| p.display().to_string()).collect();
        let heading = format!("# DLRM-Bench report\n\nPooled from: {}", sources.join(", "));
        report::write_markdown(dir, &heading, &records, &metrics)?;
        report::write_csv(dir, &records)?;
        let mut log = dlrm_bench::record::RecordLog::open(dir)?;
        for r in &records {
            log.append(r)?;
        }
        println!("wrote {}", dir.display());
    }
    if let Some(w) = workload {
        print_projection(&records, w, None)?;
    }
    Ok(())
}

fn project(
    results: &[PathBuf],
    workload: &std::path::Path,
    group: Option<&str>,
) -> anyhow::Result<()> {
    let records = dlrm_bench::report::pool_runs(results)?;
    print_projection(&records, workload, group)
}

fn print_projection(
    records: &[dlrm_bench::record::Record],
    workload: &std::path::Path,
    group: Option<&str>,
) -> anyhow::Result<()> {
    use dlrm_bench::projection::{project, Workload};
    let w = Workload::load(workload)?;
    let p = project(&w, records, group);
    println!("{}", p.markdown(&w));
    Ok(())
}

fn list(names_only: bool) -> anyhow::Result<()> {
    if names_only {
        all_problems().iter().for_each(|p| println!("{}", p.name()));
        return Ok(());
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_header(vec!["#", "problem", "what", "ci", "small", "full"]);
    for p in all_problems() {
        let fmt = |preset| {
            p.sizes(preset)
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        t.add_row(vec![
            p.number().to_string(),
            p.name().to_string(),
            p.summary().to_string(),
            fmt(Preset::Ci),
            fmt(Preset::Small),
            fmt(Preset::Full),
        ]);
    }
    println!("{t}");
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn gen(
    problem: &str,
    preset: Preset,
    seed: u64,
    sets: usize,
    out: &std::path::Path,
    print_stats: bool,
    trace: Option<&std::path::Path>,
    table: usize,
    rows: Option<u64>,
) -> anyhow::Result<()> {
    let p = find_problem(problem)
        .with_context(|| format!("unknown problem `{problem}` (see `dlrm-bench list`)"))?;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    // Trace replay: (indices, offsets) of one table of the trace, E from --rows or the trace.
    let replay = match trace {
        None => None,
        Some(path) => {
            let inputs: Vec<&str> = p
                .tensors()
                .iter()
                .filter(|t| t.role != bench_problems::Role::Output)
                .map(|t| t.name)
                .collect();
            let mut sorted = inputs.clone();
            sorted.sort_unstable();
            anyhow::ensure!(
                sorted == ["indices", "offsets", "weight"],
                "--trace replays problems whose inputs are (weight, indices, offsets); `{}` takes ({})",
                p.name(),
                inputs.join(", ")
            );
            let t = data_gen::Trace::read(path)?;
            let (indices, offsets) = t.table(table)?;
            let seen = t.rows_seen(table)?;
            let e = rows.unwrap_or(seen);
            anyhow::ensure!(
                seen <= e,
                "trace table {table} looks up row {} but --rows is {e}",
                seen - 1
            );
            println!(
                "trace {}: table {table} of {}, B={} N={} E={e}",
                path.display(),
                t.tables,
                offsets.len() - 1,
                indices.len()
            );
            Some((path, indices, offsets, e))
        }
    };
    for k in 0..sets {
        let set_seed = public_seed(seed, k);
        let mut sizes = p.sizes(preset);
        if let Some((_, indices, offsets, e)) = &replay {
            sizes.insert("E".into(), *e as i64);
            sizes.insert("B".into(), offsets.len() as i64 - 1);
            sizes.insert("N".into(), indices.len() as i64);
        }
        let mut set = p.generate(preset, &sizes, set_seed)?;
        if let Some((path, indices, offsets, _)) = &replay {
            set.tensors.tensors.insert(
                "indices".into(),
                data_gen::HostTensor::from_i64(vec![indices.len()], indices.clone())?,
            );
            set.tensors.tensors.insert(
                "offsets".into(),
                data_gen::HostTensor::from_i64(vec![offsets.len()], offsets.clone())?,
            );
            set.sizes.insert("N".into(), indices.len() as i64);
            set.tensors
                .metadata
                .insert("trace".into(), format!("{} table {table}", path.display()));
        }
        let work = p.work(&set);
        set.tensors
            .metadata
            .insert("problem".into(), p.name().into());
        set.tensors
            .metadata
            .insert("preset".into(), preset.name().into());
        set.tensors
            .metadata
            .insert("seed".into(), set_seed.to_string());
        set.tensors
            .metadata
            .insert("sizes".into(), serde_json::to_string(&set.sizes)?);
        set.tensors
            .metadata
            .insert("recipe".into(), p.recipe(preset).to_string());
        let path = out.join(format!("{}.{}.set{k}.safetensors", p.name(), preset.name()));
        set.tensors.write(&path)?;
        let sizes: Vec<String> = set.sizes.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!(
            "{}: {} (compulsory {:.1} MB, logical {:.1} MB)",
            path.display(),
            sizes.join(" "),
            work.compulsory_bytes / 1e6,
            work.logical_bytes / 1e6
        );
        if print_stats {
            match (set.tensors.get("indices"), set.tensors.get("offsets")) {
                (Ok(i), Ok(o)) => {
                    let rows = set.sizes.get("E").map_or(0, |&e| e as u64);
                    let s = data_gen::bag_stats(&i.to_i64_vec()?, &o.to_i64_vec()?, rows);
                    println!("{s}");
                }
                _ => {
                    println!("(no `indices` and `offsets` in this problem's inputs: no statistics)")
                }
            }
        }
    }
    Ok(())
}

#[derive(clap::Args)]
struct StatsArgs {
    /// A table-set preset: criteo-kaggle, criteo-terabyte, mlperf-dlrmv2.
    #[arg(long, conflicts_with = "trace")]
    table_set: Option<String>,
    /// A trace instead (safetensors or a directory of .npy).
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Samples in the generated batch.
    #[arg(long, default_value_t = 65536)]
    batch: usize,
    /// Cap every table at this many rows.
    #[arg(long)]
    row_cap: Option<u64>,
    /// Multiply every table's rows by this factor.
    #[arg(long)]
    scale: Option<f64>,
    /// Zipf exponent of the generated lookups.
    #[arg(long, default_value_t = 1.15)]
    alpha: f64,
    /// Log-normal bag lengths with this σ around each table's hotness (default: fixed hotness).
    #[arg(long)]
    pooling_sigma: Option<f64>,
    #[arg(long, default_value_t = 2026)]
    seed: u64,
    /// Also print one line per table.
    #[arg(long)]
    per_table: bool,
    /// Print the statistics as JSON instead.
    #[arg(long)]
    json: bool,
}

/// `dlrm-bench stats`: statistics of a whole table set's batch (rows numbered globally over
/// the concatenated tables) or of a trace, and optionally per table.
fn stats(a: StatsArgs) -> anyhow::Result<()> {
    // (label, rows, indices, offsets) per table, and the whole set in global row numbers.
    let (title, per_table, global) = if let Some(path) = &a.trace {
        let t = data_gen::Trace::read(path)?;
        let mut per = Vec::new();
        let mut global = t.indices.clone();
        let mut base = 0u64;
        for table in 0..t.tables {
            let (idx, off) = t.table(table)?;
            let rows = t.rows_seen(table)?;
            let (a0, a1) = (
                t.offsets[table * t.batch] as usize,
                t.offsets[(table + 1) * t.batch] as usize,
            );
            global[a0..a1].iter_mut().for_each(|i| *i += base as i64);
            base += rows;
            per.push((format!("table {table}"), rows, idx, off));
        }
        let title = format!(
            "trace {}: {} tables, batch {}",
            path.display(),
            t.tables,
            t.batch
        );
        (title, per, (global, t.offsets, base))
    } else {
        let name = a.table_set.as_deref().unwrap_or("mlperf-dlrmv2");
        let mut set = data_gen::TableSet::preset(name).with_context(|| {
            format!(
                "unknown table set `{name}` (one of {})",
                data_gen::tables::PRESETS.join(", ")
            )
        })?;
        if let Some(cap) = a.row_cap {
            set = set.with_row_cap(cap)?;
        }
        if let Some(f) = a.scale {
            set = set.scaled(f)?;
        }
        let recipe = data_gen::TableSetRecipe {
            alpha: a.alpha,
            pooling_sigma: a.pooling_sigma,
        };
        let b = set.generate(a.batch, &recipe, a.seed)?;
        let mut per = Vec::new();
        for (t, spec) in set.tables.iter().enumerate() {
            let (o0, o1) = (b.offsets[t * a.batch], b.offsets[(t + 1) * a.batch]);
            let idx = b.indices[o0 as usize..o1 as usize].to_vec();
            let off = b.offsets[t * a.batch..=(t + 1) * a.batch]
                .iter()
                .map(|x| x - o0)
                .collect();
            per.push((
                format!(
                    "table {t} (E={} D={} hot={})",
                    spec.rows, spec.dim, spec.hotness
                ),
                spec.rows,
                idx,
                off,
            ));
        }
        let title = format!(
            "{}: {} tables, {} rows ({:.1} GB fp32), {} lookups per sample, batch {}, alpha {}",
            set.name,
            set.tables.len(),
            set.total_rows(),
            set.total_bytes(4) as f64 / 1e9,
            set.lookups_per_sample(),
            a.batch,
            a.alpha
        );
        (
            title,
            per,
            (b.global_indices(), b.offsets, set.total_rows()),
        )
    };
    let whole = data_gen::bag_stats(&global.0, &global.1, global.2);
    if a.json {
        let tables: Vec<_> = per_table
            .iter()
            .map(|(label, rows, idx, off)| serde_json::json!({"table": label, "stats": data_gen::bag_stats(idx, off, *rows)}))
            .collect();
        let v = serde_json::json!({"source": title, "all_tables": whole, "tables": if a.per_table { tables } else { vec![] }});
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!("{title}\nall tables (rows numbered over the concatenated tables):\n{whole}");
    if a.per_table {
        for (label, rows, idx, off) in &per_table {
            let s = data_gen::bag_stats(idx, off, *rows);
            println!(
                "{label}: N={} unique {:.2}% top1% {:.2}% top10% {:.2}% reuse {:.2} once {:.2}%",
                s.lookups,
                100.0 * s.unique_fraction,
                100.0 * s.top1pct_share,
                100.0 * s.top10pct_share,
                s.mean_reuse,
                100.0 * s.rows_touched_once
            );
        }
    }
    Ok(())
}

fn check(dirs: &[PathBuf], arch: &str) -> anyhow::Result<()> {
    let arch: &'static str = Box::leak(arch.to_string().into_boxed_str());
    let mut failed = 0;
    for dir in dirs {
        match dlrm_bench::static_check::check_candidate(dir, arch) {
            Ok(lines) => {
                println!("ok   {}", dir.display());
                lines.iter().for_each(|l| println!("     {l}"));
            }
            Err(e) => {
                failed += 1;
                println!(
                    "FAIL {}\n     {}",
                    dir.display(),
                    e.replace('\n', "\n     ")
                );
            }
        }
    }
    anyhow::ensure!(
        failed == 0,
        "{failed} of {} candidates failed the check",
        dirs.len()
    );
    Ok(())
}

fn run(a: RunArgs) -> anyhow::Result<()> {
    let candidates = if a.candidates.is_empty() {
        vec![
            PathBuf::from("candidates/examples"),
            PathBuf::from("candidates/tuned"),
        ]
    } else {
        a.candidates
    };
    let eval = EvalConfig {
        preset: a.preset.unwrap_or(Preset::Full),
        seed: a.seed,
        secret_seed: rand::random(),
        public_sets: a.public_sets,
        secret_sets: a.secret_sets,
        rotation: a.rotation,
        warm_l2: a.warm_l2,
        min_pairs: a.min_pairs.unwrap_or(20),
        max_pairs: a.max_pairs.unwrap_or(400),
        target_half_width: 0.01,
        budget_s: a.budget_s.unwrap_or(20.0),
        win_threshold: a.win_threshold,
    };
    let opts = RunOptions {
        problems: a.problems,
        candidate_roots: candidates,
        preset: a.preset,
        force_cpu: a.cpu,
        require_gpu: a.require_gpu,
        out: a.out,
        peer: a.peer,
        eval,
        timeout_s: a.timeout_s,
        command_line: std::env::args().collect::<Vec<_>>().join(" "),
        workload: a.workload,
    };
    runner::run(opts, a.resume.as_deref())?;
    Ok(())
}
