//! `dlrm-bench sweep generate`: every model of a `sweep.toml` asked for every problem k times,
//! in the sweep's directory:
//!
//! * `cache/` — each answered exchange by the hash of what was asked ([`model_client::Cache`]):
//!   a re-run, or a sweep resumed after a kill, asks nothing it has an answer to;
//! * `failed/<key>.json` — exchanges whose every attempt failed (asked again next time);
//! * `answers/<model>-s<k>/` — the extracted answers: `NN_<problem>.py` (KernelBench) or
//!   `<problem>/candidate.toml` and its source (native), what `kernelbench` and `run` take;
//! * `answers.jsonl` — one line per (model, problem, sample): its status, tokens, latency and
//!   cache key (written whole at the end, from the cache, so it is never half a sweep's).
use super::config::{ModelConfig, SweepConfig};
use super::extract::{extract, AnswerStatus};
use super::replay::{Replay, ReplayKey};
use crate::cmd::prompt::{self, Format};
use crate::results::run_dir::{write_atomically, write_json};
use anyhow::Context;
use bench_problems::{Preset, Problem};
use indicatif::{ProgressBar, ProgressStyle};
use model_client::{cache_key, complete, Ask, Cache, Endpoint, Exchange, Outcome, RetryPolicy};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// The longest reply read (a reply past it fails its attempt).
const MAX_REPLY_BYTES: usize = 4 << 20;

/// One line of `answers.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AnswerRecord {
    pub model: String,
    pub problem: String,
    pub number: u32,
    pub sample: u32,
    pub format: Format,
    pub status: AnswerStatus,
    pub message: String,
    /// The exchange's key in `cache/` (or `failed/`).
    pub key: String,
    /// The answer's file or directory, relative to the sweep's directory.
    pub path: Option<String>,
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub latency_s: f64,
    pub attempts: u32,
    /// Taken from the cache: not asked in this invocation.
    pub cached: bool,
    pub replayed: bool,
}

/// One ask of the sweep.
struct Job<'a> {
    model: &'a ModelConfig,
    problem: &'static dyn Problem,
    sample: u32,
}

/// What every job shares.
struct Shared<'a> {
    dir: &'a Path,
    preset: Preset,
    client: reqwest::blocking::Client,
    replay: Option<&'a Replay>,
    bar: ProgressBar,
}

/// Runs the sweep of `config` into `dir`; with `responses`, replies come from that file and
/// nothing is asked. Returns the records of `answers.jsonl`.
pub fn generate(
    config: &Path,
    dir: &Path,
    responses: Option<&Path>,
) -> anyhow::Result<Vec<AnswerRecord>> {
    let cfg = SweepConfig::load(config)?;
    let replay = responses.map(Replay::load).transpose()?;
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    let kept = dir.join("sweep.toml");
    let same = std::fs::canonicalize(config).ok() == std::fs::canonicalize(&kept).ok();
    if !same {
        std::fs::copy(config, &kept)
            .with_context(|| format!("copying {} into {}", config.display(), dir.display()))?;
    }
    let jobs = plan(&cfg)?;
    let bar = ProgressBar::new(jobs.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} answers, eta {eta} {msg}").unwrap(),
    );
    let ctx = Shared {
        dir,
        preset: cfg.preset()?,
        client: reqwest::blocking::Client::new(),
        replay: replay.as_ref(),
        bar,
    };
    let mut records = Vec::new();
    for m in &cfg.models {
        let mine: Vec<&Job> = jobs.iter().filter(|j| std::ptr::eq(j.model, m)).collect();
        records.extend(run_model(&ctx, m, &mine)?);
    }
    ctx.bar.finish_and_clear();
    write_index(dir, &records)?;
    Ok(records)
}

/// Every (model, problem, sample), in config, catalog and sample order.
fn plan(cfg: &SweepConfig) -> anyhow::Result<Vec<Job<'_>>> {
    let mut jobs = Vec::new();
    for m in &cfg.models {
        for problem in m.problem_list()? {
            for sample in 0..m.samples {
                jobs.push(Job {
                    model: m,
                    problem,
                    sample,
                });
            }
        }
    }
    Ok(jobs)
}

/// One model's jobs on `concurrency` threads; records in the jobs' order.
fn run_model(ctx: &Shared, m: &ModelConfig, jobs: &[&Job]) -> anyhow::Result<Vec<AnswerRecord>> {
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<Option<anyhow::Result<AnswerRecord>>>> =
        Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..m.concurrency.min(jobs.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(job) = jobs.get(i) else { return };
                let r = answer(ctx, job);
                ctx.bar.inc(1);
                done.lock().unwrap()[i] = Some(r);
            });
        }
    });
    done.into_inner()
        .unwrap()
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect()
}

/// The endpoint of model `m`.
fn endpoint(m: &ModelConfig) -> Endpoint {
    Endpoint {
        base_url: m.base_url.clone(),
        model: m.model.clone(),
        api_key_env: m.api_key_env.clone(),
        timeout: Duration::from_secs_f64(m.timeout_s),
        max_reply_bytes: MAX_REPLY_BYTES,
    }
}

/// One job: its exchange (from the cache, the responses file or the endpoint), its answer
/// extracted and written, its record.
fn answer(ctx: &Shared, job: &Job) -> anyhow::Result<AnswerRecord> {
    let m = job.model;
    let (number, name) = (job.problem.number(), job.problem.name());
    let text = match m.format {
        Format::Kernelbench => prompt::kernelbench(job.problem, ctx.preset)?,
        Format::Native => prompt::native(job.problem, ctx.preset),
    };
    let ask = Ask::user(&text, m.temperature, m.max_tokens, job.sample);
    let ep = endpoint(m);
    let key = cache_key(&ep, &ask);
    // Each model's own cache (two entries with one URL and model id never share replies); a
    // replayed reply answers a replay, never a live run.
    let cache = Cache::new(ctx.dir.join("cache").join(&m.name));
    let cached = cache
        .get(&key)
        .filter(|e| ctx.replay.is_some() || !e.replayed);
    let (exchange, cached) = match cached {
        Some(e) => (Some(e), true),
        None => (fetch(ctx, job, &ep, &ask), false),
    };
    let mut rec = AnswerRecord {
        model: m.name.clone(),
        problem: name.to_string(),
        number,
        sample: job.sample,
        format: m.format,
        status: AnswerStatus::NoResponse,
        message: "no reply for it in the responses file".into(),
        key: key.clone(),
        path: None,
        prompt_tokens: None,
        completion_tokens: None,
        latency_s: 0.0,
        attempts: 0,
        cached,
        replayed: false,
    };
    let answer_dir = ctx
        .dir
        .join("answers")
        .join(format!("{}-s{}", m.name, job.sample));
    let target = match m.format {
        Format::Kernelbench => answer_dir.join(format!("{number:02}_{name}.py")),
        Format::Native => answer_dir.join(name),
    };
    remove_answer(&target)?;
    let Some(e) = exchange else { return Ok(rec) };
    rec.prompt_tokens = e.prompt_tokens;
    rec.completion_tokens = e.completion_tokens;
    rec.latency_s = e.latency_s;
    rec.attempts = e.attempts;
    rec.replayed = e.replayed;
    if e.outcome == Outcome::Failed {
        let failed = ctx.dir.join("failed");
        std::fs::create_dir_all(&failed)
            .with_context(|| format!("{}: cannot create", failed.display()))?;
        write_json(
            &failed.join(format!("{key}.json")),
            &serde_json::to_value(&e)?,
        )?;
        rec.status = AnswerStatus::RequestFailed;
        rec.message = e.error.clone().unwrap_or_default();
        return Ok(rec);
    }
    cache
        .put(&key, &e)
        .with_context(|| format!("{}: cannot write", cache.path(&key).display()))?;
    let x = extract(e.content.as_deref().unwrap_or(""), m.format, number, name);
    rec.status = x.status;
    rec.message = x.message;
    if x.status == AnswerStatus::Extracted {
        let base = if m.format == Format::Native {
            &target
        } else {
            &answer_dir
        };
        for (file, text) in &x.files {
            write_file(&base.join(file), text)?;
        }
        rec.path = Some(relative(ctx.dir, &target));
    }
    Ok(rec)
}

/// The exchange for `job` not in the cache: from the responses file (none when it has no reply
/// for it), or asked of the endpoint.
fn fetch(ctx: &Shared, job: &Job, ep: &Endpoint, ask: &Ask) -> Option<Exchange> {
    match ctx.replay {
        Some(r) => r
            .get(&ReplayKey::of(&job.model.name, job.problem, job.sample))
            .map(|line| line.exchange(ep, ask)),
        None => {
            ctx.bar
                .set_message(format!("{} {}", job.model.name, job.problem.name()));
            let policy = RetryPolicy {
                max_attempts: job.model.max_attempts,
                base_delay: Duration::from_secs(2),
                max_delay: Duration::from_secs(120),
            };
            Some(complete(&ctx.client, ep, ask, &policy))
        }
    }
}

/// Removes an earlier invocation's answer at `target` (a file or a candidate directory).
fn remove_answer(target: &Path) -> anyhow::Result<()> {
    let r = if target.is_dir() {
        std::fs::remove_dir_all(target)
    } else {
        std::fs::remove_file(target)
    };
    match r {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("{}: cannot remove", target.display()))
        }
        _ => Ok(()),
    }
}

/// Writes `text` to `path` (its directory made when missing) with the project's atomic write
/// (its temporary file is named after the target, so answers written by several threads at once
/// never share one).
fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    write_atomically(path, text.as_bytes())
}

fn relative(base: &Path, path: &Path) -> String {
    path.strip_prefix(base)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// `answers.jsonl`, whole, through a temporary file.
fn write_index(dir: &Path, records: &[AnswerRecord]) -> anyhow::Result<()> {
    let mut text = String::new();
    for r in records {
        text += &serde_json::to_string(r)?;
        text.push('\n');
    }
    write_file(&dir.join("answers.jsonl"), &text)
}

/// The records of a sweep's `answers.jsonl`.
pub fn read_index(dir: &Path) -> anyhow::Result<Vec<AnswerRecord>> {
    let path: PathBuf = dir.join("answers.jsonl");
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "{}: cannot read (run `sweep generate` first)",
            path.display()
        )
    })?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).with_context(|| format!("{}:{}", path.display(), i + 1))
        })
        .collect()
}

/// The terminal's summary: answers per model and status, tokens, and what was asked now.
pub fn summary(records: &[AnswerRecord]) -> String {
    let mut models: Vec<&str> = Vec::new();
    for r in records {
        if !models.contains(&r.model.as_str()) {
            models.push(&r.model);
        }
    }
    let mut out = String::new();
    for m in models {
        let mine: Vec<&AnswerRecord> = records.iter().filter(|r| r.model == m).collect();
        let mut counts: Vec<(String, usize)> = Vec::new();
        for r in &mine {
            let s = serde_json::to_value(r.status).unwrap_or_default();
            let s = s.as_str().unwrap_or("?").to_string();
            match counts.iter_mut().find(|(k, _)| *k == s) {
                Some((_, n)) => *n += 1,
                None => counts.push((s, 1)),
            }
        }
        let counts: Vec<String> = counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
        let tokens: u64 = mine
            .iter()
            .map(|r| r.prompt_tokens.unwrap_or(0) + r.completion_tokens.unwrap_or(0))
            .sum();
        let asked = mine
            .iter()
            .filter(|r| !r.cached && !r.replayed && r.attempts > 0);
        out += &format!(
            "{m}: {} answers ({}); {} asked now, {tokens} tokens\n",
            mine.len(),
            counts.join(", "),
            asked.count(),
        );
    }
    out
}
