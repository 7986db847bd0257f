//! How a plan is run: the options `run`, `self-bench` and the tests give
//! (output directory, request log, progress, partition, load sharding),
//! read by the plan runner and by each point.

use std::path::PathBuf;

/// How to run.
pub struct RunOptions {
    pub out_dir: PathBuf,
    pub requests_jsonl: bool,
    /// With `requests_jsonl`: every line also carries each output event's
    /// time (`event_ms`; `run --requests=events`).
    pub request_events: bool,
    pub progress: Progress,
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
    /// Say more on stderr (`run -v`): per point, the dialect requests are
    /// written in and why, the connections opened before each run, and
    /// each run's window, counts and failures as it ends.
    pub verbose: bool,
}

/// How progress is shown on stderr.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// A live line per point (stderr is a terminal).
    Live,
    /// One line when each point ends (CI logs).
    Lines,
    Quiet,
}
