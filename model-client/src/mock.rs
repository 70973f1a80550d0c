//! A mock OpenAI-compatible server on 127.0.0.1 for tests (feature `mock`): each request is
//! answered by a handler from its body and how many times that same body was asked before, and
//! every request is counted. It listens on a port of its own and stops when dropped.
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the mock sends back.
#[derive(Clone, Debug)]
pub struct MockReply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// Waited before the reply is written.
    pub delay: Duration,
}

impl MockReply {
    /// A chat completion whose message is `content` (10 prompt and 20 completion tokens).
    pub fn chat(content: &str) -> Self {
        let body = json!({
            "id": "mock",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30},
        });
        Self::status(200, &body.to_string())
    }

    /// Status `status` with `body`.
    pub fn status(status: u16, body: &str) -> Self {
        MockReply {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.into(),
            delay: Duration::ZERO,
        }
    }
}

/// One request as the handler sees it.
#[derive(Clone, Debug)]
pub struct MockRequest {
    pub path: String,
    /// Header names in lower case.
    pub headers: HashMap<String, String>,
    pub body: Value,
    /// The text of the last message.
    pub prompt: String,
    /// How many requests with this same body came before.
    pub nth: usize,
}

type Handler = dyn Fn(&MockRequest) -> MockReply + Send + Sync;

/// The running server.
pub struct MockServer {
    /// `http://127.0.0.1:PORT/v1`.
    pub base_url: String,
    seen: Arc<Mutex<Vec<MockRequest>>>,
    stop: Arc<AtomicBool>,
    port: u16,
}

impl MockServer {
    /// Starts a server answering with `handler`.
    pub fn start(handler: impl Fn(&MockRequest) -> MockReply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1");
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let handler: Arc<Handler> = Arc::new(handler);
        let (seen2, stop2) = (seen.clone(), stop.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let (handler, seen) = (handler.clone(), seen2.clone());
                std::thread::spawn(move || serve(stream, &*handler, &seen));
            }
        });
        MockServer {
            base_url: format!("http://127.0.0.1:{port}/v1"),
            seen,
            stop,
            port,
        }
    }

    /// Requests received so far.
    pub fn requests(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    /// Every request received so far, in order.
    pub fn seen(&self) -> Vec<MockRequest> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port)); // wakes the accept loop
    }
}

/// Reads one request from `stream`, answers it, closes the connection.
fn serve(stream: TcpStream, handler: &Handler, seen: &Mutex<Vec<MockRequest>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    });
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
    let mut headers = HashMap::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let len: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
        .min(64 << 20);
    let mut body = vec![0u8; len];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let prompt = body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_string();
    let request = {
        let mut seen = seen.lock().unwrap();
        let nth = seen.iter().filter(|r| r.body == body).count();
        let r = MockRequest {
            path,
            headers,
            body,
            prompt,
            nth,
        };
        seen.push(r.clone());
        r
    };
    let reply = handler(&request);
    std::thread::sleep(reply.delay);
    let mut out = stream;
    let mut head = format!(
        "HTTP/1.1 {} Mock\r\ncontent-length: {}\r\nconnection: close\r\n",
        reply.status,
        reply.body.len()
    );
    for (k, v) in &reply.headers {
        head += &format!("{k}: {v}\r\n");
    }
    head += "\r\n";
    let _ = out.write_all(head.as_bytes());
    let _ = out.write_all(reply.body.as_bytes());
    let _ = out.flush();
}
