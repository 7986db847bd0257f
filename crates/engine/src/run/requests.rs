//! The request log: `requests.jsonl`, one `RequestLine` per finished
//! request (the format is in `infer_bench_results::requests`), filled from
//! the request's record and streamed to disk by a writer thread as runs go.
//! Each line passes the run's redactor on its way out: an error a server
//! sent back may quote the API key.

use std::io::Write;
use std::time::Instant;

use crate::backend::RequestRecord;
use crate::backend::record::OutputEvent;
use crate::error::{Error, Result};
use infer_bench_results::redact::Redactor;
use infer_bench_results::requests::RequestLine;

/// Per-request records, streamed to disk by a writer thread.
pub struct RequestLog {
    tx: std::sync::mpsc::Sender<String>,
    thread: std::thread::JoinHandle<()>,
}

impl RequestLog {
    pub(super) fn open(path: &std::path::Path, redactor: Redactor) -> Result<RequestLog> {
        let file = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let thread = std::thread::spawn(move || {
            let mut w = std::io::BufWriter::new(file);
            for line in rx {
                let _ = w.write_all(redactor.text_cow(&line).as_bytes());
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

/// The log's line for one finished request, newline-terminated.
pub(super) fn request_line(point: &str, r: &RequestRecord, run_start: Instant) -> String {
    let ms = |a: Instant, b: Instant| b.saturating_duration_since(a).as_secs_f64() * 1e3;
    let event_ms = |e: &OutputEvent| e.at_ns as f64 / 1e6;
    let send_ms = ms(r.t_sched, r.t_send);
    let (first, last) = (r.events.first(), r.events.last());
    let (out, source) = r.output_tokens();
    let line = RequestLine {
        point: point.to_string(),
        run: r.run,
        index: r.index,
        turn: r.turn,
        warmup: r.warmup,
        step: r.step,
        sched_ms: ms(run_start, r.t_sched),
        queue_ms: ms(r.t_sched, r.t_slot),
        dispatch_lag_ms: ms(r.t_slot, r.t_send),
        ttft_ms: first.map(|e| event_ms(e) + send_ms),
        e2e_ms: last.map(|e| event_ms(e) + send_ms),
        events: r.events.len() as u64,
        input_tokens_requested: r.requested_input,
        input_tokens: r.usage.prompt_tokens,
        output_tokens_requested: r.requested_output,
        output_tokens: out,
        token_source: source,
        error: r.failure.as_ref().map(|f| f.class.name().to_string()),
        error_detail: r.failure.as_ref().map(|f| f.detail.clone()),
        ttft_from_send_ms: first.map(event_ms),
        tpot_ms: match (first, last) {
            (Some(f), Some(l)) if out >= 2 => {
                Some((l.at_ns - f.at_ns) as f64 / 1e6 / (out - 1) as f64)
            }
            _ => None,
        },
        server_timing: r.server_timing,
    };
    let mut text = serde_json::to_string(&line).expect("serializes");
    text.push('\n');
    text
}
