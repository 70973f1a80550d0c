//! The client against a mock OpenAI-compatible server on 127.0.0.1: replies, retries (429 with
//! Retry-After, 5xx, timeouts), what is not retried (4xx, an oversized reply), the API key sent
//! but never kept, and the cache.
use model_client::mock::{MockReply, MockServer};
use model_client::{cache_key, complete, Ask, Cache, Endpoint, Outcome, RetryPolicy};
use std::time::{Duration, Instant};

fn endpoint(server: &MockServer, timeout_ms: u64) -> Endpoint {
    Endpoint {
        base_url: server.base_url.clone(),
        model: "mock-model".into(),
        api_key_env: Some("DLRM_MOCK_TEST_KEY".into()),
        timeout: Duration::from_millis(timeout_ms),
        max_reply_bytes: 1 << 20,
    }
}

fn policy() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 3,
        base_delay: Duration::from_millis(20),
        max_delay: Duration::from_secs(5),
    }
}

/// A server whose reply depends on the prompt: the behaviours the tests name.
fn server() -> MockServer {
    MockServer::start(|r| match r.prompt.as_str() {
        "ok" => MockReply::chat("```python\nclass ModelNew: pass\n```"),
        "busy" if r.nth == 0 => {
            let mut m = MockReply::status(429, "{\"error\":\"slow down\"}");
            m.headers.push(("retry-after".into(), "1".into()));
            m
        }
        "busy" => MockReply::chat("after the wait"),
        "broken" => MockReply::status(500, "{\"error\":\"internal\"}"),
        "bad" => MockReply::status(400, "{\"error\":\"bad request\"}"),
        "slow" => {
            let mut m = MockReply::chat("too late");
            m.delay = Duration::from_millis(1500);
            m
        }
        "huge" => MockReply::chat(&"x".repeat(10 << 20)),
        "key" => MockReply::chat(r.headers.get("authorization").map_or("none", |v| v)),
        _ => MockReply::status(404, "{}"),
    })
}

fn ask(prompt: &str) -> Ask {
    Ask::user(prompt, 0.5, 256, 0)
}

#[test]
fn an_answer_is_kept_with_its_request_tokens_and_latency() {
    let s = server();
    let e = complete(
        &reqwest::blocking::Client::new(),
        &endpoint(&s, 5000),
        &ask("ok"),
        &policy(),
    );
    assert_eq!(e.outcome, Outcome::Answered);
    assert!(e.content.as_deref().unwrap().contains("class ModelNew"));
    assert_eq!(
        (e.prompt_tokens, e.completion_tokens, e.attempts),
        (Some(10), Some(20), 1)
    );
    assert_eq!(e.request["model"], "mock-model");
    assert_eq!(e.request["messages"][0]["content"], "ok");
    assert!(e.raw.contains("chat.completion") && e.latency_s > 0.0);
    assert_eq!(s.requests(), 1);
    assert_eq!(s.seen()[0].path, "/v1/chat/completions");
}

#[test]
fn a_429_is_retried_after_its_retry_after() {
    let s = server();
    let started = Instant::now();
    let e = complete(
        &reqwest::blocking::Client::new(),
        &endpoint(&s, 5000),
        &ask("busy"),
        &policy(),
    );
    assert_eq!(e.outcome, Outcome::Answered, "{e:?}");
    assert_eq!((e.attempts, s.requests()), (2, 2));
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After: 1 was not waited"
    );
}

#[test]
fn server_errors_and_timeouts_are_retried_a_bounded_number_of_times() {
    let s = server();
    let client = reqwest::blocking::Client::new();
    let e = complete(&client, &endpoint(&s, 5000), &ask("broken"), &policy());
    assert_eq!(
        (e.outcome, e.attempts, e.http_status),
        (Outcome::Failed, 3, Some(500))
    );
    assert_eq!(e.error.as_deref(), Some("HTTP 500"));
    assert!(e.raw.contains("internal"), "the failed reply is kept");
    let e = complete(&client, &endpoint(&s, 300), &ask("slow"), &policy());
    assert_eq!((e.outcome, e.attempts), (Outcome::Failed, 3));
    assert!(e.error.as_deref().unwrap().contains("timed out"), "{e:?}");
    assert_eq!(s.requests(), 6);
}

#[test]
fn a_client_error_or_an_oversized_reply_is_not_retried() {
    let s = server();
    let client = reqwest::blocking::Client::new();
    let e = complete(&client, &endpoint(&s, 5000), &ask("bad"), &policy());
    assert_eq!(
        (e.outcome, e.attempts, e.http_status),
        (Outcome::Failed, 1, Some(400))
    );
    let e = complete(&client, &endpoint(&s, 20_000), &ask("huge"), &policy());
    assert_eq!((e.outcome, e.attempts), (Outcome::Failed, 1));
    assert!(
        e.error.as_deref().unwrap().contains("over 1048576 bytes"),
        "{e:?}"
    );
    assert_eq!(e.raw.len(), 1 << 20, "what was read is kept, bounded");
    assert_eq!(s.requests(), 2);
}

#[test]
fn the_api_key_is_sent_from_the_environment_and_never_kept() {
    let s = server();
    std::env::set_var("DLRM_MOCK_TEST_KEY", "sk-test-secret-123");
    let e = complete(
        &reqwest::blocking::Client::new(),
        &endpoint(&s, 5000),
        &ask("key"),
        &policy(),
    );
    assert_eq!(e.content.as_deref(), Some("Bearer sk-test-secret-123"));
    // What is kept of the exchange is the request body and the reply: the key is in neither
    // the request nor the cache key (here the mock echoed it, so only the content has it).
    let mut kept = e.clone();
    kept.content = None;
    kept.raw.clear();
    assert!(!serde_json::to_string(&kept)
        .unwrap()
        .contains("sk-test-secret"));
}

#[test]
fn the_cache_keeps_answers_and_forgets_failures() {
    let s = server();
    let dir = std::env::temp_dir().join(format!("model-client-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cache = Cache::new(&dir);
    let client = reqwest::blocking::Client::new();
    let ep = endpoint(&s, 5000);
    for prompt in ["ok", "bad"] {
        let e = complete(&client, &ep, &ask(prompt), &policy());
        cache.put(&cache_key(&ep, &ask(prompt)), &e).unwrap();
    }
    let kept = cache
        .get(&cache_key(&ep, &ask("ok")))
        .expect("the answer is kept");
    assert_eq!(
        kept.content.as_deref(),
        Some("```python\nclass ModelNew: pass\n```")
    );
    assert!(
        cache.get(&cache_key(&ep, &ask("bad"))).is_none(),
        "a failure is asked again"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
