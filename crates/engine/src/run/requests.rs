//! The request log: `requests.jsonl`, one line per finished request,
//! streamed to disk by a writer thread as runs go.

use std::io::Write;
use std::time::Instant;

use crate::backend::RequestRecord;
use crate::error::{Error, Result};

/// Per-request records, streamed to disk by a writer thread.
pub struct RequestLog {
    tx: std::sync::mpsc::Sender<String>,
    thread: std::thread::JoinHandle<()>,
}

impl RequestLog {
    pub(super) fn open(path: &std::path::Path) -> Result<RequestLog> {
        let file = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let thread = std::thread::spawn(move || {
            let mut w = std::io::BufWriter::new(file);
            for line in rx {
                let _ = w.write_all(line.as_bytes());
            }
            let _ = w.flush();
        });
        Ok(RequestLog { tx, thread })
    }
    pub(super) fn sender(&self) -> std::sync::mpsc::Sender<String> {
        self.tx.clone()
    }
    pub(super) fn close(self) {
        drop(self.tx);
        let _ = self.thread.join();
    }
}

/// The log's line for one finished request (times in ms).
pub(super) fn request_line(point: &str, r: &RequestRecord, run_start: Instant) -> String {
    let ms = |a: Instant, b: Instant| b.saturating_duration_since(a).as_secs_f64() * 1e3;
    let first = r
        .events
        .first()
        .map(|e| e.at_ns as f64 / 1e6 + ms(r.t_sched, r.t_send));
    let last = r
        .events
        .last()
        .map(|e| e.at_ns as f64 / 1e6 + ms(r.t_sched, r.t_send));
    let (out, source) = r.output_tokens();
    let mut line = serde_json::to_string(&serde_json::json!({
        "point": point,
        "run": r.run,
        "index": r.index,
        "turn": r.turn,
        "warmup": r.warmup,
        "step": r.step,
        "sched_ms": ms(run_start, r.t_sched),
        "queue_ms": ms(r.t_sched, r.t_slot),
        "dispatch_lag_ms": ms(r.t_slot, r.t_send),
        "ttft_ms": first,
        "e2e_ms": last,
        "events": r.events.len(),
        "input_tokens_requested": r.requested_input,
        "input_tokens": r.usage.prompt_tokens,
        "output_tokens_requested": r.requested_output,
        "output_tokens": out,
        "token_source": source,
        "error": r.failure.as_ref().map(|f| f.class.name()),
        "error_detail": r.failure.as_ref().map(|f| f.detail.as_str()),
        "ttft_from_send_ms": r.events.first().map(|e| e.at_ns as f64 / 1e6),
        "tpot_ms": match (r.events.first(), r.events.last()) {
            (Some(f), Some(l)) if out >= 2 => Some((l.at_ns - f.at_ns) as f64 / 1e6 / (out - 1) as f64),
            _ => None,
        },
        "server_timing": r.server_timing,
    }))
    .expect("serializes");
    line.push('\n');
    line
}
