//! What a run tells whoever watches it. The engine prints nothing: as a
//! plan runs it reports each thing a person may want to see (a server
//! ready or dead, a run started with its live counters, a point done, a
//! detail for `-v`, a warning that does not stop the run) to the
//! [`Observer`] in its options, as typed data. The command line's observer
//! draws progress bars and writes lines on stderr; tests pass [`Silent`]
//! or one that collects.
//!
//! Text in an event that came from outside (a server's message, a URL, a
//! log) is as it came: the observer encodes it for where it writes it, and
//! masks the run's secrets (the redactor is installed process-wide by the
//! run).

use std::sync::Arc;
use std::time::Duration;

use infer_bench_protocol::WarmError;
use infer_bench_results::search::SearchResult;
use infer_bench_results::{Finding, ServerInfo, Stats};
use infer_bench_spec::Dialect;
use infer_bench_spec::plan::PointConfig;
use infer_bench_spec::results::PointResult;

use super::context::Live;

/// Receives a run's events, on the thread that runs the plan.
pub trait Observer: Send + Sync {
    fn event(&self, event: &Event<'_>);
}

/// An observer that shows nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct Silent;

impl Observer for Silent {
    fn event(&self, _: &Event<'_>) {}
}

/// Where the dialect of a point's requests came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DialectFrom {
    /// `[targets.X] dialect` named it.
    Spec,
    /// The simulator speaks vLLM's.
    Simulator,
    /// The server's `/v1/models` named it (`owned_by`).
    Server,
    /// Nobody named one: plain OpenAI.
    Default,
}

impl DialectFrom {
    /// How the results file records it (`server.dialect_from`).
    pub fn name(self) -> &'static str {
        match self {
            DialectFrom::Spec => "spec",
            DialectFrom::Simulator | DialectFrom::Server => "server",
            DialectFrom::Default => "default",
        }
    }
}

/// A run of a point beginning: what a live display draws from.
pub struct RunStart<'a> {
    /// The point's label (`[3/12] slug`, with a search probe's number).
    pub label: &'a str,
    /// The run's number, from 0.
    pub run: u32,
    pub config: &'a PointConfig,
    /// Requests done, failed and in flight, updated as the run goes.
    pub live: Arc<Live>,
    /// The plan's estimated time after this point's runs; `None` where a
    /// later point ends by request count.
    pub after_s: Option<f64>,
}

/// One thing a run reports.
pub enum Event<'a> {
    /// Said once per run for each target reached without checking its
    /// TLS certificate (`tls_insecure = true`).
    TlsInsecure { target: &'a str },
    /// A group's server could not be started: its points failed.
    ServerFailed { group: &'a str, message: &'a str },
    /// A group's server is ready (a launched or in-process one), or a
    /// virtual-time simulation begins (`url` is then `None`). `sim` says
    /// what decides a simulator's answers besides its GPU.
    ServerReady {
        group: &'a str,
        url: Option<&'a str>,
        after: Duration,
        sim: Option<&'a ServerInfo>,
    },
    /// A launched server died during a point; later points of its group fail.
    ServerDied { group: &'a str, message: &'a str },
    /// A launched server runs without the watchdog that stops it if
    /// infer-bench is killed.
    NoWatchdog { message: &'a str },
    /// A target's metrics endpoint will not be scraped.
    NotScraping {
        target: &'a str,
        url: &'a str,
        why: &'a str,
    },
    /// A pre-flight finding about a point (also kept in its results).
    Preflight {
        label: &'a str,
        finding: &'a Finding,
    },
    /// The dialect a point's requests are written in, and where it came from.
    Dialect {
        label: &'a str,
        dialect: Dialect,
        from: DialectFrom,
    },
    /// Connections opened before a run's clock started.
    Warmed {
        label: &'a str,
        run: u32,
        connections: usize,
        took: Duration,
        failed: Option<&'a WarmError>,
    },
    /// A run of a point begins.
    RunStarted(RunStart<'a>),
    /// A run of a point ended (its clock stopped; the point goes on), with
    /// what it measured; `None` when it could not be run.
    RunEnded {
        label: &'a str,
        run: u32,
        stats: Option<&'a Stats>,
    },
    /// A point is done and assessed.
    PointDone {
        label: &'a str,
        point: &'a PointResult,
    },
    /// A server's quality phase is done (`[quality]`): how many of the
    /// prompts it answered, and in how long.
    QualityDone {
        group: &'a str,
        answered: u64,
        prompts: u64,
        elapsed: Duration,
    },
    /// A capacity search's answer.
    SearchDone {
        label: &'a str,
        answer: &'a SearchResult,
    },
}
