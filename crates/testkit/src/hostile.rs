//! A hostile OpenAI-compatible server: it answers every completion request
//! with one kind of bad response, the kinds a benchmark meets from broken
//! servers and proxies, to check that the client bounds what it reads and
//! counts each request in its class while the run goes on.
//!
//! This module owns the loopback server and its [`Hostility`] modes. Every
//! endless mode writes until the client closes the connection (or the
//! server is dropped), so a client that reads without bound is caught by
//! its memory, and one that stops reading frees the server's task at once.
//! `GET /v1/models` and `GET /health` answer normally, so readiness checks
//! pass; every `POST` gets the hostile answer.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use hyper::{Method, StatusCode};

use infer_bench_sim::http::{self, BodySender, Request, Response, ServerHandle};

/// One content event of a completions stream, a single token of text.
pub const EVENT: &[u8] =
    b"data: {\"choices\":[{\"index\":0,\"text\":\"x\",\"finish_reason\":null}]}\n\n";

/// Bytes per write of the endless modes.
const CHUNK: usize = 64 * 1024;

/// How the server misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hostility {
    /// HTTP 200, `text/event-stream`, then `data: ` and a line that never
    /// ends (no newline, ever).
    EndlessLine,
    /// HTTP 500 whose `text/plain` body never ends.
    EndlessErrorBody,
    /// HTTP 200, `text/event-stream`, valid content events without end
    /// (never a finish reason, never `[DONE]`).
    EndlessEvents,
    /// One whole content event, then the next event one byte per `every`
    /// (a line that is always partial), without end.
    Drip { every: Duration },
    /// One whole content event, then `: ping` comments every `every`,
    /// without end (a keep-alive that hides a stalled generation).
    Pings { every: Duration },
    /// HTTP 200 with an HTML page (a proxy's or a login page).
    Html,
    /// HTTP 200 with a whole, non-streamed JSON completion.
    Json,
    /// The n-th completion request gets `STATUS_CYCLE[(n - 1) % 7]`, with
    /// an OpenAI-style error body that names the code.
    StatusCycle,
    /// Answers carry [`INJECTION`]: the n-th completion request gets, in
    /// turn, an HTTP 500 whose `text/plain` body is it, a stream whose SSE
    /// `error` event's message is it, a stream with one malformed event
    /// that holds it, and a good stream; `/v1/models` names the model with
    /// it.
    Injection,
}

/// A whole, well-formed completions stream: four tokens, a finish reason,
/// usage, `[DONE]`.
const GOOD_STREAM: &str = concat!(
    "data: {\"choices\":[{\"index\":0,\"text\":\"x\",\"finish_reason\":null}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"text\":\"x\",\"finish_reason\":null}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"text\":\"x\",\"finish_reason\":null}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"text\":\"x\",\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":4,\"total_tokens\":12}}\n\n",
    "data: [DONE]\n\n"
);

/// Text a server controls, written to attack whoever reads it: terminal
/// escapes (OSC 52 writes the clipboard, OSC 8 links, OSC 0 sets the
/// title, clear screen, cursor home, a carriage return that overwrites),
/// GitHub workflow commands on lines of their own, and Markdown and HTML
/// (an image with a handler, a `javascript:` link, a tracking pixel, a
/// mention, a bare link) and a spreadsheet formula.
pub const INJECTION: &str = "\u{1b}]52;c;SGFja2Vk\u{7}\u{1b}]8;;https://evil.example\u{7}link\u{1b}]8;;\u{7}\u{1b}]0;pwned\u{7}\u{1b}[2J\u{1b}[H\rOVERWRITTEN\n::error file=x::forged\n::add-mask::hidden\n::stop-commands::token\n<img src=x onerror=alert(1)> [l](javascript:alert(1)) ![p](https://evil.example/p.png) @octocat www.evil.example\n=HYPERLINK(\"https://evil.example\")";

/// The statuses [`Hostility::StatusCycle`] answers with, in turn: the ones
/// an operator must tell apart (refused, unauthorized, unknown model,
/// rejected field, shed load, failed, unavailable).
pub const STATUS_CYCLE: [u16; 7] = [400, 401, 404, 422, 429, 500, 503];

/// The HTML page [`Hostility::Html`] serves.
pub const HTML_PAGE: &str = "<!DOCTYPE html>\n<html><head><title>Sign in</title></head>\n<body><p>Please sign in to continue.</p></body></html>\n";

/// The JSON body [`Hostility::Json`] serves.
pub const JSON_BODY: &str = r#"{"id":"cmpl-1","object":"text_completion","model":"hostile-model","choices":[{"index":0,"text":"hello there","finish_reason":"length"}],"usage":{"prompt_tokens":8,"completion_tokens":2,"total_tokens":10}}"#;

/// A running hostile server. Dropping it closes everything at once.
pub struct HostileServer {
    http: ServerHandle,
    requests: Arc<AtomicU64>,
}

impl HostileServer {
    /// Binds `127.0.0.1:0` and serves `mode` on the current tokio runtime.
    pub async fn start(mode: Hostility) -> io::Result<HostileServer> {
        let requests = Arc::new(AtomicU64::new(0));
        let counter = requests.clone();
        let http = http::bind(move |req| {
            let counter = counter.clone();
            async move { handle(mode, &counter, req) }
        })
        .await?;
        Ok(HostileServer { http, requests })
    }

    /// `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        self.http.base_url()
    }

    /// Completion requests received so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
}

fn handle(mode: Hostility, requests: &AtomicU64, req: Request) -> Response {
    match (&req.method, req.path.as_str()) {
        (&Method::GET, "/health") => Response::json(StatusCode::OK, "{}"),
        (&Method::GET, "/v1/models") if mode == Hostility::Injection => {
            let injected = serde_json::to_string(INJECTION).unwrap_or_default();
            Response::json(
                StatusCode::OK,
                format!(
                    r#"{{"object":"list","data":[{{"id":{injected},"object":"model","owned_by":{injected}}}]}}"#
                ),
            )
        }
        (&Method::GET, "/v1/models") => Response::json(
            StatusCode::OK,
            r#"{"object":"list","data":[{"id":"hostile-model","object":"model"}]}"#,
        ),
        (&Method::POST, _) => {
            let n = requests.fetch_add(1, Ordering::Relaxed);
            answer(mode, n)
        }
        _ => http::error_response(StatusCode::NOT_FOUND, "not found"),
    }
}

/// The answer to the `n`-th completion request (from 0).
fn answer(mode: Hostility, n: u64) -> Response {
    match mode {
        Hostility::StatusCycle => {
            let code = STATUS_CYCLE[(n % STATUS_CYCLE.len() as u64) as usize];
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            http::error_response(status, &format!("scripted HTTP {code}"))
        }
        Hostility::Injection => {
            let injected = serde_json::to_string(INJECTION).unwrap_or_default();
            match n % 4 {
                0 => Response::full(StatusCode::INTERNAL_SERVER_ERROR, "text/plain", INJECTION),
                1 => Response::full(
                    StatusCode::OK,
                    "text/event-stream",
                    format!(
                        "{}event: error\ndata: {{\"error\":{{\"message\":{injected},\"code\":500}}}}\n\n",
                        String::from_utf8_lossy(EVENT)
                    ),
                ),
                2 => Response::full(
                    StatusCode::OK,
                    "text/event-stream",
                    format!("data: {{\"choices\": {injected}\n\ndata: [DONE]\n\n"),
                ),
                // A good answer now and then, so that points are measured
                // and a baseline can be blessed.
                _ => Response::full(StatusCode::OK, "text/event-stream", GOOD_STREAM),
            }
        }
        Hostility::Html => Response::full(StatusCode::OK, "text/html; charset=utf-8", HTML_PAGE),
        Hostility::Json => Response::json(StatusCode::OK, JSON_BODY),
        Hostility::EndlessErrorBody => {
            let (response, tx) = Response::stream(StatusCode::INTERNAL_SERVER_ERROR, "text/plain");
            let chunk = Bytes::from(b"Internal Server Error ".repeat(CHUNK / 22));
            tokio::spawn(endless(tx, Bytes::new(), chunk));
            response
        }
        Hostility::EndlessLine => {
            let (response, tx) = Response::stream(StatusCode::OK, "text/event-stream");
            tokio::spawn(endless(
                tx,
                Bytes::from_static(b"data: "),
                Bytes::from(vec![b'x'; CHUNK]),
            ));
            response
        }
        Hostility::EndlessEvents => {
            let (response, tx) = Response::stream(StatusCode::OK, "text/event-stream");
            tokio::spawn(endless(
                tx,
                Bytes::new(),
                Bytes::from(EVENT.repeat(CHUNK / EVENT.len())),
            ));
            response
        }
        Hostility::Drip { every } => {
            let (response, tx) = Response::stream(StatusCode::OK, "text/event-stream");
            tokio::spawn(async move {
                if tx.send(Bytes::from_static(EVENT)).await.is_err() {
                    return;
                }
                for &b in EVENT.iter().cycle() {
                    tokio::time::sleep(every).await;
                    if tx.send(Bytes::copy_from_slice(&[b])).await.is_err() {
                        return;
                    }
                }
            });
            response
        }
        Hostility::Pings { every } => {
            let (response, tx) = Response::stream(StatusCode::OK, "text/event-stream");
            tokio::spawn(async move {
                if tx.send(Bytes::from_static(EVENT)).await.is_err() {
                    return;
                }
                loop {
                    tokio::time::sleep(every).await;
                    if tx.send(Bytes::from_static(b": ping\n\n")).await.is_err() {
                        return;
                    }
                }
            });
            response
        }
    }
}

/// Writes `first`, then `chunk` over and over until the client goes away.
async fn endless(tx: BodySender, first: Bytes, chunk: Bytes) {
    if !first.is_empty() && tx.send(first).await.is_err() {
        return;
    }
    while tx.send(chunk.clone()).await.is_ok() {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// The head and the first bytes of the answer to a completion request.
    async fn first_bytes(mode: Hostility, n: usize) -> String {
        let server = HostileServer::start(mode).await.unwrap();
        let addr = server.base_url();
        let hostport = addr
            .trim_start_matches("http://")
            .trim_end_matches("/v1")
            .to_string();
        let mut s = tokio::net::TcpStream::connect(&hostport).await.unwrap();
        let body = "{}";
        s.write_all(
            format!(
                "POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
        .await
        .unwrap();
        let mut buf = vec![0u8; n];
        let mut got = 0;
        while got < n {
            let k = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf[got..]))
                .await
                .unwrap()
                .unwrap();
            if k == 0 {
                break;
            }
            got += k;
        }
        assert_eq!(server.requests(), 1);
        String::from_utf8_lossy(&buf[..got]).into_owned()
    }

    #[tokio::test]
    async fn each_mode_answers_as_documented() {
        let line = first_bytes(Hostility::EndlessLine, 200_000).await;
        assert!(line.starts_with("HTTP/1.1 200"), "{line:.100}");
        assert!(line.contains("text/event-stream"));
        // Past the head, only chunk framing (sizes in hex) and the line's
        // bytes: no newline within the body itself.
        let body = &line[line.find("data: ").unwrap() + 6..];
        for part in body.split("\r\n") {
            assert!(
                part.bytes().all(|b| b == b'x') || u64::from_str_radix(part, 16).is_ok(),
                "{part:.40}"
            );
        }
        let err = first_bytes(Hostility::EndlessErrorBody, 200_000).await;
        assert!(err.starts_with("HTTP/1.1 500"), "{err:.100}");
        let events = first_bytes(Hostility::EndlessEvents, 200_000).await;
        assert!(events.matches("data: {").count() > 1000);
        let html = first_bytes(Hostility::Html, 100).await;
        assert!(html.contains("text/html"), "{html}");
        let json = first_bytes(Hostility::Json, 150).await;
        assert!(json.contains("application/json"), "{json}");
        let every = Duration::from_millis(20);
        let t = std::time::Instant::now();
        let drip = first_bytes(Hostility::Drip { every }, 250).await;
        assert!(drip.contains("\"x\""));
        assert!(t.elapsed() >= every, "the drip is slow");
        let pings = first_bytes(Hostility::Pings { every }, 200).await;
        assert!(pings.contains(": ping"), "{pings}");
    }
}
