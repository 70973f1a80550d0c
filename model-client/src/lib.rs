//! Chat completions from OpenAI-compatible endpoints (`POST {base_url}/chat/completions`), for
//! `dlrm-bench sweep`: one request per [`Ask`], retried a bounded number of times on 429 (after
//! its `Retry-After`), 5xx, timeouts and broken connections, and always ending in an
//! [`Exchange`] — the request sent, the raw reply, token counts, latency and attempts — even when
//! every attempt failed. A [`Cache`] keeps exchanges by the hash of what was asked, so a re-run
//! or a resumed sweep never asks twice.
//!
//! API keys are read from the environment variable an [`Endpoint`] names, sent in the
//! `Authorization` header and never stored: an [`Exchange`] holds the request body only.
mod ask;
mod cache;

pub use ask::{complete, Ask, Endpoint, Exchange, Message, Outcome, RetryPolicy};
pub use cache::{cache_key, Cache};
#[cfg(feature = "mock")]
pub mod mock;
