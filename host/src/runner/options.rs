//! What a run is asked to do (`RunOptions`, from the command line or a resumed `run.json`) and what it returns.
use crate::evaluate::EvalConfig;
use crate::report::metrics::Basis;
use crate::report::metrics::Summary;
use crate::results::record::Record;
use crate::runner::shard::Shard;
use bench_problems::Preset;
use serde::Deserialize;
use serde::Serialize;
use std::path::PathBuf;

/// Everything `run` needs (also stored in `run.json`, so `--resume` can rebuild it).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunOptions {
    pub problems: Vec<String>,
    /// The shapes to run each problem at ([`ALL_SHAPES`], or names); a run recorded before
    /// shapes existed ran the default shape only.
    #[serde(default = "default_shape_only")]
    pub shapes: Vec<String>,
    pub candidate_roots: Vec<PathBuf>,
    pub preset: Option<Preset>,
    pub force_cpu: bool,
    pub require_gpu: bool,
    pub out: PathBuf,
    pub peer: Vec<PathBuf>,
    pub eval: EvalConfig,
    /// Seconds one execution of a candidate's launch plan may run on the device before its
    /// worker is killed ([`execution_limit_s`]); the harness's own work never counts.
    pub timeout_s: f64,
    pub command_line: String,
    /// A workload profile to project the run's wins onto (summary and run.json).
    #[serde(default)]
    pub workload: Option<PathBuf>,
    /// Time PyTorch eager (`tools/torch_peer.py`) on the run's own input files.
    #[serde(default)]
    pub torch: bool,
    /// Also time the `torch.compile`d Model (with `torch`).
    #[serde(default)]
    pub torch_compile: bool,
    /// The input cache's directory (default [`default_input_cache`]).
    #[serde(default)]
    pub input_cache: Option<PathBuf>,
    /// Keep the input cache after the run.
    #[serde(default)]
    pub keep_inputs: bool,
    /// Directories of KernelBench answers (`dlrm-bench kernelbench`): each answer is evaluated
    /// after its problem's native candidates ([`crate::kernelbench`]).
    #[serde(default)]
    pub kernelbench: Vec<PathBuf>,
    /// Seconds each of an answer's two evaluator processes may take (loading, compiling,
    /// checking, timing) before it is killed.
    #[serde(default = "default_answer_timeout_s")]
    pub answer_timeout_s: f64,
    /// Run KernelBench answers, and compile Triton candidates, even where no sandbox works
    /// (resource limits alone).
    #[serde(default)]
    pub unsandboxed: bool,
    /// The file the secret seed was read from (`--secret-seed-file`), hidden from sandboxed
    /// processes; never written to run.json.
    #[serde(default, skip_serializing)]
    pub secret_seed_file: Option<PathBuf>,
    /// The basis of the headline metrics (every basis measured is reported).
    #[serde(default)]
    pub basis: Basis,
    /// Print the final table with every column (else it fits 120 columns). On `--resume`, the
    /// command line's, not the interrupted run's.
    #[serde(default)]
    pub wide: bool,
    /// This run's share of the items (`--shard i/n`, [`crate::runner::shard`]); `None`: all of them.
    #[serde(default)]
    pub shard: Option<Shard>,
    /// The ordinals of the devices that run workers, one worker per device at a time
    /// (`--devices`; empty: device 0).
    #[serde(default)]
    pub devices: Vec<usize>,
    /// `--devices all`: every CUDA device (resolved into `devices` when the run starts).
    #[serde(default)]
    pub all_devices: bool,
    /// The secret seed the scheduler gave (`--secret-seed-file`, `DLRM_BENCH_SECRET_SEED`):
    /// never written into `run.json` with the options.
    #[serde(skip)]
    pub given_secret: Option<u64>,
}

/// `--shapes all`: every shape of each problem.
pub const ALL_SHAPES: &str = "all";

fn default_shape_only() -> Vec<String> {
    vec![bench_problems::DEFAULT_SHAPE.to_string()]
}

fn default_answer_timeout_s() -> f64 {
    600.0
}

/// What a finished run produced.
pub struct RunOutcome {
    pub dir: PathBuf,
    pub records: Vec<Record>,
    /// The group metrics on both bases.
    pub metrics: Summary,
    pub on_gpu: bool,
}

impl RunOptions {
    /// Whether every bounded option is within its command-line range
    /// ([`crate::cmd::arg_bounds`]): a resumed `run.json` is checked so, its options not
    /// having come through the parser. The error names the field.
    pub(crate) fn check_bounds(&self) -> Result<(), String> {
        use crate::cmd::arg_bounds::{check_seconds, MAX_PAIRS, MAX_SETS};
        let e = &self.eval;
        let seconds = [
            ("timeout_s", self.timeout_s),
            ("answer_timeout_s", self.answer_timeout_s),
            ("config.budget_s", e.budget_s),
        ];
        for (field, x) in seconds {
            check_seconds(x).map_err(|m| format!("field `{field}` = {x}: {m}"))?;
        }
        let counts = [
            ("config.public_sets", e.public_sets, MAX_SETS),
            ("config.secret_sets", e.secret_sets, MAX_SETS),
            ("config.rotation", e.rotation, MAX_SETS),
            ("config.min_pairs", e.min_pairs, MAX_PAIRS),
            ("config.max_pairs", e.max_pairs, MAX_PAIRS),
        ];
        for (field, n, hi) in counts {
            if !(1..=hi).contains(&n) {
                return Err(format!("field `{field}` = {n}: must be from 1 to {hi}"));
            }
        }
        if e.min_pairs > e.max_pairs {
            return Err(format!(
                "field `config.min_pairs` = {} is greater than `config.max_pairs` = {}",
                e.min_pairs, e.max_pairs
            ));
        }
        crate::cmd::arg_bounds::win_threshold(&e.win_threshold.to_string())
            .map_err(|m| format!("field `config.win_threshold`: {m}"))?;
        Ok(())
    }
}
