//! A content-addressed store of answered exchanges: the key is the SHA-256 of what was asked
//! (URL, model, messages, sampling settings, sample index), the value the [`Exchange`] as JSON,
//! written through a temporary file and a rename so a killed sweep never leaves half an entry.
//! Failed exchanges are not kept: a re-run asks them again.
use crate::ask::{Ask, Endpoint, Exchange, Outcome};
use serde_json::json;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The cache key of asking `ask` of `endpoint`: 64 hex digits.
pub fn cache_key(endpoint: &Endpoint, ask: &Ask) -> String {
    let what = json!({
        "url": endpoint.url(),
        "model": endpoint.model,
        "messages": ask.messages,
        "temperature": ask.temperature,
        "max_tokens": ask.max_tokens,
        "sample": ask.sample,
    });
    let digest = Sha256::digest(what.to_string().as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Exchanges by key under one directory.
#[derive(Clone, Debug)]
pub struct Cache {
    dir: PathBuf,
}

impl Cache {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Cache { dir: dir.into() }
    }

    /// Where the exchange of `key` is kept.
    pub fn path(&self, key: &str) -> PathBuf {
        self.dir
            .join(&key[..2.min(key.len())])
            .join(format!("{key}.json"))
    }

    /// The answered exchange of `key`, if kept (an unreadable entry counts as none).
    pub fn get(&self, key: &str) -> Option<Exchange> {
        let text = std::fs::read_to_string(self.path(key)).ok()?;
        serde_json::from_str::<Exchange>(&text)
            .ok()
            .filter(|e| e.outcome == Outcome::Answered)
    }

    /// Keeps an answered exchange (a failed one is not kept).
    pub fn put(&self, key: &str, exchange: &Exchange) -> std::io::Result<()> {
        if exchange.outcome != Outcome::Answered {
            return Ok(());
        }
        let path = self.path(key);
        write_atomically(&path, &serde_json::to_vec_pretty(exchange)?)
    }
}

/// Writes `bytes` to `path` through a temporary file beside it and a rename.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn endpoint(model: &str) -> Endpoint {
        Endpoint {
            base_url: "http://127.0.0.1:9/v1/".into(),
            model: model.into(),
            api_key_env: Some("NOT_IN_THE_KEY".into()),
            timeout: Duration::from_secs(1),
            max_reply_bytes: 1 << 20,
        }
    }

    #[test]
    fn the_key_changes_with_what_is_asked_and_only_with_it() {
        let a = Ask::user("write a kernel", 0.7, 100, 0);
        let k = cache_key(&endpoint("m"), &a);
        assert_eq!(k.len(), 64);
        assert_eq!(k, cache_key(&endpoint("m"), &a.clone()));
        let mut other_key_var = endpoint("m");
        other_key_var.api_key_env = None;
        assert_eq!(
            k,
            cache_key(&other_key_var, &a),
            "the key's variable is not asked"
        );
        assert_ne!(k, cache_key(&endpoint("n"), &a));
        assert_ne!(
            k,
            cache_key(&endpoint("m"), &Ask::user("write a kernel", 0.7, 100, 1))
        );
        assert_ne!(
            k,
            cache_key(&endpoint("m"), &Ask::user("write a kernel", 0.2, 100, 0))
        );
    }
}
