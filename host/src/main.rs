//! `dlrm-bench`: the command line. Subcommands `list`, `gen` and `run`; all work lives in the
//! library.
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
    },
    /// Check and time candidates against the references.
    Run(RunArgs),
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
        } => gen(&problem, preset, seed, sets, &out),
        Command::Run(args) => run(args),
        Command::Check { dirs, arch } => check(&dirs, &arch),
    }
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

fn gen(
    problem: &str,
    preset: Preset,
    seed: u64,
    sets: usize,
    out: &std::path::Path,
) -> anyhow::Result<()> {
    let p = find_problem(problem)
        .with_context(|| format!("unknown problem `{problem}` (see `dlrm-bench list`)"))?;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    for k in 0..sets {
        let set_seed = public_seed(seed, k);
        let mut set = p.generate(preset, &p.sizes(preset), set_seed)?;
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
        command_line: std::env::args().collect::<Vec<_>>().join(" "),
    };
    runner::run(opts)?;
    Ok(())
}
