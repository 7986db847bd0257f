//! The small, fast OpenAI-compatible server `self-bench` measures the
//! client against, in its own process (`infer-bench scripted-server`):
//! streamed completions whose first token comes `ttft` after the request
//! and every further one `itl` later (absolute deadlines, so lateness does
//! not accumulate), ending with usage and `[DONE]`. Nothing else: no fault
//! scripts and no recorded truth, which the test kit's scripted server has.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use hyper::{Method, StatusCode};
use infer_bench_sim::http::{self, Request, Response, ServerHandle};
use serde::Deserialize;

/// The model id the server answers to.
pub const MODEL: &str = "scripted-model";

/// Output tokens when a request does not say.
const DEFAULT_MAX_TOKENS: u32 = 16;

#[derive(Deserialize)]
struct CompletionRequest {
    #[serde(default)]
    prompt: serde_json::Value,
    #[serde(default)]
    max_tokens: Option<u32>,
    #[serde(default)]
    stream: bool,
}

/// Starts the server on a port of 127.0.0.1 the OS picks; it runs on the
/// current tokio runtime until the handle is dropped.
pub async fn start(ttft: Duration, itl: Duration) -> std::io::Result<ServerHandle> {
    let ids = std::sync::Arc::new(AtomicU64::new(0));
    http::bind(move |req| {
        let id = ids.fetch_add(1, Ordering::Relaxed);
        answer(req, id, ttft, itl)
    })
    .await
}

async fn answer(req: Request, id: u64, ttft: Duration, itl: Duration) -> Response {
    match (&req.method, req.path.as_str()) {
        (&Method::GET, "/health") => Response::json(StatusCode::OK, r#"{"status":"ok"}"#),
        (&Method::GET, "/v1/models") => Response::json(
            StatusCode::OK,
            format!(r#"{{"object":"list","data":[{{"id":"{MODEL}","object":"model"}}]}}"#),
        ),
        (&Method::POST, "/v1/completions") => complete(req, id, ttft, itl).await,
        _ => http::error_response(StatusCode::NOT_FOUND, "not found"),
    }
}

async fn complete(req: Request, id: u64, ttft: Duration, itl: Duration) -> Response {
    let Ok(body) = serde_json::from_slice::<CompletionRequest>(&req.body) else {
        return http::error_response(
            StatusCode::BAD_REQUEST,
            "the body is not a completion request",
        );
    };
    let prompt_tokens = match &body.prompt {
        serde_json::Value::String(s) => s.split_whitespace().count(),
        _ => 0,
    };
    let n = body.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS).max(1);
    let usage = format!(
        r#"{{"prompt_tokens":{prompt_tokens},"completion_tokens":{n},"total_tokens":{}}}"#,
        prompt_tokens + n as usize
    );
    let start = tokio::time::Instant::from_std(req.received);
    if !body.stream {
        tokio::time::sleep_until(start + ttft + itl * (n - 1)).await;
        let text = " tok".repeat(n as usize);
        return Response::json(
            StatusCode::OK,
            format!(
                r#"{{"id":"cmpl-{id}","object":"text_completion","model":"{MODEL}","choices":[{{"index":0,"text":"{text}","finish_reason":"length"}}],"usage":{usage}}}"#
            ),
        );
    }
    let (response, tx) = Response::stream(StatusCode::OK, "text/event-stream");
    tokio::spawn(async move {
        for i in 0..n {
            tokio::time::sleep_until(start + ttft + itl * i).await;
            let last = i + 1 == n;
            let finish = if last { r#""length""# } else { "null" };
            let tail = if last {
                format!(r#","usage":{usage}"#)
            } else {
                String::new()
            };
            let event = format!(
                "data: {{\"id\":\"cmpl-{id}\",\"object\":\"text_completion\",\"model\":\"{MODEL}\",\"choices\":[{{\"index\":0,\"text\":\" tok\",\"finish_reason\":{finish}}}]{tail}}}\n\n"
            );
            if tx.send(Bytes::from(event)).await.is_err() {
                return;
            }
        }
        let _ = tx.send(Bytes::from_static(b"data: [DONE]\n\n")).await;
    });
    response
}
