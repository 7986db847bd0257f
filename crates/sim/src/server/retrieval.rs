//! The simulator's retrieval endpoints, `POST /v1/embeddings` and
//! `POST /v1/rerank` (and `/rerank`): prefill-only work. Each input (an
//! embedding's text; a rerank document paired with its query, as a
//! cross-encoder reads them) is submitted to the engine as a sequence of
//! its tokens (one per word) that asks for one token; the sequence is
//! done when its prefill is, so the answer's latency is the engine's
//! queueing and prefill physics for those sequences, batched with
//! whatever else it serves. The answer has the shape the real servers
//! give: one vector per input (`dimensions`, else 16; floats or base64),
//! or one `relevance_score` per document (`{query, texts}` bodies, TEI's,
//! get TEI's bare array), with `usage.prompt_tokens`.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use base64::Engine as _;
use hyper::StatusCode;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{Cmd, Ctx, Out, error};
use crate::http::{Request, Response};
use crate::request::Refusal;

/// The vector length when a request asks for none.
const DIMENSION: usize = 16;
/// The most elements of all the vectors of one answer.
const MAX_ELEMENTS: usize = 1 << 24;

fn words(v: &Value) -> u32 {
    v.as_str()
        .map_or(0, |s| s.split_whitespace().count() as u32)
}

fn texts(v: Option<&Value>) -> Option<Vec<&Value>> {
    match v? {
        Value::Array(a) if a.iter().all(Value::is_string) && !a.is_empty() => {
            Some(a.iter().collect())
        }
        s @ Value::String(_) => Some(vec![s]),
        _ => None,
    }
}

/// Runs `lengths` through the engine as prefill-only sequences; `false`
/// when the engine is gone.
async fn prefill(ctx: &Ctx, lengths: &[u32]) -> bool {
    let mut waits = Vec::with_capacity(lengths.len());
    for &n in lengths {
        let id = ctx.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::unbounded_channel();
        if ctx
            .cmds
            .send(Cmd::Submit {
                id,
                prompt_tokens: n,
                max_tokens: 1,
                image_tokens: 0,
                tx,
            })
            .is_err()
        {
            return false;
        }
        waits.push(rx);
    }
    for mut rx in waits {
        while let Some(out) = rx.recv().await {
            if matches!(out, Out::Done) {
                break;
            }
        }
    }
    true
}

/// What the simulator makes of a retrieval request: the prefill-only
/// sequences it runs (one per input; one per document, with its query) and
/// the answer it writes once they are done. A pure function: the HTTP
/// server and the virtual-time driver (the engine crate's
/// `run::virtual_time`) both answer through it, so a request counts the
/// same tokens, is refused for the same reasons and gets the same bytes
/// whichever clock runs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    /// Each sequence's tokens.
    pub lengths: Vec<u32>,
    /// The answer's JSON.
    pub body: String,
}

/// Reads an embeddings (`rerank` false) or rerank request's body against
/// the models `served` and their `max_len`; `id` names a rerank answer.
pub fn plan(
    body: &[u8],
    served: &[String],
    max_len: u32,
    rerank: bool,
    id: u64,
) -> Result<Planned, Refusal> {
    let bad = |m: &str| Refusal {
        status: 400,
        message: m.to_string(),
        kind: "invalid_request_error",
    };
    let Ok(Value::Object(body)) = serde_json::from_slice::<Value>(body) else {
        return Err(bad("expected a JSON object"));
    };
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let tei = rerank && body.contains_key("texts");
    if !tei && !served.contains(&model) {
        return Err(Refusal {
            status: 404,
            message: format!("The model `{model}` does not exist."),
            kind: "NotFoundError",
        });
    }
    let (lengths, text) = if rerank {
        let Some(query) = body.get("query").filter(|q| q.is_string()) else {
            return Err(bad("`query` is required"));
        };
        let Some(docs) = texts(body.get(if tei { "texts" } else { "documents" })) else {
            return Err(bad("`documents` must be a non-empty array of strings"));
        };
        let q = words(query);
        let lengths: Vec<u32> = docs.iter().map(|d| q + words(d)).collect();
        let tokens: u32 = lengths.iter().sum();
        let scores: Vec<(usize, f64)> = docs
            .iter()
            .enumerate()
            .map(|(i, d)| (i, 1.0 / (1.0 + (words(d) as f64 - q as f64).abs())))
            .collect();
        let text = if tei {
            json!(scores.iter().map(|(i, s)| json!({"index": i, "score": s})).collect::<Vec<_>>())
        } else {
            json!({
                "id": format!("rerank-{id}"),
                "model": model,
                "results": scores.iter().map(|(i, s)| json!({"index": i, "relevance_score": s})).collect::<Vec<_>>(),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            })
        }
        .to_string();
        (lengths, text)
    } else {
        let Some(inputs) = texts(body.get("input")) else {
            return Err(bad(
                "`input` must be a string or a non-empty array of strings",
            ));
        };
        let dim = match body.get("dimensions") {
            None => DIMENSION,
            Some(d) => match d.as_u64().filter(|d| *d > 0) {
                Some(d) if d as usize * inputs.len() <= MAX_ELEMENTS => d as usize,
                _ => {
                    return Err(bad(
                        "`dimensions` must be a positive integer within the simulator's bound",
                    ));
                }
            },
        };
        let base64 = body.get("encoding_format").and_then(Value::as_str) == Some("base64");
        let lengths: Vec<u32> = inputs.iter().map(|t| words(t)).collect();
        let tokens: u32 = lengths.iter().sum();
        let data: Vec<Value> = (0..inputs.len())
            .map(|i| {
                let x = |k: usize| ((i * 7 + k) % 13) as f32 / 13.0 - 0.5;
                let embedding = if base64 {
                    let b: Vec<u8> = (0..dim).flat_map(|k| x(k).to_le_bytes()).collect();
                    Value::from(base64::engine::general_purpose::STANDARD.encode(b))
                } else {
                    Value::from((0..dim).map(|k| x(k) as f64).collect::<Vec<_>>())
                };
                json!({"object": "embedding", "index": i, "embedding": embedding})
            })
            .collect();
        let text = json!({
            "object": "list",
            "data": data,
            "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        })
        .to_string();
        (lengths, text)
    };
    if lengths.iter().any(|n| n.saturating_add(1) > max_len) {
        return Err(bad(&format!(
            "an input is longer than the model's maximum context length ({max_len} tokens)"
        )));
    }
    Ok(Planned {
        lengths: lengths.into_iter().map(|n| n.max(1)).collect(),
        body: text,
    })
}

pub(super) async fn answer(ctx: Arc<Ctx>, req: Request, rerank: bool) -> Response {
    let id = ctx.next_id.load(Ordering::Relaxed);
    let planned = match plan(&req.body, &ctx.served, ctx.max_len, rerank, id) {
        Ok(p) => p,
        Err(r) => return error(status_of(r.status), &r.message, r.kind),
    };
    if !ctx.request_overhead.is_zero() {
        tokio::time::sleep(ctx.request_overhead).await;
    }
    if !prefill(&ctx, &planned.lengths).await {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the simulator is shutting down",
            "ServiceUnavailable",
        );
    }
    Response::json(StatusCode::OK, planned.body)
}

fn status_of(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST)
}
