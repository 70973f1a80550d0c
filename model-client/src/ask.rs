//! One chat completion, retried: what is sent ([`Ask`] to an [`Endpoint`]), how failures are
//! retried ([`RetryPolicy`]) and what is kept of it ([`Exchange`]).
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::io::Read;
use std::time::{Duration, Instant};

/// An OpenAI-compatible chat-completions endpoint and the model asked there.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// Up to and including the API version: `https://api.example.com/v1`.
    pub base_url: String,
    /// The model id sent in each request.
    pub model: String,
    /// The name of the environment variable holding the API key (`None`: no key is sent).
    pub api_key_env: Option<String>,
    /// Limit of one attempt, the reply's body included.
    pub timeout: Duration,
    /// A reply body longer than this is not read further and fails the attempt.
    pub max_reply_bytes: usize,
}

impl Endpoint {
    /// The URL requests go to.
    pub fn url(&self) -> String {
        format!("{}/chat/completions", self.base_url.trim_end_matches('/'))
    }
}

/// One chat message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

/// What is asked: the conversation and its sampling settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ask {
    pub messages: Vec<Message>,
    pub temperature: f64,
    pub max_tokens: u32,
    /// Which of a prompt's k samples this is: not sent, but part of the cache key, so k asks
    /// of one prompt are k exchanges.
    pub sample: u32,
}

impl Ask {
    /// One user message.
    pub fn user(prompt: &str, temperature: f64, max_tokens: u32, sample: u32) -> Self {
        Ask {
            messages: vec![Message {
                role: "user".into(),
                content: prompt.into(),
            }],
            temperature,
            max_tokens,
            sample,
        }
    }

    /// The request body for `model`.
    pub fn body(&self, model: &str) -> Value {
        json!({
            "model": model,
            "messages": self.messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        })
    }
}

/// How failed attempts are retried: 429 after its `Retry-After` (or the backoff, whichever is
/// longer), 408, 5xx, timeouts and connection errors after an exponential backoff; any other
/// failure at once ends the exchange.
#[derive(Clone, Debug)]
pub struct RetryPolicy {
    /// Attempts in all (1: no retry).
    pub max_attempts: u32,
    /// The wait after the first failed attempt; doubled after each further one.
    pub base_delay: Duration,
    /// No wait is longer, `Retry-After` included.
    pub max_delay: Duration,
}

impl RetryPolicy {
    /// The wait before attempt `attempt + 1` (1-based `attempt` just failed).
    fn backoff(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let exp = self
            .base_delay
            .saturating_mul(1u32 << (attempt - 1).min(16));
        exp.max(retry_after.unwrap_or_default()).min(self.max_delay)
    }
}

/// How an exchange ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// A reply with a message (which may still hold no usable code).
    Answered,
    /// Every attempt failed, or one failed in a way a retry cannot mend.
    Failed,
}

/// One exchange with a model, kept whole: the request body (never the key), the last reply
/// as received, and what it cost.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Exchange {
    pub url: String,
    pub request: Value,
    pub outcome: Outcome,
    /// The last attempt's HTTP status (none when it got no reply).
    pub http_status: Option<u16>,
    /// The message's text.
    pub content: Option<String>,
    pub finish_reason: Option<String>,
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    /// Seconds from the first attempt to the end, waits included.
    pub latency_s: f64,
    pub attempts: u32,
    /// Why the last attempt failed.
    pub error: Option<String>,
    /// The last reply's body (at most the endpoint's `max_reply_bytes`).
    pub raw: String,
    /// Read from a responses file, not asked.
    #[serde(default)]
    pub replayed: bool,
}

/// One attempt's result: the reply's status and body, or why there was none, and whether a
/// retry may mend it.
struct Attempt {
    status: Option<u16>,
    body: String,
    error: Option<String>,
    retry: bool,
    retry_after: Option<Duration>,
}

/// Asks `ask` of `endpoint`, retrying as `policy` says. Never fails: every failure ends in an
/// [`Exchange`] with [`Outcome::Failed`] and the reason.
pub fn complete(
    client: &reqwest::blocking::Client,
    endpoint: &Endpoint,
    ask: &Ask,
    policy: &RetryPolicy,
) -> Exchange {
    let body = ask.body(&endpoint.model);
    let started = Instant::now();
    let mut attempts = 0;
    loop {
        attempts += 1;
        let a = attempt(client, endpoint, &body);
        let parsed = match (&a.error, a.status) {
            (None, Some(200)) => Some(parse_reply(&a.body)),
            _ => None,
        };
        if let Some(Ok(reply)) = parsed {
            return Exchange {
                url: endpoint.url(),
                request: body,
                outcome: Outcome::Answered,
                http_status: a.status,
                latency_s: started.elapsed().as_secs_f64(),
                attempts,
                error: None,
                raw: a.body,
                replayed: false,
                ..reply
            };
        }
        let error = match parsed {
            Some(Err(e)) => Some(e),
            _ => a.error.clone(),
        };
        if !a.retry || attempts >= policy.max_attempts.max(1) {
            return Exchange {
                url: endpoint.url(),
                request: body,
                outcome: Outcome::Failed,
                http_status: a.status,
                content: None,
                finish_reason: None,
                prompt_tokens: None,
                completion_tokens: None,
                latency_s: started.elapsed().as_secs_f64(),
                attempts,
                error,
                raw: a.body,
                replayed: false,
            };
        }
        std::thread::sleep(policy.backoff(attempts, a.retry_after));
    }
}

/// One POST: its status and body (bounded), or why there was none.
fn attempt(client: &reqwest::blocking::Client, endpoint: &Endpoint, body: &Value) -> Attempt {
    let mut req = client
        .post(endpoint.url())
        .timeout(endpoint.timeout)
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(var) = &endpoint.api_key_env {
        if let Ok(key) = std::env::var(var) {
            req = req.bearer_auth(key);
        }
    }
    let resp = match req.send() {
        Ok(r) => r,
        Err(e) => return failed(None, String::new(), describe(&e), true, None),
    };
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(|s| Duration::from_secs_f64(s.min(86_400.0)));
    let mut bytes = Vec::new();
    let limit = endpoint.max_reply_bytes;
    if let Err(e) = resp.take(limit as u64 + 1).read_to_end(&mut bytes) {
        let why = format!("reading the reply: {e}");
        return failed(Some(status), String::new(), why, true, None);
    }
    if bytes.len() > limit {
        bytes.truncate(limit);
        let body = String::from_utf8_lossy(&bytes).into_owned();
        let why = format!("the reply is over {limit} bytes: not read further");
        return failed(Some(status), body, why, false, None);
    }
    let body = String::from_utf8_lossy(&bytes).into_owned();
    if status == 200 {
        return Attempt {
            status: Some(status),
            body,
            error: None,
            retry: false,
            retry_after: None,
        };
    }
    let retry = status == 429 || status == 408 || (500..600).contains(&status);
    let why = format!("HTTP {status}");
    failed(Some(status), body, why, retry, retry_after)
}

fn failed(
    status: Option<u16>,
    body: String,
    error: String,
    retry: bool,
    retry_after: Option<Duration>,
) -> Attempt {
    Attempt {
        status,
        body,
        error: Some(error),
        retry,
        retry_after,
    }
}

/// A transport error in words (a timeout says so).
fn describe(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        format!("timed out: {e}")
    } else if e.is_connect() {
        format!("could not connect: {e}")
    } else {
        e.to_string()
    }
}

/// The message, finish reason and token counts of a 200 reply, as an [`Exchange`] with the rest
/// left for the caller; an error when it is not a chat completion with a message.
fn parse_reply(body: &str) -> Result<Exchange, String> {
    let v: Value = serde_json::from_str(body).map_err(|e| format!("the reply is not JSON: {e}"))?;
    let choice = &v["choices"][0];
    let content = choice["message"]["content"]
        .as_str()
        .ok_or("the reply has no choices[0].message.content")?;
    Ok(Exchange {
        url: String::new(),
        request: Value::Null,
        outcome: Outcome::Answered,
        http_status: None,
        content: Some(content.to_string()),
        finish_reason: choice["finish_reason"].as_str().map(str::to_string),
        prompt_tokens: v["usage"]["prompt_tokens"].as_u64(),
        completion_tokens: v["usage"]["completion_tokens"].as_u64(),
        latency_s: 0.0,
        attempts: 0,
        error: None,
        raw: String::new(),
        replayed: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_honours_retry_after_and_is_capped() {
        let p = RetryPolicy {
            max_attempts: 9,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(2),
        };
        assert_eq!(p.backoff(1, None), Duration::from_millis(100));
        assert_eq!(p.backoff(3, None), Duration::from_millis(400));
        assert_eq!(
            p.backoff(1, Some(Duration::from_secs(1))),
            Duration::from_secs(1)
        );
        assert_eq!(p.backoff(9, None), Duration::from_secs(2));
        assert_eq!(
            p.backoff(40, Some(Duration::from_secs(99))),
            Duration::from_secs(2)
        );
    }

    #[test]
    fn a_reply_without_a_message_is_an_error_naming_what_is_missing() {
        assert!(parse_reply("{\"choices\":[]}")
            .unwrap_err()
            .contains("choices[0].message.content"));
        assert!(parse_reply("<html>").unwrap_err().contains("not JSON"));
        let r = parse_reply(
            r#"{"choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2}}"#,
        )
        .unwrap();
        assert_eq!(
            (r.content.as_deref(), r.prompt_tokens, r.completion_tokens),
            (Some("hi"), Some(5), Some(2))
        );
    }
}
