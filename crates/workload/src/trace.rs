//! Request traces, loaded once per point before its runs: the requests of
//! the replayed window, each with its send time on the replay's clock, its
//! lengths and its shared blocks (see `infer_bench_spec::trace` for the
//! formats). The arrival schedule (`arrival.rs`) takes the times and
//! prompt synthesis (`prompt.rs`) the rest, so a trace runs through the
//! same load loop as every other arrival mode.

use std::path::Path;

use super::WorkloadError;
use infer_bench_spec::Trace;
use infer_bench_spec::trace::{self, TraceRecord};

/// The requests of a trace's window.
#[derive(Debug, Clone)]
pub struct Replay {
    /// In time order; request `i` of a run is `records[i]`.
    pub records: Vec<TraceRecord>,
    /// Tokens per `hash_ids` block.
    pub block_tokens: u32,
}

impl Replay {
    /// The record of request `index` (the last for indices past the end,
    /// which no schedule reaches; the fingerprint builds a fixed number).
    pub fn record(&self, index: u64) -> &TraceRecord {
        &self.records[(index as usize).min(self.records.len() - 1)]
    }
}

/// Reads and parses a trace: a regular file of at most
/// [`infer_bench_spec::files::MAX_TRACE_BYTES`], keeping its window.
pub fn load(path: &Path, t: &Trace) -> Result<Replay, WorkloadError> {
    let bytes =
        infer_bench_spec::files::read_regular(path, infer_bench_spec::files::MAX_TRACE_BYTES)
            .map_err(|e| WorkloadError::file(path, format!("cannot read trace: {e}")))?;
    let text = std::str::from_utf8(&bytes).map_err(|e| {
        let (line, col) = infer_bench_spec::files::line_col_of(&bytes, e.valid_up_to());
        WorkloadError::line(path, line, "not UTF-8 text").at_col(col)
    })?;
    let parsed = trace::parse(text, t.format, t.window()).map_err(|e| {
        let mut w = match e.line {
            Some(l) => WorkloadError::line(path, l, e.message),
            None => WorkloadError::file(path, e.message),
        };
        w.col = e.col;
        w.hint = e.hint.map(str::to_string);
        w
    })?;
    if parsed.records.is_empty() {
        return Err(WorkloadError::file(
            path,
            format!(
                "no request inside the window ({} requests read)",
                parsed.read
            ),
        ));
    }
    Ok(Replay {
        records: parsed.records,
        block_tokens: t.block_tokens.max(1),
    })
}
