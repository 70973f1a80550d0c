//! `sweep generate --responses FILE.jsonl`: replies collected elsewhere, one JSON object a line
//! — `{"model": "a", "problem": "kjt_permute" or 8, "sample": 0, "content": "...",
//! "prompt_tokens": 1200, "completion_tokens": 900}` (tokens optional) — put through the same
//! extraction as asked ones. Errors name the file, the line and the field.
use crate::cmd::prompt;
use anyhow::{bail, Context};
use bench_problems::Problem;
use model_client::{Ask, Endpoint, Exchange, Outcome};
use serde::Deserialize;
use std::collections::HashMap;
use std::path::Path;

/// Which ask a reply answers.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReplayKey {
    model: String,
    number: u32,
    sample: u32,
}

impl ReplayKey {
    pub fn of(model: &str, problem: &dyn Problem, sample: u32) -> Self {
        ReplayKey {
            model: model.to_string(),
            number: problem.number(),
            sample,
        }
    }
}

/// One line of the file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayLine {
    model: String,
    problem: serde_json::Value,
    sample: u32,
    content: String,
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

impl ReplayLine {
    /// The reply as the exchange it stands for.
    pub fn exchange(&self, endpoint: &Endpoint, ask: &Ask) -> Exchange {
        Exchange {
            url: endpoint.url(),
            request: ask.body(&endpoint.model),
            outcome: Outcome::Answered,
            http_status: None,
            content: Some(self.content.clone()),
            finish_reason: None,
            prompt_tokens: self.prompt_tokens,
            completion_tokens: self.completion_tokens,
            latency_s: 0.0,
            attempts: 0,
            error: None,
            raw: String::new(),
            replayed: true,
        }
    }
}

/// A responses file, by the ask each line answers.
pub struct Replay(HashMap<ReplayKey, ReplayLine>);

impl Replay {
    pub fn load(path: &Path) -> anyhow::Result<Replay> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("{}: cannot read", path.display()))?;
        let mut map = HashMap::new();
        for (i, l) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let at = || format!("{}:{}", path.display(), i + 1);
            let de = &mut serde_json::Deserializer::from_str(l);
            let line: ReplayLine = serde_path_to_error::deserialize(de)
                .map_err(|e| anyhow::anyhow!("{}: field `{}`: {}", at(), e.path(), e.inner()))?;
            let spec = match &line.problem {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Number(n) => n.to_string(),
                other => bail!(
                    "{}: field `problem`: `{other}` is neither a name nor a number",
                    at()
                ),
            };
            let problem =
                prompt::find(&spec).with_context(|| format!("{}: field `problem`", at()))?;
            let key = ReplayKey::of(&line.model, problem, line.sample);
            if map.insert(key, line).is_some() {
                bail!(
                    "{}: a second reply for the same model, problem and sample",
                    at()
                );
            }
        }
        Ok(Replay(map))
    }

    pub fn get(&self, key: &ReplayKey) -> Option<&ReplayLine> {
        self.0.get(key)
    }
}
