//! `dlrm-bench sweep`: from model endpoints to scored answers. `generate` asks every model of a
//! `sweep.toml` for every problem k times (or replays collected replies) and extracts the
//! answers; `score` runs them through `run`/`kernelbench` ([`score_inputs`]); `report` tabulates
//! them per model ([`report::report`]).
pub mod config;
pub mod extract;
pub mod generate;
mod replay;
pub mod report;

pub use generate::{generate, read_index, AnswerRecord};

use crate::cmd::prompt::Format;
use std::path::{Path, PathBuf};

/// What `sweep score` hands to `run`: the native answers' candidate roots and the KernelBench
/// answers' directories, one per model and sample (`answers/<model>-s<k>`), and the problems
/// answered.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScoreInputs {
    pub native: Vec<PathBuf>,
    pub kernelbench: Vec<PathBuf>,
    pub problems: Vec<String>,
}

/// The extracted answers of the sweep in `dir`, as `run` takes them.
pub fn score_inputs(dir: &Path) -> anyhow::Result<ScoreInputs> {
    let mut inputs = ScoreInputs::default();
    for r in read_index(dir)? {
        let Some(path) = &r.path else { continue };
        if !inputs.problems.contains(&r.problem) {
            inputs.problems.push(r.problem.clone());
        }
        let sample_dir = dir
            .join(path)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let list = match r.format {
            Format::Native => &mut inputs.native,
            Format::Kernelbench => &mut inputs.kernelbench,
        };
        if !list.contains(&sample_dir) {
            list.push(sample_dir);
        }
    }
    Ok(inputs)
}
