//! `sweep.toml`: the models a sweep asks and how. Every error names the file and the field
//! (`model[1].samples: ...`); the API key is never in the file, only the name of the
//! environment variable that holds it.
//!
//! ```toml
//! preset = "full"                 # the sizes the prompts give
//! [[model]]
//! name = "gpt-x"                  # [A-Za-z0-9._-]+, unique: the answers' directories
//! base_url = "https://api.example.com/v1"
//! model = "gpt-x-2026-01"
//! api_key_env = "EXAMPLE_API_KEY" # optional
//! format = "kernelbench"          # or "native"
//! samples = 2                     # k, 1..=100
//! temperature = 0.7               # 0..=2
//! max_tokens = 8192
//! problems = ["all"]              # or names and numbers: [1, "kjt_permute"]
//! concurrency = 8                 # requests in flight, 1..=256
//! timeout_s = 600                 # one attempt, 1..=3600
//! max_attempts = 5                # 1..=10
//! price_in_per_mtok = 2.5         # USD per million prompt tokens (for the report)
//! price_out_per_mtok = 10.0
//! ```
use crate::cmd::prompt::{self, Format};
use anyhow::{bail, Context};
use bench_problems::{Preset, Problem};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A whole `sweep.toml`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepConfig {
    #[serde(default = "default_preset")]
    pub preset: String,
    #[serde(rename = "model")]
    pub models: Vec<ModelConfig>,
}

/// One `[[model]]`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    pub name: String,
    pub base_url: String,
    pub model: String,
    #[serde(default)]
    pub api_key_env: Option<String>,
    pub format: Format,
    #[serde(default = "one")]
    pub samples: u32,
    #[serde(default)]
    pub temperature: f64,
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u32,
    #[serde(default = "all")]
    pub problems: Vec<toml::Value>,
    #[serde(default = "default_concurrency")]
    pub concurrency: usize,
    #[serde(default = "default_timeout_s")]
    pub timeout_s: f64,
    #[serde(default = "default_attempts")]
    pub max_attempts: u32,
    #[serde(default)]
    pub price_in_per_mtok: f64,
    #[serde(default)]
    pub price_out_per_mtok: f64,
}

fn default_preset() -> String {
    "full".into()
}
fn one() -> u32 {
    1
}
fn default_max_tokens() -> u32 {
    8192
}
fn all() -> Vec<toml::Value> {
    vec![toml::Value::String("all".into())]
}
fn default_concurrency() -> usize {
    4
}
fn default_timeout_s() -> f64 {
    600.0
}
fn default_attempts() -> u32 {
    5
}

impl SweepConfig {
    /// Reads and checks `path`.
    pub fn load(path: &Path) -> anyhow::Result<SweepConfig> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("{}: cannot read", path.display()))?;
        Self::parse(&text).with_context(|| path.display().to_string())
    }

    /// Parses and checks a config's text.
    pub fn parse(text: &str) -> anyhow::Result<SweepConfig> {
        let de = toml::Deserializer::new(text);
        let c: SweepConfig = serde_path_to_error::deserialize(de).map_err(|e| {
            let msg = e.inner().message().to_string();
            match e.path().to_string().as_str() {
                "." => anyhow::anyhow!("{msg}"),
                path => anyhow::anyhow!("{path}: {msg}"),
            }
        })?;
        c.check()?;
        Ok(c)
    }

    /// The preset the prompts give.
    pub fn preset(&self) -> anyhow::Result<Preset> {
        Preset::parse(&self.preset)
            .with_context(|| format!("preset: unknown `{}` (ci, small, full)", self.preset))
    }

    fn check(&self) -> anyhow::Result<()> {
        self.preset()?;
        if self.models.is_empty() {
            bail!("model: at least one [[model]] is needed");
        }
        for (i, m) in self.models.iter().enumerate() {
            m.check()
                .with_context(|| format!("model[{i}] (`{}`)", m.name))?;
            if self.models[..i].iter().any(|o| o.name == m.name) {
                bail!("model[{i}].name: `{}` is used twice", m.name);
            }
        }
        Ok(())
    }
}

impl ModelConfig {
    fn check(&self) -> anyhow::Result<()> {
        let name_ok = !self.name.is_empty()
            && !self.name.starts_with('.')
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
        if !name_ok {
            bail!(
                "name: `{}` must be [A-Za-z0-9._-]+ (it names directories)",
                self.name
            );
        }
        if !(self.base_url.starts_with("http://") || self.base_url.starts_with("https://")) {
            bail!("base_url: `{}` is not an http(s) URL", self.base_url);
        }
        if let Some(var) = &self.api_key_env {
            if var.is_empty() || var.contains('=') || var.starts_with("sk-") {
                bail!("api_key_env: the *name* of an environment variable, not a key");
            }
            let host = self.base_url["http://".len().min(self.base_url.len())..]
                .split(['/', ':'])
                .next()
                .unwrap_or("");
            let loopback = ["127.0.0.1", "localhost", "[::1]"].contains(&host);
            if self.base_url.starts_with("http://") && !loopback {
                bail!(
                    "base_url: `{}` would send the API key in clear text: use https (plain http \
                     only to 127.0.0.1 or localhost)",
                    self.base_url
                );
            }
        }
        let ranges: [(&str, f64, f64, f64); 6] = [
            ("samples", self.samples as f64, 1.0, 100.0),
            ("temperature", self.temperature, 0.0, 2.0),
            ("max_tokens", self.max_tokens as f64, 1.0, 1_000_000.0),
            ("concurrency", self.concurrency as f64, 1.0, 256.0),
            ("timeout_s", self.timeout_s, 1.0, 3600.0),
            ("max_attempts", self.max_attempts as f64, 1.0, 10.0),
        ];
        for (field, v, lo, hi) in ranges {
            if !(lo..=hi).contains(&v) {
                bail!("{field}: {v} is outside {lo}..={hi}");
            }
        }
        for (field, v) in [
            ("price_in_per_mtok", self.price_in_per_mtok),
            ("price_out_per_mtok", self.price_out_per_mtok),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                bail!("{field}: {v} is not a price");
            }
        }
        self.problem_list()?;
        Ok(())
    }

    /// The problems asked, in catalog order (`["all"]`: all twelve).
    pub fn problem_list(&self) -> anyhow::Result<Vec<&'static dyn Problem>> {
        let mut out: Vec<&'static dyn Problem> = Vec::new();
        for (i, v) in self.problems.iter().enumerate() {
            let spec = match v {
                toml::Value::String(s) if s == "all" => {
                    out.extend(bench_problems::all_problems().iter().copied());
                    continue;
                }
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(n) => n.to_string(),
                other => bail!("problems[{i}]: `{other}` is neither a name nor a number"),
            };
            let p = prompt::find(&spec).with_context(|| format!("problems[{i}]"))?;
            out.push(p);
        }
        if out.is_empty() {
            bail!("problems: empty (name some, or \"all\")");
        }
        out.sort_by_key(|p| p.number());
        out.dedup_by_key(|p| p.number());
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[[model]]
name = "a"
base_url = "http://127.0.0.1:1/v1"
model = "m"
format = "kernelbench"
samples = 2
problems = [1, "kjt_permute", 1]
"#;

    #[test]
    fn a_config_reads_with_its_defaults_and_problems_in_catalog_order() {
        let c = SweepConfig::parse(GOOD).unwrap();
        let m = &c.models[0];
        assert_eq!(
            (c.preset.as_str(), m.samples, m.max_attempts),
            ("full", 2, 5)
        );
        let names: Vec<&str> = m.problem_list().unwrap().iter().map(|p| p.name()).collect();
        assert_eq!(names, ["embedding_bag_sum", "kjt_permute"]);
    }

    #[test]
    fn errors_name_the_field() {
        let err = |text: &str| format!("{:#}", SweepConfig::parse(text).unwrap_err());
        let e = err(&GOOD.replace("samples = 2", "samples = 0"));
        assert!(e.contains("model[0]") && e.contains("samples: 0"), "{e}");
        let e = err(&GOOD.replace("format = \"kernelbench\"", "format = \"cuda\""));
        assert!(e.contains("format"), "{e}");
        let e = err(&GOOD.replace("samples = 2", "sample = 2"));
        assert!(e.contains("sample"), "{e}");
        let e = err(&GOOD.replace("[1, \"kjt_permute\", 1]", "[\"nope\"]"));
        assert!(e.contains("problems[0]") && e.contains("nope"), "{e}");
        let e = err(&GOOD.replace("name = \"a\"", "name = \"../x\""));
        assert!(e.contains("name:"), "{e}");
        let e = err(&format!(
            "{GOOD}{}",
            GOOD.replace("[[model]]", "\n[[model]]")
        ));
        assert!(e.contains("model[1].name") && e.contains("twice"), "{e}");
        let keyed = GOOD.replace("model = \"m\"", "model = \"m\"\napi_key_env = \"K\"");
        assert!(
            SweepConfig::parse(&keyed).is_ok(),
            "a key to 127.0.0.1 over http"
        );
        let e = err(&keyed.replace("http://127.0.0.1:1/v1", "http://api.example.com/v1"));
        assert!(e.contains("base_url") && e.contains("clear text"), "{e}");
        assert!(SweepConfig::parse(
            &keyed.replace("http://127.0.0.1:1", "https://api.example.com")
        )
        .is_ok());
        let e = err(&GOOD.replace("model = \"m\"", "model = \"m\"\napi_key_env = \"sk-abc\""));
        assert!(e.contains("api_key_env"), "{e}");
    }
}
