//! The engine's errors: [`Error`], why a command stopped (the CLI maps it
//! to an exit code by its variant; the table is `infer_bench_results::exit`),
//! and the errors of its parts, each with the context it concerns: why a
//! point's server could not start or died ([`ServerError`], recorded as
//! the point's failure, never fatal to the run), why `merge` refused its
//! inputs ([`MergeError`]), and what load sharding cannot do
//! ([`SlotError`], [`StartError`]).

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use infer_bench_results::HistError;
use infer_bench_spec::SpecErrors;
use infer_bench_spec::plan::{ParsePartitionError, Partition};

/// Everything that can stop a run or a merge.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A results file could not be read or written, or is not what it
    /// should be.
    #[error(transparent)]
    Results(#[from] infer_bench_results::Error),
    /// A file or folder of the run could not be written.
    #[error("error: {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A workload's file (tokenizer, dataset) is missing or malformed.
    #[error("error: {0}")]
    Workload(#[from] infer_bench_workload::WorkloadError),
    /// `telemetry.gpu = "required"`, and a target has no GPU to measure.
    #[error("error: {0}")]
    Telemetry(#[from] infer_bench_telemetry::Error),
    /// The files given to `merge` are not the shards of one run (boxed:
    /// it names several files).
    #[error("error: {0}")]
    Merge(Box<MergeError>),
    /// `--agent --start-at`: a run whose length is not known in advance.
    #[error("error: with --agent, every run of every point starts at an agreed instant: {0}")]
    Timetable(#[from] SlotError),
    /// `--agent` with a capacity search.
    #[error(
        "error: a capacity search chooses each probe's level from the last one's result, which agents sharing the load cannot agree on in advance; run the search from one machine"
    )]
    SearchWithAgents,
    /// Another run holds the output folder (`run::lock`).
    #[error(
        "error: {}: another run is writing this folder{}; give this run its own --out, or wait for that one to end",
        dir.display(),
        pid.map(|p| format!(" (PID {p})")).unwrap_or_default()
    )]
    Busy { dir: PathBuf, pid: Option<u32> },
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

impl From<MergeError> for Error {
    fn from(e: MergeError) -> Error {
        Error::Merge(Box::new(e))
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a point could not be measured at all; recorded as its failure,
/// never fatal to the run.
#[derive(Debug, thiserror::Error)]
pub enum PointError {
    /// The target's CA certificate changed since the spec was compiled.
    #[error("cannot read the CA certificate {path}: {source}")]
    CaCert {
        path: String,
        #[source]
        source: infer_bench_spec::files::ReadError,
    },
    /// The point's HTTP client could not be built.
    #[error(transparent)]
    Client(#[from] infer_bench_protocol::Error),
    /// The simulator of a virtual-time run refused the point.
    #[error(transparent)]
    Server(#[from] ServerError),
    /// A KServe v2 server or model that is not ready, or whose metadata
    /// does not fit the workload.
    #[error(transparent)]
    Kserve(#[from] infer_bench_protocol::kserve::KserveError),
}

/// Why a point's server could not be started, or stopped being there.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The simulator refused the point's configuration or could not start.
    #[error(transparent)]
    Simulator(#[from] infer_bench_sim::Error),
    /// A server the target's `launch` block starts.
    #[error(transparent)]
    Launch(#[from] LaunchError),
}

/// Why a launched server could not be started, or died.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("the target has no launch block")]
    NoLaunchBlock,
    #[error("cannot find a free port: {0}")]
    NoFreePort(#[source] std::io::Error),
    /// A `{env.NAME}` placeholder whose variable is not set.
    #[error("the launch command uses {{{key}}}, but the environment variable {var} is not set")]
    EnvUnset { key: String, var: String },
    /// A `{env.NAME}` placeholder whose variable `allow_env` does not list.
    #[error("the launch command uses {{{key}}}, but `allow_env` does not list {var}")]
    EnvNotAllowed { key: String, var: String },
    /// A placeholder the point has no value for.
    #[error(
        "the launch command uses {{{key}}}, which has no value for this point (set it in the spec)"
    )]
    NoValue { key: String },
    /// The server's log cannot be created, or would be written through a
    /// symbolic link.
    #[error("cannot write the server's log: {0}")]
    Log(#[source] infer_bench_results::Error),
    #[error("the launch command is empty")]
    EmptyCommand,
    #[error(
        "cannot start `{program}`: {source}{}",
        if source.kind() == std::io::ErrorKind::NotFound { " (is it installed and on PATH?)" } else { "" }
    )]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start the server's log writer: {0}")]
    LogWriter(#[source] std::io::Error),
    /// The client that asks whether the server is ready.
    #[error(transparent)]
    Client(#[from] infer_bench_protocol::Error),
    #[error("interrupted while the server was starting")]
    Interrupted,
    #[error("the server did not answer 200 on {url} within {timeout}{log}")]
    NotReady {
        url: String,
        timeout: infer_bench_spec::Duration,
        log: LogTail,
    },
    #[error("the server was stopped")]
    Stopped,
    #[error("the server exited ({status}){log}")]
    Exited {
        status: std::process::ExitStatus,
        log: LogTail,
    },
    #[error("cannot check on the server: {0}")]
    Check(#[source] std::io::Error),
}

/// The last lines of a server's log, as an error about it ends: "; last
/// lines of LOG:" and the lines indented, or " (its log LOG is empty)".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogTail {
    pub path: PathBuf,
    pub tail: String,
}

impl std::fmt::Display for LogTail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.tail.trim().is_empty() {
            write!(f, " (its log {} is empty)", self.path.display())
        } else {
            let indented: Vec<String> = self.tail.lines().map(|l| format!("    | {l}")).collect();
            write!(
                f,
                "; last lines of {}:\n{}",
                self.path.display(),
                indented.join("\n")
            )
        }
    }
}

/// Why `merge` refused its inputs: they are not the shards of one run of
/// one spec, or a shard is damaged. Every variant names the files.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("merge needs at least one results file")]
    NoInputs,
    #[error(
        "{}: the spec these results carry no longer expands: {source}",
        path.display()
    )]
    NoLongerExpands {
        path: PathBuf,
        #[source]
        source: SpecErrors,
    },
    #[error(
        "{}: the spec these results carry does not compile here: {source}",
        path.display()
    )]
    DoesNotCompile {
        path: PathBuf,
        #[source]
        source: SpecErrors,
    },
    #[error("{}: point {id} is not a point of the spec it carries", path.display())]
    UnknownPoint { path: PathBuf, id: String },
    #[error(
        "point {id} is in both {} and {}: point shards must not overlap (each --partition K/N once)",
        first.display(),
        second.display()
    )]
    Overlap {
        id: String,
        first: PathBuf,
        second: PathBuf,
    },
    #[error("{}: partition: {source}", path.display())]
    BadPartition {
        path: PathBuf,
        #[source]
        source: ParsePartitionError,
    },
    #[error(
        "{} ran {first} and {} ran {second}: shards of different splits do not add up to the plan (run every shard of one split, --partition {}:K/{n} for K = 1..{n})",
        first_path.display(),
        second_path.display(),
        first.parts().0,
        n = first.parts().2
    )]
    OtherSplits {
        first_path: PathBuf,
        first: Partition,
        second_path: PathBuf,
        second: Partition,
    },
    #[error(
        "{} ran without --partition and {} ran {part}: merge point shards of one split, or whole runs (--only) that do not overlap",
        whole.display(),
        split.display()
    )]
    WholeAndSplit {
        whole: PathBuf,
        split: PathBuf,
        part: Partition,
    },
    #[error(
        "{} and {} are not shards of one run: {differ}\n  hint: merge combines the results of one spec run with --partition or --agent on several machines",
        a.display(),
        b.display()
    )]
    NotOneRun {
        a: PathBuf,
        b: PathBuf,
        differ: Difference,
    },
    #[error(
        "{} and {} ran on different environments: {key} is \"{first_value}\" and \"{second_value}\"\n  hint: shards of one run must measure the same hardware and server; run them on identical machines",
        first.display(),
        second.display()
    )]
    OtherEnvironment {
        first: PathBuf,
        second: PathBuf,
        key: String,
        first_value: String,
        second_value: String,
    },
    #[error("point {id} has two shares from agent {k}/{n}: {} and {}", first.display(), second.display())]
    TwoShares {
        id: String,
        k: u32,
        n: u32,
        first: PathBuf,
        second: PathBuf,
    },
    #[error(
        "point {id} is missing the shares of agent{} {}: every agent's results are needed for an exact merge",
        if missing.len() == 1 { "" } else { "s" },
        missing.iter().map(|k| format!("{k}/{n}")).collect::<Vec<_>>().join(", ")
    )]
    MissingShares {
        id: String,
        n: u32,
        missing: Vec<u32>,
    },
    #[error(
        "{}: agent {k}/{n} built different requests for point {id} (workload sha256 differs from agent {lead}'s): were the agents' tokenizers or datasets different files?",
        path.display()
    )]
    OtherRequests {
        path: PathBuf,
        id: String,
        k: u32,
        n: u32,
        lead: u32,
    },
    #[error(
        "{}: point {id} run {run} of agent {k}/{n} carries no shard data (written by an infer-bench older than merge?)",
        path.display()
    )]
    NoShardData {
        path: PathBuf,
        id: String,
        /// 1-based.
        run: usize,
        k: u32,
        n: u32,
    },
    #[error("{}: point {id} run {run}: {source}", path.display())]
    Shards {
        path: PathBuf,
        id: String,
        /// 1-based.
        run: usize,
        #[source]
        source: ShardError,
    },
}

/// What differs between two results files that are to be shards of one run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Difference {
    /// Different specs (the first 12 characters of each SHA-256).
    #[error(
        "they come from different specs (\"{a_name}\" sha256 {} vs \"{b_name}\" sha256 {})",
        short(a_sha256),
        short(b_sha256)
    )]
    Specs {
        a_name: String,
        a_sha256: String,
        b_name: String,
        b_sha256: String,
    },
    #[error("their seeds differ ({0} vs {1})")]
    Seeds(u64, u64),
    #[error("their metric definitions differ (metrics version {0} vs {1})")]
    MetricsVersions(u32, u32),
    #[error(
        "their agents were given different start times ({} vs {})",
        .0.as_deref().unwrap_or("none"),
        .1.as_deref().unwrap_or("none")
    )]
    StartTimes(Option<String>, Option<String>),
    #[error("their agents were given different --slot values")]
    Slots,
    #[error("one is agent {0}/{1} and the other agent {2}/{3}")]
    AgentCounts(u32, u32, u32, u32),
    #[error("one is agent {0}/{1} of a load-sharded run and the other is not load-sharded")]
    OneSharded(u32, u32),
}

/// The first 12 characters (a file may hold anything here).
fn short(s: &str) -> String {
    s.chars().take(12).collect()
}

/// Why agents' shards of one run cannot be added up.
#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    #[error("no shards")]
    NoShards,
    #[error("the agents used different window lengths")]
    WindowLengths,
    #[error("histogram {series}: {source}")]
    Histogram {
        series: &'static str,
        #[source]
        source: HistError,
    },
}

/// `--agent --start-at`: a point whose runs cannot be given agreed start
/// times, because how long a run takes is not known in advance.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "point {point}: {}, so how long a run takes is not known in advance; give --slot DURATION (the longest a run may take, warm-up and drain included)",
    match unknown {
        UnknownLength::WarmupByRequests => "its warm-up is a request count",
        UnknownLength::EndsByRequests => "it ends by request count",
    }
)]
pub struct SlotError {
    /// The point's slug.
    pub point: String,
    pub unknown: UnknownLength,
}

/// Why the length of a point's run is not known in advance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnknownLength {
    WarmupByRequests,
    EndsByRequests,
}

/// `--start-at`: a time that cannot be read, or that this machine's clock
/// says cannot be kept.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(
        "--start-at expects a UTC time in RFC 3339, such as 2026-12-03T10:00:00Z, found \"{found}\" ({source})"
    )]
    Unreadable {
        found: String,
        #[source]
        source: humantime::TimestampError,
    },
    /// The agreed start is already past by more than the skew allowed.
    #[error(
        "the agreed start {} is {:.3} s in the past by this machine's clock ({}), beyond the {} s allowed: either this clock is ahead of the one that chose the start, or this agent began too late\n  hint: choose a start far enough ahead for every agent to be ready (e.g. now + 30 s), and check that the agents' clocks are synchronized (`chronyc tracking` or `timedatectl`)",
        humantime::format_rfc3339_millis(*start),
        behind.as_secs_f64(),
        humantime::format_rfc3339_millis(*now),
        max_skew.as_secs_f64()
    )]
    Past {
        start: SystemTime,
        now: SystemTime,
        behind: Duration,
        max_skew: Duration,
    },
    /// The agreed start is further ahead than an agent waits.
    #[error(
        "the agreed start {} is {:.0} s ahead of this machine's clock ({}), beyond the {:.0} s an agent waits\n  hint: check the agents' clocks and the --start-at value",
        humantime::format_rfc3339_millis(*start),
        ahead.as_secs_f64(),
        humantime::format_rfc3339_millis(*now),
        max_wait.as_secs_f64()
    )]
    TooFarAhead {
        start: SystemTime,
        now: SystemTime,
        ahead: Duration,
        max_wait: Duration,
    },
}
