//! `dlrm-bench`: the command line. Subcommands `list`, `gen`, `stats`, `run`, `kernelbench`,
//! `check`, `report`, `project`, `new-problem`, `prompt` and `selftest`; this file parses them
//! and calls the library, where all work lives.
use bench_problems::Preset;
use clap::{CommandFactory, Parser, Subcommand};
use dlrm_bench::cmd::arg_bounds::{at_least_one, positive_seconds, set_count, win_threshold};
use dlrm_bench::cmd::gen::{self, GenArgs};
use dlrm_bench::cmd::prompt::Format;
use dlrm_bench::cmd::stats::{self, StatsArgs};
use dlrm_bench::cmd::{check, list, new_problem, prompt};
use dlrm_bench::evaluate::EvalConfig;
use dlrm_bench::parse_preset;
use dlrm_bench::report::metrics::Basis;
use dlrm_bench::report::{self, projection};
use dlrm_bench::runner::worker;
use dlrm_bench::runner::ALL_SHAPES;
use dlrm_bench::runner::{self, RunOptions};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

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
        #[arg(long, conflicts_with = "shapes")]
        names: bool,
        /// Print each problem's timed shapes (what `run --shapes` picks from) at a preset:
        /// ci, small or full.
        #[arg(long, value_name = "PRESET", num_args = 0..=1, default_missing_value = "full", value_parser = parse_preset)]
        shapes: Option<Preset>,
    },
    /// Write a problem's input sets to safetensors (the same sets `run` uses for its seed).
    Gen(GenArgs),
    /// Print input statistics of a table-set preset (a generated batch) or of a trace.
    Stats(StatsArgs),
    /// Check and time candidates against the references.
    Run(RunArgs),
    /// Score KernelBench answers (`ModelNew` classes, one file per problem named
    /// NN_<problem>.py or <problem>.py; each directory is one group: a model or a sample) on
    /// the suite's input sets, under the suite's protocol and KernelBench's, beside each
    /// problem's reference and PyTorch eager (tools/kernelbench_eval.py; needs python3 with
    /// torch and a GPU). Without --problem, the problems the answers are for; without
    /// --candidates, no native candidate. An interrupted one is finished by `run --resume DIR`.
    #[command(mut_arg("resume", |a| a.hide(true)))]
    Kernelbench {
        /// Directories of answers.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Seconds each of an answer's two evaluator processes may take before it is killed.
        #[arg(long, default_value_t = 600.0, value_parser = positive_seconds)]
        answer_timeout_s: f64,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Ask models for answers (OpenAI-compatible endpoints, or replayed replies) and score them:
    /// `sweep generate`, then `sweep score`.
    Sweep {
        #[command(subcommand)]
        action: SweepAction,
    },
    /// (internal) One worker process of `run`: reads its spec from stdin.
    #[command(hide = true)]
    Worker,
    /// Tables and metrics of one or more result sets, pooled (each problem from the last set
    /// that measured it; the shards of one `run --shard i/n` count as one set, their records
    /// as --merge would make them), optionally with a projection.
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
        /// Also write the report as one self-contained HTML page (inline SVG plots) here.
        #[arg(long)]
        html: Option<PathBuf>,
        /// The headline metrics' basis: over the Rust reference (paired), over PyTorch eager
        /// or over the torch.compile'd Model (when measured); the others are shown too.
        #[arg(long, value_enum, default_value_t = Basis::Reference)]
        basis: Basis,
        /// Print the records' table with every column (by default it fits 120 columns).
        #[arg(long, conflicts_with_all = ["csv", "json"])]
        wide: bool,
        /// Print summary.csv's rows on stdout instead of the tables.
        #[arg(long, conflicts_with = "json")]
        csv: bool,
        /// Print the pooled records and the summary metrics as JSON on stdout instead of the
        /// tables.
        #[arg(long)]
        json: bool,
        /// The results are the shards of one `run --shard i/n`: merge them into one result set
        /// in --out (refusing shards of different runs, a shard twice, or a missing shard).
        #[arg(long, requires = "out", conflicts_with_all = ["workload", "csv", "json", "html"])]
        merge: bool,
        /// With --merge: the shards' secret seed, to publish in the merged run.json (else
        /// DLRM_BENCH_SECRET_SEED; without either it stays unpublished).
        #[arg(long, requires = "merge")]
        secret_seed_file: Option<PathBuf>,
        /// Pool sets of different backends, devices or presets (refused otherwise); each row
        /// then names where it came from.
        #[arg(long)]
        allow_mixed: bool,
    },
    /// Project a run's speedups onto a workload profile (Amdahl): the addressable fraction of
    /// the step and the projected step speedup; over several profiles, one table of them.
    Project {
        /// Results directories of `run` (or their results.jsonl files); their records are
        /// pooled, so problems measured in different runs project together.
        #[arg(required = true)]
        results: Vec<PathBuf>,
        /// The workload profile (see workloads/README.md). Give it several times, or a
        /// directory of profiles, for one table over them all.
        #[arg(long, required = true)]
        workload: Vec<PathBuf>,
        /// Use only this candidate group's wins (a group: the directory given to
        /// `--candidates`, or a KernelBench answers' directory, as the report's group column
        /// names it; default: the fastest win of any group).
        #[arg(long)]
        group: Option<String>,
        /// Pool sets of different backends, devices or presets (refused otherwise); each row
        /// then names where it came from.
        #[arg(long)]
        allow_mixed: bool,
    },
    /// Write a new problem's module, kernel module and KernelBench file from a sibling, names
    /// replaced, and register it (docs/adding-a-problem.md).
    NewProblem {
        /// The new problem's name (snake_case).
        name: String,
        /// The existing problem to start from.
        #[arg(long)]
        like: String,
        /// The repository's root.
        #[arg(long, default_value = ".")]
        repo: PathBuf,
    },
    /// Print what an LLM pipeline sends to have an answer written: a KernelBench-style prompt
    /// (the problem's `Model`, asking for a `ModelNew` with inline CUDA) or the native one
    /// (tensors, semantics, kernel parameters, a candidate.toml template, the checks).
    Prompt {
        /// The problem, by name or number (see `list`).
        problem: String,
        /// Which prompt.
        #[arg(long, value_enum)]
        format: Format,
        /// The sizes the prompt gives (native) or names for the inputs (kernelbench): ci,
        /// small or full.
        #[arg(long, default_value = "full", value_parser = parse_preset)]
        preset: Preset,
    },
    /// Validate candidates without running them: manifest, NVRTC compile (no GPU needed), and
    /// every launch rule of `run` at the ci, small and full sizes (the GPU's limits, or an
    /// H100/H200's without one), each argument against the kernel's parameters.
    Check {
        /// Candidate directories (each with a candidate.toml); at least one.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// NVRTC target architecture for candidates whose manifest names no `arch` (a manifest's
        /// `arch` wins): `compute_XX` or `sm_XX` (compiled to PTX either way; Triton kernels for sm_XX).
        #[arg(long, default_value = dlrm_bench::toolchain::nvrtc_flags::DEFAULT_ARCH, value_parser = parse_arch)]
        arch: String,
    },
    /// Run every problem's degenerate-output self-test on the host (no GPU); with --allclose,
    /// print instead, as markdown, what our check and KernelBench's allclose (atol = rtol =
    /// 1e-2 and 1e-4) say of each degenerate output.
    Selftest {
        /// The sizes the degenerate outputs are made at: ci, small or full.
        #[arg(long, default_value = "ci", value_parser = parse_preset)]
        preset: Preset,
        /// Print our check's and KernelBench's allclose verdicts on each degenerate output
        /// (markdown) instead of running the self-test.
        #[arg(long)]
        allclose: bool,
    },
}

#[derive(Subcommand)]
enum SweepAction {
    /// Ask every model of a sweep.toml (docs/sweeps.md) for every problem k times and extract
    /// the answers into OUT: cached by what was asked (a re-run or a resumed sweep asks nothing
    /// twice), failures retried and recorded, one line per answer in OUT/answers.jsonl. Exit
    /// status 1 when some request still failed (run it again to retry them).
    Generate {
        /// The sweep's models (TOML; docs/sweeps.md).
        #[arg(long)]
        config: PathBuf,
        /// The sweep's directory (made when missing; resumed when it exists).
        #[arg(long)]
        out: PathBuf,
        /// Replies collected elsewhere (JSONL: model, problem, sample, content): extracted as
        /// if asked; nothing is sent.
        #[arg(long)]
        responses: Option<PathBuf>,
    },
    /// Score a sweep's extracted answers: native ones with `run`, KernelBench ones with
    /// `kernelbench` (each `answers/<model>-s<k>` one group), into DIR/results unless --out
    /// says otherwise; shardable with --shard as `run` is.
    Score {
        /// The sweep's directory.
        dir: PathBuf,
        /// Seconds each of a KernelBench answer's two evaluator processes may take.
        #[arg(long, default_value_t = 600.0, value_parser = positive_seconds)]
        answer_timeout_s: f64,
        #[command(flatten)]
        run: Box<RunArgs>,
    },
    /// One row per model over its k samples: correct %, pass@1 and pass@k, win rate (a problem
    /// won by any sample) over the reference and eager, fast_1, median speedups, tokens and
    /// cost per correct answer and per win; also DIR/report.md, .json and .html.
    Report {
        /// The sweep's directory (after `sweep score`).
        dir: PathBuf,
        /// Project each model's wins onto this workload profile (workloads/README.md).
        #[arg(long)]
        workload: Option<PathBuf>,
    },
}

#[derive(clap::Args)]
struct RunArgs {
    /// Problems to run, by name or number (`--problem 1,embedding_bag_sum --problem 12`;
    /// default: all).
    #[arg(long = "problem", value_delimiter = ',')]
    problems: Vec<String>,
    /// Directories searched for candidate.toml (default: candidates/examples and candidates/tuned).
    /// Each must exist and hold a candidate.toml (see --no-candidates for a reference-only run).
    #[arg(long = "candidates")]
    candidates: Vec<PathBuf>,
    /// Run the references alone (no candidates; e.g. to profile them).
    #[arg(long, conflicts_with = "candidates")]
    no_candidates: bool,
    /// Size preset: ci, small or full (default: full on a GPU; the emulator always runs ci).
    #[arg(long, value_parser = parse_preset)]
    preset: Option<Preset>,
    /// Shapes each problem is checked and timed at: `all`, or names (`--shapes default,d32`);
    /// a problem runs at those of its shapes named. `dlrm-bench list --shapes` lists them.
    /// KernelBench answers run at the default shape (`kernelbench` alone: only that one).
    #[arg(long, value_delimiter = ',', default_value = "all")]
    shapes: Vec<String>,
    /// Use the CPU emulator even if a GPU is present.
    #[arg(long)]
    cpu: bool,
    /// Fail instead of falling back to the emulator.
    #[arg(long, conflicts_with = "cpu")]
    require_gpu: bool,
    /// The public seed: the public input sets are drawn from it (the same seed, the same
    /// inputs; `gen --seed` writes them). The secret sets come from the secret seed.
    #[arg(long, default_value_t = 2026)]
    seed: u64,
    /// Public input sets (at least 1), checked before the timing.
    #[arg(long, default_value_t = 3, value_parser = set_count)]
    public_sets: usize,
    /// Secret input sets (at least 1), drawn from a seed made at run start: the timing rotates
    /// among them, so a candidate first meets them in a timed (and checked) run.
    #[arg(long, default_value_t = 3, value_parser = set_count)]
    secret_sets: usize,
    /// Input sets the timing rotates among (at least 1; at most --secret-sets are used).
    #[arg(long, default_value_t = 3, value_parser = set_count)]
    rotation: usize,
    /// Time without flushing L2 first.
    #[arg(long)]
    warm_l2: bool,
    /// Timed pairs at least (default 20, or --max-pairs when lower; at most --max-pairs).
    #[arg(long, value_parser = at_least_one)]
    min_pairs: Option<usize>,
    /// Timed pairs at most (default 400).
    #[arg(long, value_parser = at_least_one)]
    max_pairs: Option<usize>,
    /// Seconds of timing per candidate at most (default 20).
    #[arg(long, value_parser = positive_seconds)]
    budget_s: Option<f64>,
    /// A win needs the speedup's lower 95% bound above this (at least 1.0).
    #[arg(long, default_value_t = 1.0, value_parser = win_threshold)]
    win_threshold: f64,
    /// PyTorch peer timings (JSONL from tools/torch_peer.py) to show beside the references.
    #[arg(long)]
    peer: Vec<PathBuf>,
    /// Where the run's directory (`<out>/<run-id>/`: run.json, results.jsonl, summary.md,
    /// report.html) is made.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Seconds one execution of a candidate's launch plan may run on the device before its
    /// worker is killed (`timeout`); the limit is also at most 1000 times the reference's
    /// median (but never under 10 s). The harness's own work never counts.
    #[arg(long, default_value_t = 180.0, value_parser = positive_seconds)]
    timeout_s: f64,
    /// Run KernelBench answers, and compile Triton candidates (both run untrusted Python), even
    /// where bubblewrap does not work: under user namespaces or only resource limits (network
    /// and writes then not confined).
    #[arg(long)]
    unsandboxed: bool,
    /// Project the run's wins onto this workload profile (workloads/README.md): the
    /// addressable fraction and the projected step speedup, in the summary and run.json.
    #[arg(long)]
    workload: Option<PathBuf>,
    /// Time PyTorch beside the references (`tools/torch_peer.py`, when python3 with torch and a
    /// GPU are there) on the run's own input files, before each problem's candidates: `--torch`
    /// (or `--torch eager`) times eager; `--torch compile` or `--torch eager,compile` also the
    /// `torch.compile`d Model (eager is always timed: it is the references' yardstick). On
    /// `kernelbench`, `--torch DIR` is eager and keeps DIR one of the directories (the word
    /// after `--torch` is its value only when it is a list of yardsticks).
    #[arg(long, num_args = 0..=1, default_missing_value = TORCH_BARE, value_parser = parse_torch)]
    torch: Option<TorchPeers>,
    /// Where the run's input cache goes (default: /dev/shm/dlrm-bench/<run-id>-<pid> when /dev/shm is
    /// writable, else <run dir>/inputs).
    #[arg(long)]
    input_cache: Option<PathBuf>,
    /// Keep the input cache when the run ends (by default each problem's files are removed once
    /// its candidates are done).
    #[arg(long)]
    keep_inputs: bool,
    /// The headline metrics' basis: over the Rust reference (paired), over PyTorch eager (when
    /// measured, e.g. with --torch) or over the torch.compile'd Model (--torch eager,compile);
    /// the others are shown too.
    #[arg(long, value_enum, default_value_t = Basis::Reference)]
    basis: Basis,
    /// Print the final table with every column (by default it fits 120 columns; summary.md and
    /// summary.csv always have every column). Allowed with --resume.
    #[arg(long)]
    wide: bool,
    /// Run shard i of n (0 ≤ i < n) of the (problem, candidate) items, for a cluster
    /// scheduler's array job; every shard needs the same options and secret seed
    /// (--secret-seed-file or DLRM_BENCH_SECRET_SEED). Merge with `report --merge`.
    #[arg(long, value_parser = dlrm_bench::runner::shard::Shard::parse)]
    shard: Option<dlrm_bench::runner::shard::Shard>,
    /// The GPUs to use, one worker per GPU at a time: ordinals `0,1,...` or `all`. Each
    /// problem's candidates are split over them, and each GPU measures the reference it pairs
    /// its candidates with. On the emulator, `--cpu --devices 0,1` emulates two devices.
    #[arg(long, value_parser = dlrm_bench::runner::shard::parse_devices)]
    devices: Option<dlrm_bench::runner::shard::Devices>,
    /// A file whose first line is the secret seed (a decimal u64): shards must share it. Else
    /// DLRM_BENCH_SECRET_SEED when set, else a random one. Allowed with --resume (a shard that
    /// ended keeps no seed of its own).
    #[arg(long)]
    secret_seed_file: Option<PathBuf>,
    /// Finish the interrupted run in this results directory. Its options are reused as
    /// run.json records them, so no other option of `run` may be given with it (each is
    /// refused); it must run on the same kind of backend, device and preset as the run did.
    #[arg(long, conflicts_with_all = [
        "problems", "candidates", "no_candidates", "preset", "cpu", "require_gpu", "seed", "public_sets",
        "secret_sets", "rotation", "warm_l2", "min_pairs", "max_pairs", "budget_s",
        "win_threshold", "peer", "out", "timeout_s", "workload", "torch", "input_cache",
        "keep_inputs", "basis", "shard", "devices",
    ])]
    resume: Option<PathBuf>,
}

fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse_from(bare_torch_before_positionals(std::env::args_os()));
    match cli.command {
        Command::List {
            shapes: Some(preset),
            ..
        } => println!("{}", list::render_shapes(preset)),
        Command::List { names, .. } => println!("{}", list::render(names)),
        Command::Gen(args) => gen::gen(&args)?,
        Command::Stats(args) => print!("{}", stats::render(&args)?),
        Command::Run(args) => return run(args, Vec::new(), 600.0),
        Command::Kernelbench {
            dirs,
            answer_timeout_s,
            mut run,
        } => {
            run.torch = Some(run.torch.unwrap_or_default());
            if run.candidates.is_empty() {
                run.no_candidates = true;
                // Answers are evaluated at the default shape (their get_inputs' sizes are one
                // shape): the reference alone at the others would be time for nothing.
                if run.shapes == [ALL_SHAPES] {
                    run.shapes = vec![bench_problems::DEFAULT_SHAPE.to_string()];
                }
            }
            return self::run(run, dirs, answer_timeout_s);
        }
        Command::Sweep { action } => return sweep(action),
        Command::Worker => worker::main()?,
        Command::NewProblem { name, like, repo } => {
            println!("{}", new_problem::new_problem_command(&repo, &name, &like)?)
        }
        Command::Prompt {
            problem,
            format,
            preset,
        } => print!("{}", prompt::render(&problem, format, preset)?),
        Command::Check { dirs, arch } => check::check_dirs(&dirs, &arch)?,
        Command::Selftest { preset, allclose } => return selftest(preset, allclose),
        Command::Report {
            results,
            workload,
            out,
            html,
            basis,
            wide,
            csv,
            json,
            merge,
            secret_seed_file,
            allow_mixed,
        } => {
            if merge {
                let secret = dlrm_bench::runner::shard::secret_seed(secret_seed_file.as_deref())?;
                let out = out.expect("clap requires --out with --merge");
                dlrm_bench::cmd::merge::merge(&results, &out, secret)?;
                return Ok(ExitCode::SUCCESS);
            }
            let format = match (wide, csv, json) {
                (_, true, _) => report::ReportFormat::Csv,
                (_, _, true) => report::ReportFormat::Json,
                (true, _, _) => report::ReportFormat::Wide,
                _ => report::ReportFormat::Tables,
            };
            // Each set's run.json and records read once, pooled once, summarised once.
            let r = report::PooledReport::read(&results, workload.as_deref(), basis, allow_mixed)?;
            report::report(&r.pooled, &r.summary, r.projected(), out.as_deref(), format)?;
            if out.is_some() || html.is_some() {
                let (o, h) = (out.as_deref(), html.as_deref());
                dlrm_bench::report::html::write_pooled_report(
                    &r.pooled,
                    &r.summary,
                    r.projected(),
                    o,
                    h,
                )?;
            }
        }
        Command::Project {
            results,
            workload,
            group,
            allow_mixed,
        } => {
            dlrm_bench::results::warn_emulator_sets(&results);
            let records = dlrm_bench::results::pool_runs(&results, allow_mixed)?;
            let text = match workload.as_slice() {
                [one] if !one.is_dir() => {
                    projection::project_file(one, &records, group.as_deref())?
                }
                several => projection::project_many(several, &records, group.as_deref())?,
            };
            println!("{text}");
            if let Some(caveat) = dlrm_bench::results::emulator_caveat(&results) {
                println!("\n{caveat}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn sweep(action: SweepAction) -> anyhow::Result<ExitCode> {
    match action {
        SweepAction::Generate {
            config,
            out,
            responses,
        } => {
            let records = dlrm_bench::sweep::generate(&config, &out, responses.as_deref())?;
            print!("{}", dlrm_bench::sweep::generate::summary(&records));
            let failed = records
                .iter()
                .any(|r| r.status == dlrm_bench::sweep::extract::AnswerStatus::RequestFailed);
            Ok(if failed {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
        SweepAction::Score {
            dir,
            answer_timeout_s,
            mut run,
        } => {
            let inputs = dlrm_bench::sweep::score_inputs(&dir)?;
            let (native, kernelbench) = (inputs.native, inputs.kernelbench);
            anyhow::ensure!(
                !native.is_empty() || !kernelbench.is_empty(),
                "{}: no extracted answer to score (see its answers.jsonl)",
                dir.display()
            );
            if run.problems.is_empty() {
                run.problems = inputs.problems;
            }
            run.no_candidates = native.is_empty();
            run.candidates = native;
            if run.out == Path::new("results") {
                run.out = dir.join("results");
            }
            if !kernelbench.is_empty() {
                run.torch = Some(run.torch.unwrap_or_default());
            }
            self::run(*run, kernelbench, answer_timeout_s)
        }
        SweepAction::Report { dir, workload } => {
            let text = dlrm_bench::sweep::report::report(&dir, workload.as_deref())?;
            print!("{text}");
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn selftest(preset: Preset, allclose: bool) -> anyhow::Result<ExitCode> {
    let problems = bench_problems::all_problems();
    if allclose {
        let table = bench_problems::selftest::allclose_table(&problems, preset)
            .map_err(anyhow::Error::msg)?;
        print!("{table}");
        return Ok(ExitCode::SUCCESS);
    }
    let mut failed = false;
    for p in problems {
        let verdict = bench_problems::selftest::self_test(p, preset);
        failed |= verdict.is_err();
        println!(
            "{:>2} {:<36} {}",
            p.number(),
            p.name(),
            verdict.err().as_deref().unwrap_or("ok")
        );
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// `--problem` values (names or catalog numbers) as names, each once, in the order given.
fn problem_names(given: &[String]) -> anyhow::Result<Vec<String>> {
    let mut names: Vec<String> = Vec::new();
    for spec in given {
        let name = dlrm_bench::cmd::prompt::find(spec)
            .map_err(|e| anyhow::anyhow!("--problem: {e}"))?
            .name()
            .to_string();
        if !names.contains(&name) {
            names.push(name);
        }
    }
    Ok(names)
}

fn run(a: RunArgs, kernelbench: Vec<PathBuf>, answer_timeout_s: f64) -> anyhow::Result<ExitCode> {
    let (min_pairs, max_pairs) = dlrm_bench::cmd::arg_bounds::pairs(a.min_pairs, a.max_pairs)?;
    let given_secret = dlrm_bench::runner::shard::secret_seed(a.secret_seed_file.as_deref())?;
    if let (Some(s), None) = (a.shard, given_secret) {
        anyhow::bail!(
            "--shard {s}: the shards must share one secret seed: give it with \
             --secret-seed-file PATH or {}",
            dlrm_bench::runner::shard::SECRET_ENV
        );
    }
    let (devices, all_devices) = match a.devices {
        None => (Vec::new(), false),
        Some(dlrm_bench::runner::shard::Devices::All) => (Vec::new(), true),
        Some(dlrm_bench::runner::shard::Devices::List(l)) => (l, false),
    };
    let candidates = if a.no_candidates {
        Vec::new()
    } else if a.candidates.is_empty() {
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
        secret_seed: given_secret.unwrap_or_else(rand::random),
        public_sets: a.public_sets,
        secret_sets: a.secret_sets,
        rotation: a.rotation,
        warm_l2: a.warm_l2,
        min_pairs,
        max_pairs,
        target_half_width: 0.01,
        budget_s: a.budget_s.unwrap_or(20.0),
        win_threshold: a.win_threshold,
    };
    let opts = RunOptions {
        problems: problem_names(&a.problems)?,
        shapes: a.shapes,
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
        torch: a.torch.is_some(),
        torch_compile: a.torch.is_some_and(|t| t.compile),
        input_cache: a.input_cache,
        keep_inputs: a.keep_inputs,
        kernelbench,
        answer_timeout_s,
        unsandboxed: a.unsandboxed,
        secret_seed_file: a.secret_seed_file.clone(),
        basis: a.basis,
        wide: a.wide,
        shard: a.shard,
        devices,
        all_devices,
        given_secret,
    };
    let outcome = runner::run(opts, a.resume.as_deref())?;
    Ok(runner::exit_code(&outcome.records))
}

/// What `--torch` asks PyTorch's peer to time.
#[derive(Clone, Copy, Debug, Default)]
struct TorchPeers {
    compile: bool,
}

/// What a bare `--torch` means.
const TORCH_BARE: &str = "eager";

/// `args` (the program's name first) with each bare `--torch` that is followed by a word that
/// is not its value written `--torch=eager`, on a subcommand that also takes positionals
/// (`kernelbench DIR...`). clap takes the word after `--torch` as its optional value whatever
/// it is (it does not fall back to a positional when the value parser refuses it), so
/// `kernelbench --torch answers/a` would parse `answers/a` as a yardstick and fail. The word
/// is `--torch`'s value when [`parse_torch`] accepts it (`--torch eager,compile DIR` as
/// documented), or when it reads as a list of
/// yardsticks (letters and commas) and no such path exists, so that a typo (`--torch complie
/// DIR`) is refused as an unknown yardstick rather than run as a directory; else it stays a
/// positional. Subcommands without positionals (`run`) are left alone, and nothing after `--`
/// is touched.
fn bare_torch_before_positionals<I, T>(args: I) -> Vec<OsString>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let mut args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let cli = Cli::command();
    let Some(sub) = args.get(1).and_then(|name| cli.find_subcommand(name)) else {
        return args;
    };
    let has_torch = sub.get_arguments().any(|a| a.get_id() == "torch");
    if !has_torch || sub.get_positionals().next().is_none() {
        return args;
    }
    // Whether the word after a bare `--torch` is left to clap: an option, or `--torch`'s value.
    let left_to_clap = |word: &OsString| {
        word.to_str().is_none_or(|w| {
            let yardsticks = w
                .split(',')
                .all(|p| p.chars().all(|c| c.is_ascii_alphabetic()));
            w.starts_with('-') || parse_torch(w).is_ok() || (yardsticks && !Path::new(w).exists())
        })
    };
    for i in 2..args.len().saturating_sub(1) {
        if args[i] == "--" {
            break;
        }
        if args[i] == "--torch" && !left_to_clap(&args[i + 1]) {
            args[i] = format!("--torch={TORCH_BARE}").into();
        }
    }
    args
}

/// The value parser of `--torch`: a comma-separated list of `eager` and `compile`.
fn parse_torch(s: &str) -> Result<TorchPeers, String> {
    let mut peers = TorchPeers::default();
    for part in s.split(',').map(str::trim) {
        match part {
            "eager" => {}
            "compile" => peers.compile = true,
            other => {
                return Err(format!(
                    "unknown PyTorch yardstick `{other}` (a comma-separated list of `eager` and \
                     `compile`)"
                ))
            }
        }
    }
    Ok(peers)
}

/// The value parser of `check --arch`.
fn parse_arch(s: &str) -> Result<String, String> {
    dlrm_bench::toolchain::nvrtc_flags::ptx_arch(s)
        .map(|_| s.to_string())
        .ok_or_else(|| {
            format!(
                "unknown arch `{s}` (sm_XX or compute_XX, XX one of: {})",
                dlrm_bench::toolchain::nvrtc_flags::ARCHES.join(", ")
            )
        })
}

#[cfg(test)]
#[path = "main_tests.rs"]
mod tests;
