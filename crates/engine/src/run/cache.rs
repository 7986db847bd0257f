//! Cache hygiene (issue 42): before each run of a point, the server's
//! prefix cache is reset where the server offers that, so a run does not
//! read what an earlier run, or an earlier point on the same server, left
//! in it (guidellm issue 460). Named by dialect: vLLM `POST
//! /reset_prefix_cache` (served only with `VLLM_SERVER_DEV_MODE=1`),
//! SGLang `POST /flush_cache`, llama.cpp `POST /slots/{id}?action=erase`
//! for each slot `GET /slots` lists (served only with `--slot-save-path`).
//! Every outcome is recorded in the run's result; a failed reset is a
//! warning of the point, never the end of the run.

use infer_bench_protocol::http::HttpBackend;
use infer_bench_results::{CacheReset, CacheResetOutcome, outside::Outside};
use infer_bench_spec::{Dialect, ResetCache};

use super::servers::Server;

/// How much of an answer is read (a slot list, an error body).
const ANSWER_CAP: usize = 64 * 1024;

/// The most slots of a llama.cpp server erased one by one.
const MAX_SLOTS: usize = 1024;

/// Whether `policy` resets the cache of `server` before a run.
pub(super) fn wanted(policy: ResetCache, server: &Server) -> bool {
    match (policy, server) {
        (ResetCache::Never, _) | (_, Server::Virtual(_)) => false,
        (ResetCache::BetweenRuns, _) => true,
        // Only servers infer-bench started are its own to reset; an
        // external one may serve others.
        (ResetCache::Auto, Server::External { .. }) => false,
        (ResetCache::Auto, Server::Sim(_) | Server::Launched(_)) => true,
    }
}

/// Resets the prefix cache of the server `backend` reaches, in the way
/// `dialect` names.
pub(super) async fn reset(backend: &HttpBackend, dialect: Dialect) -> CacheReset {
    match dialect {
        Dialect::Vllm => single(backend, "/reset_prefix_cache").await,
        Dialect::Sglang => single(backend, "/flush_cache").await,
        Dialect::LlamaCpp => llama_slots(backend).await,
        Dialect::Openai | Dialect::Tgi | Dialect::Trtllm | Dialect::Tei => CacheReset {
            outcome: CacheResetOutcome::NotOffered,
            request: None,
            status: None,
            message: Some(Outside::new(format!(
                "the {} dialect offers no prefix-cache reset",
                dialect.name()
            ))),
            erased_tokens: None,
        },
    }
}

/// What a status says of a reset: done, not offered, or failed.
fn outcome_of(status: u16) -> CacheResetOutcome {
    match status {
        200..=299 => CacheResetOutcome::Done,
        404 | 405 | 501 => CacheResetOutcome::NotOffered,
        _ => CacheResetOutcome::Failed,
    }
}

fn body_message(body: &[u8]) -> Option<Outside> {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    (!text.is_empty())
        .then(|| Outside::new(infer_bench_results::outside::clip(text, 300).to_string()))
}

async fn single(backend: &HttpBackend, path: &str) -> CacheReset {
    let request = Some(format!("POST {path}"));
    match backend.post_answer(path, ANSWER_CAP).await {
        Ok((status, body)) => {
            let outcome = outcome_of(status);
            CacheReset {
                outcome,
                request,
                status: Some(status),
                message: (outcome != CacheResetOutcome::Done)
                    .then(|| body_message(&body))
                    .flatten(),
                erased_tokens: None,
            }
        }
        Err(e) => failed(request, None, e.to_string()),
    }
}

fn failed(request: Option<String>, status: Option<u16>, message: String) -> CacheReset {
    CacheReset {
        outcome: CacheResetOutcome::Failed,
        request,
        status,
        message: Some(Outside::new(message)),
        erased_tokens: None,
    }
}

/// llama.cpp: every slot `GET /slots` lists, erased.
async fn llama_slots(backend: &HttpBackend) -> CacheReset {
    let list = "GET /slots".to_string();
    let slots = match backend.get_answer("/slots", ANSWER_CAP).await {
        Err(e) => return failed(Some(list), None, e.to_string()),
        Ok((status, body)) if !(200..300).contains(&status) => {
            return CacheReset {
                outcome: outcome_of(status),
                request: Some(list),
                status: Some(status),
                message: body_message(&body),
                erased_tokens: None,
            };
        }
        Ok((_, body)) => match slot_ids(&body) {
            Some(ids) => ids,
            None => {
                return failed(
                    Some(list),
                    None,
                    "the slot list is not a JSON list of slots with ids".into(),
                );
            }
        },
    };
    let request = Some("POST /slots/{id}?action=erase".to_string());
    let mut erased = 0u64;
    let mut last = None;
    for id in slots {
        match backend
            .post_answer(&format!("/slots/{id}?action=erase"), ANSWER_CAP)
            .await
        {
            Err(e) => return failed(request, None, format!("slot {id}: {e}")),
            Ok((status, body)) if !(200..300).contains(&status) => {
                return CacheReset {
                    outcome: outcome_of(status),
                    request,
                    status: Some(status),
                    message: body_message(&body),
                    erased_tokens: None,
                };
            }
            Ok((status, body)) => {
                last = Some(status);
                erased += serde_json::from_slice::<serde_json::Value>(&body)
                    .ok()
                    .and_then(|v| v.get("n_erased").and_then(serde_json::Value::as_u64))
                    .unwrap_or(0);
            }
        }
    }
    CacheReset {
        outcome: CacheResetOutcome::Done,
        request,
        status: last,
        message: None,
        erased_tokens: Some(erased),
    }
}

/// The slot ids of llama.cpp's `GET /slots` answer (a list of objects
/// with an integer `id`), at most [`MAX_SLOTS`].
fn slot_ids(body: &[u8]) -> Option<Vec<u64>> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    let ids: Option<Vec<u64>> = v
        .as_array()?
        .iter()
        .map(|s| s.get("id").and_then(serde_json::Value::as_u64))
        .collect();
    ids.filter(|ids| ids.len() <= MAX_SLOTS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_sort_into_outcomes() {
        assert_eq!(outcome_of(200), CacheResetOutcome::Done);
        assert_eq!(outcome_of(204), CacheResetOutcome::Done);
        for s in [404, 405, 501] {
            assert_eq!(outcome_of(s), CacheResetOutcome::NotOffered, "{s}");
        }
        for s in [400, 401, 500, 503] {
            assert_eq!(outcome_of(s), CacheResetOutcome::Failed, "{s}");
        }
    }

    #[test]
    fn slot_ids_read_llama_cpp_slots() {
        assert_eq!(
            slot_ids(br#"[{"id":0,"n_ctx":1024},{"id":1,"is_processing":false}]"#),
            Some(vec![0, 1])
        );
        assert_eq!(slot_ids(br#"[{"n_ctx":1024}]"#), None);
        assert_eq!(slot_ids(br#"{"id":0}"#), None);
        assert_eq!(slot_ids(b"not json"), None);
    }
}
