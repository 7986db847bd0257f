//! How a plan is run: the options `run`, `self-bench` and the tests give
//! (output directory, request log, partition, load sharding, fault
//! injection) and who is told what happens (the observer), read by the
//! plan runner and by each point.

use std::path::PathBuf;
use std::sync::Arc;

use super::observe::{Observer, Silent};

/// How to run.
pub struct RunOptions {
    pub out_dir: PathBuf,
    pub requests_jsonl: bool,
    /// With `requests_jsonl`: every line also carries each output event's
    /// time (`event_ms`; `run --requests=events`).
    pub request_events: bool,
    pub partition: Option<String>,
    /// Load sharding: this process is agent K of N.
    pub agent: Option<(u32, u32)>,
    /// With `agent`: the agreed start of the first run (`--start-at`).
    pub start_at: Option<std::time::SystemTime>,
    /// With `agent`: each run's slot in the timetable (`--slot`).
    pub slot: Option<std::time::Duration>,
    /// Fault injection: the client spins this long before each send
    /// (a client made slow on purpose, for tests of the hints).
    pub slow_client: Option<std::time::Duration>,
    /// Told what happens as the plan runs (the command line draws and
    /// prints it; [`Silent`] shows nothing).
    pub observer: Arc<dyn Observer>,
}

impl RunOptions {
    /// Results into `out_dir`, no request log, nothing shown: the defaults
    /// a caller changes with struct update syntax.
    pub fn new(out_dir: impl Into<PathBuf>) -> RunOptions {
        RunOptions {
            out_dir: out_dir.into(),
            requests_jsonl: false,
            request_events: false,
            partition: None,
            agent: None,
            start_at: None,
            slot: None,
            slow_client: None,
            observer: Arc::new(Silent),
        }
    }
}
