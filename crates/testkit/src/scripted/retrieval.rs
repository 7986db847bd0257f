//! The scripted server's retrieval endpoints: `POST /v1/embeddings` and
//! `POST /v1/rerank` (also `/rerank`). Each answer is one JSON body,
//! written in one write at `received + ttft` (the script's TTFT is a
//! retrieval request's whole latency); its record has one chunk, the
//! instant that write returned, so `true_e2e` is the truth a client's
//! latency is compared with. Token counts are whitespace-separated words,
//! as for completions: embeddings' usage is the sum over its inputs,
//! rerank's the query's words plus every document's.
//!
//! Embeddings: one vector per input, of the `dimensions` asked (else 8),
//! as floats or as base64 of little-endian f32s (`encoding_format`).
//! Rerank: a Cohere-style body (`{model, query, documents}`) gets
//! `{results: [{index, relevance_score}], usage}`; a TEI-style body
//! (`{query, texts}`) a bare array of `{index, score}`. Faults other than
//! `Http500` and `Http429` are not applied to these requests.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use base64::Engine as _;
use bytes::Bytes;
use hyper::StatusCode;
use hyper::header::{CONTENT_LENGTH, HeaderValue};
use serde_json::{Value, json};

use super::{ChunkTruth, Endpoint, Fault, State, Tracker, field, later};
use crate::error::BadRequest;
use infer_bench_sim::http::{self, BodyClosed, Request, Response};

/// Which retrieval endpoint a request came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retrieval {
    Embeddings,
    Rerank,
}

/// The dimension of a vector when the request asks for none.
pub const DEFAULT_DIMENSION: usize = 8;

fn words(v: &Value) -> u32 {
    v.as_str()
        .map_or(0, |s| s.split_whitespace().count() as u32)
}

pub(super) async fn answer(state: Arc<State>, kind: Retrieval, req: Request) -> Response {
    let seq = state.seq.fetch_add(1, Ordering::Relaxed) + 1;
    let mut t = Tracker::new(state.clone(), seq, Endpoint::Completions, req.received);
    t.rec.retrieval = Some(kind);
    let body: Value = match serde_json::from_slice(&req.body) {
        Ok(v @ Value::Object(_)) => v,
        _ => {
            t.rec.status = 400;
            t.rec.finished = Some(Instant::now());
            return http::error_response(StatusCode::BAD_REQUEST, "expected a JSON object");
        }
    };
    let obj = body.as_object().cloned().unwrap_or_default();
    let mut fields: Vec<String> = obj.keys().cloned().collect();
    fields.sort();
    t.rec.fields = fields;
    t.rec.model = obj
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let built = match kind {
        Retrieval::Embeddings => embeddings(&obj, &state.script.model),
        _ => rerank(&obj, &state.script.model),
    };
    let (text, prompt_tokens) = match built {
        Ok(b) => b,
        Err(message) => {
            t.rec.status = 400;
            t.rec.finished = Some(Instant::now());
            return http::error_response(StatusCode::BAD_REQUEST, &message.to_string());
        }
    };
    if state.script.keep_prompts {
        t.rec.prompt = obj
            .get("query")
            .or_else(|| obj.get("input").and_then(|i| i.get(0)))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
    }
    t.rec.prompt_tokens = prompt_tokens;
    state
        .prompt_tokens
        .fetch_add(u64::from(prompt_tokens), Ordering::Relaxed);
    let fault = state.script.fault_for(seq);
    match fault {
        Fault::Http500 | Fault::Http429 => {
            let now = Instant::now();
            t.rec.fault = fault;
            t.rec.fault_at = Some(now);
            t.rec.finished = Some(now);
            state.faults.fetch_add(1, Ordering::Relaxed);
            let (code, status) = if fault == Fault::Http500 {
                (500, StatusCode::INTERNAL_SERVER_ERROR)
            } else {
                (429, StatusCode::TOO_MANY_REQUESTS)
            };
            t.rec.status = code;
            return http::error_response(status, "scripted fault");
        }
        _ => {}
    }
    let due = later(t.rec.received, state.script.ttft);
    t.rec.client_gone = true;
    tokio::time::sleep_until(due.into()).await;
    t.rec.client_gone = false;
    t.rec.status = 200;
    let body = Bytes::from(text);
    let (response, tx) = Response::stream(StatusCode::OK, "application/json");
    let response = response.header(CONTENT_LENGTH, HeaderValue::from(body.len()));
    let Ok(flushed) = tx.queue_flushed(body).await else {
        return response;
    };
    drop(tx);
    tokio::spawn(async move {
        match flushed.await {
            Ok(at) => {
                t.rec.chunks.push(ChunkTruth { at, tokens: 0 });
                t.rec.finished = Some(at);
            }
            Err(BodyClosed) => t.rec.client_gone = true,
        }
        drop(t); // files the record
    });
    response
}

/// An embeddings answer and its prompt tokens.
fn embeddings(
    obj: &serde_json::Map<String, Value>,
    model: &str,
) -> Result<(String, u32), BadRequest> {
    let inputs: Vec<Value> = match obj.get("input") {
        Some(Value::Array(a)) => a.clone(),
        Some(s @ Value::String(_)) => vec![s.clone()],
        _ => return Err(field("input", "a string or an array of strings")),
    };
    let dim = match obj.get("dimensions") {
        None => DEFAULT_DIMENSION,
        Some(d) => d
            .as_u64()
            .filter(|d| *d > 0)
            .ok_or_else(|| field("dimensions", "a positive integer"))? as usize,
    };
    let base64 = obj.get("encoding_format").and_then(Value::as_str) == Some("base64");
    let tokens: u32 = inputs.iter().map(words).sum();
    // Written by hand: a large vector is a long string, not a tree of values.
    let mut out = String::from(r#"{"object":"list","data":["#);
    for i in 0..inputs.len() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!(
            r#"{{"object":"embedding","index":{i},"embedding":"#
        ));
        let x = |k: usize| ((i * 31 + k) % 17) as f32 / 16.0 - 0.5;
        if base64 {
            let bytes: Vec<u8> = (0..dim).flat_map(|k| x(k).to_le_bytes()).collect();
            out.push('"');
            out.push_str(&base64::engine::general_purpose::STANDARD.encode(bytes));
            out.push('"');
        } else {
            out.push('[');
            for k in 0..dim {
                if k > 0 {
                    out.push(',');
                }
                out.push_str(&x(k).to_string());
            }
            out.push(']');
        }
        out.push('}');
    }
    out.push_str(&format!(
        r#"],"model":{},"usage":{{"prompt_tokens":{tokens},"total_tokens":{tokens}}}}}"#,
        Value::from(model)
    ));
    Ok((out, tokens))
}

/// A rerank answer (Cohere-style or TEI-style, as the body was) and its
/// prompt tokens.
fn rerank(obj: &serde_json::Map<String, Value>, model: &str) -> Result<(String, u32), BadRequest> {
    let query = obj.get("query").ok_or(BadRequest::Missing("query"))?;
    let (docs, tei) = match (obj.get("documents"), obj.get("texts")) {
        (Some(Value::Array(d)), None) => (d, false),
        (None, Some(Value::Array(d))) => (d, true),
        _ => {
            return Err(field("documents", "an array of strings (or TEI's `texts`)"));
        }
    };
    let tokens = words(query) + docs.iter().map(words).sum::<u32>();
    // Scores by the documents' lengths, so the order is not the input's.
    let scored: Vec<(usize, f64)> = docs
        .iter()
        .enumerate()
        .map(|(i, d)| (i, 1.0 / (1.0 + words(d) as f64 + i as f64)))
        .collect();
    let body = if tei {
        Value::Array(
            scored
                .iter()
                .map(|(i, s)| json!({"index": i, "score": s}))
                .collect(),
        )
    } else {
        json!({
            "id": "rerank-scripted",
            "model": model,
            "results": scored.iter().map(|(i, s)| json!({"index": i, "relevance_score": s})).collect::<Vec<_>>(),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        })
    };
    Ok((body.to_string(), tokens))
}
