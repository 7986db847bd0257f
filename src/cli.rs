//! The command line: clap definitions of what the user can type. `main.rs`
//! parses it and hands the command to `app`.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::plan::Partition;

const SELF_BENCH_HELP: &str = "\
A row passes when every request succeeded, the client's ITL (p50 and p99)
is within 1 ms of what the server wrote (1% of it above 100 ms) and the
server's within 1 ms of the script, the client stamped each first token
within that of the server's write (its log joined with the server's by
response id, on the wall clock both share), the server wrote first tokens
within that of its script, and the client's dispatch lag p99 is under
1 ms; the idle check when the process uses under 0.5% of a core at
1 request/s; the floor check when the client's CPU per event is within
1.3x the minimal client's (in a full run, the median of five pairs'
ratios). A row whose client was within tolerance of what the server
wrote, while the server fell behind its own script, reads `server late`:
the load was not the one asked for, so it is not a pass. In a ladder
(streams, rate) the first load that fails above one that held is the
machine's limit, not a failure.

Exit status:
  0  every check held
  1  a check failed, or the server fell behind its script: its row says why
  2  the command line is wrong (an unknown check)
  3  the scripted server or the floor client could not start";

const INIT_HELP: &str = "\
Examples:
  infer-bench init                                   # ./bench.toml on the simulator
  infer-bench init bench --url http://127.0.0.1:8000/v1 --ci github
  infer-bench init vision --url http://127.0.0.1:8000 --model resnet50   # a Triton (KServe v2) model

Then `infer-bench run bench.toml`, from the folder that holds baselines/.

Exit status:
  0  written
  2  a file it would write is there (nothing is written), or a bad option
  3  the server at --url did not answer with a usable model (nothing is written)";

/// Benchmarks LLM inference servers from declarative TOML specs, and judges
/// the results against baselines kept in version control.
#[derive(Debug, Parser)]
#[command(name = "infer-bench", version, about, after_help = infer_bench_results::exit::help(), propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Colour verdicts, SLO results and validity in tables on stdout:
    /// auto (only when stdout is a terminal and NO_COLOR is not set),
    /// always, or never. Files and piped output are never coloured
    /// under auto.
    #[arg(long, global = true, value_enum, default_value_t = ColorWhen::Auto, value_name = "WHEN")]
    pub color: ColorWhen,
    /// Show every column of the summary tables (by default they fit 120
    /// columns and name the columns they leave out).
    #[arg(long, global = true)]
    pub wide: bool,
}

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorWhen {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start a spec, as `cargo init` starts a crate: write DIR/bench.toml
    /// (a starter spec that runs as written), an empty DIR/baselines/ and,
    /// with --ci github, a workflow that gates pull requests. Without
    /// --url the spec's target is the built-in simulator (no server, no
    /// GPU); with --url it asks the server for its model
    /// (`GET URL/models`, or a KServe v2 server's model metadata) and
    /// targets it. Never overwrites a file.
    #[command(after_help = INIT_HELP)]
    Init {
        /// The folder to write in (created if missing).
        #[arg(default_value = ".")]
        dir: PathBuf,
        /// The server's OpenAI base URL, e.g. http://127.0.0.1:8000/v1:
        /// its first model in `/models` becomes the spec's model, and the
        /// dialect its `owned_by` names becomes the target's. Or a KServe
        /// v2 server's root (Triton: http://127.0.0.1:8000): a model's
        /// metadata becomes a tensor workload, or a generate one for a
        /// model with a `text_input`.
        #[arg(long)]
        url: Option<String>,
        /// With --url: the model to write the spec for, one the server
        /// lists (default: its first; on a KServe v2 server, the first
        /// ready model it lists that init can send).
        #[arg(long, requires = "url")]
        model: Option<String>,
        /// Also write a CI workflow: `github` writes
        /// .github/workflows/infer-bench.yml, which runs the composite
        /// action on pull requests.
        #[arg(long, value_enum, value_name = "CI")]
        ci: Option<crate::init::Ci>,
        /// The spec's name: names its results folder and its baseline,
        /// baselines/NAME.json.
        #[arg(long, default_value = "bench")]
        name: String,
    },
    /// Check specs against the schema and the semantic rules.
    Validate {
        /// Spec files.
        #[arg(required = true)]
        specs: Vec<PathBuf>,
    },
    /// Print the points a spec expands into, with IDs and a wall-time estimate.
    Plan {
        /// The spec file (TOML).
        spec: PathBuf,
        #[arg(long, value_enum, default_value_t = PlanFormat::Table)]
        format: PlanFormat,
        /// Print only the number of points (those --only and --partition
        /// select), e.g. to size a job array: `--array=1-$(infer-bench plan
        /// SPEC --count)`.
        #[arg(long, conflicts_with = "format")]
        count: bool,
        #[command(flatten)]
        select: Select,
    },
    /// Run every point of a spec and write results.
    Run(RunArgs),
    /// Judge results against a baseline; exits 1 on a regression.
    Diff(DiffArgs),
    /// Write results as the new baseline (atomically).
    Bless {
        /// A results file (results.json) or a run directory.
        results: PathBuf,
        /// Only these points (IDs, slugs, or slug prefixes ending in `*`);
        /// others in the baseline are kept.
        #[arg(long, num_args = 1..)]
        points: Vec<String>,
        /// The baseline file (default: the spec's `regression.baseline`).
        #[arg(long)]
        baseline: Option<PathBuf>,
    },
    /// The history of main: record each run of main, find change points
    /// over many commits (slow drifts no single pull request shows), draw
    /// the trends, export them to trackers. See docs/regression.md,
    /// "Watching main".
    History {
        #[command(subcommand)]
        command: HistoryCommand,
    },
    /// Render results as HTML, Markdown, CSV or JSON.
    Report {
        /// Results files or run directories.
        #[arg(required = true)]
        results: Vec<PathBuf>,
        #[arg(long, value_enum, default_value_t = ReportFormat::Html)]
        format: ReportFormat,
        /// Write here instead of stdout.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Combine the results of sharded runs (--partition or --agent) into
    /// one results file, as if one process had run them.
    Merge {
        /// Results files or run directories, one per shard.
        #[arg(required = true)]
        results: Vec<PathBuf>,
        /// Directory for the merged results.json.
        #[arg(long)]
        out: PathBuf,
        /// Summary format on stdout.
        #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
        format: OutputFormat,
        /// Accept an incomplete set: shards missing from the split (their
        /// points listed as pending) or shards that did not finish. Without
        /// it such a merge writes its file and exits 3.
        #[arg(long)]
        allow_partial: bool,
    },
    /// Print a JSON Schema: of specs (default), results or baseline files.
    Schema {
        #[arg(value_enum, default_value_t = SchemaKind::Spec)]
        kind: SchemaKind,
    },
    /// Serve the simulator of a spec's point on 127.0.0.1 until stopped
    /// (Ctrl-C or SIGTERM), for other tools or for load-sharding agents
    /// that must share one server. Prints its base and metrics URLs.
    SimServer {
        /// The spec file (TOML).
        spec: PathBuf,
        #[command(flatten)]
        select: Select,
        /// Port to listen on (default: one the OS picks).
        #[arg(long, default_value_t = 0)]
        port: u16,
    },
    /// List the simulator's GPUs and model presets.
    Catalog,
    /// Print a shell completion script, e.g.
    /// `infer-bench completions bash > ~/.local/share/bash-completion/completions/infer-bench`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), e.g. `infer-bench man > infer-bench.1`.
    Man,
    /// Check that the client measures truly on this machine, and what it
    /// costs, against a scripted server in another process: TTFT and ITL
    /// held to the script at paced load, CPU per SSE event (unpaced, paced,
    /// and against a minimal reqwest client), CPU while idle, and how many
    /// streams and requests/s hold.
    #[command(after_help = SELF_BENCH_HELP)]
    SelfBench {
        /// A shorter run (about 40 s) with smaller loads.
        #[arg(long)]
        quick: bool,
        /// Only these checks: unpaced, paced, floor, idle, streams, rate
        /// (comma-separated).
        #[arg(long, value_delimiter = ',', value_name = "CHECKS")]
        only: Vec<String>,
    },
    /// The floor client self-bench compares the client's CPU with: a
    /// one-thread reqwest + serde_json closed loop; prints one JSON line.
    #[command(hide = true)]
    SelfBenchFloor {
        #[arg(long)]
        url: String,
        #[arg(long)]
        streams: u32,
        #[arg(long, default_value_t = 0)]
        warmup: u32,
        #[arg(long)]
        requests: u32,
        /// `100`, or a range `50-150`.
        #[arg(long)]
        output_tokens: crate::selfbench::Lengths,
    },
    /// Serve the scripted test server on 127.0.0.1 until stdin closes
    /// (used by self-bench and tests).
    #[command(hide = true)]
    ScriptedServer {
        #[arg(long, default_value_t = 0)]
        ttft_ms: u64,
        #[arg(long, default_value_t = 0)]
        itl_ms: u64,
    },
    /// Sample this machine's GPUs for a while and print what NVML reports
    /// (a check for GPU machines; see scripts/gpu-check).
    #[command(hide = true)]
    TelemetryProbe(ProbeArgs),
}

/// The history folder's default.
const HISTORY_DIR: &str = infer_bench_history::store::DEFAULT_ROOT;

/// `history` commands.
#[derive(Debug, Subcommand)]
pub enum HistoryCommand {
    /// Add a run of main to the history: one small file,
    /// DIR/<spec>/<yyyy>/<commit>.json, with every gated metric's value
    /// and its runs' values (failed and INVALID points are left out).
    Record {
        /// A results file (results.json) or a run directory.
        results: PathBuf,
        /// The commit measured (default: git's HEAD here).
        #[arg(long)]
        commit: Option<String>,
        /// The commit's time, RFC 3339 (default: its committer time in git).
        #[arg(long)]
        time: Option<String>,
        /// The history folder.
        #[arg(long, default_value = HISTORY_DIR)]
        dir: PathBuf,
    },
    /// Start a history from the past: every commit of HEAD's history that
    /// changed a baseline file (default: baselines/*.json) becomes a record
    /// of the baseline as committed; each --results file one more.
    Import {
        /// Baseline files whose git log to read (default: baselines/*.json,
        /// unless only --results is given).
        baselines: Vec<PathBuf>,
        /// Results files or run directories to add (their start time is
        /// their time, `run-<time>` their commit).
        #[arg(long, num_args = 1..)]
        results: Vec<PathBuf>,
        #[arg(long, default_value = HISTORY_DIR)]
        dir: PathBuf,
    },
    /// Look for change points in every point x gated metric; exits 1 when
    /// a series' newest shift is a regression beyond its gate's noise
    /// band, 4 when a series is too short to judge.
    Check {
        /// Spec names (folders of the history; default: all).
        specs: Vec<String>,
        #[arg(long, default_value = HISTORY_DIR)]
        dir: PathBuf,
        #[arg(long, value_enum, default_value_t = HistoryCheckFormat::Table)]
        format: HistoryCheckFormat,
        /// Also write the Markdown (with sparklines) here, e.g. for
        /// $GITHUB_STEP_SUMMARY.
        #[arg(long)]
        markdown: Option<PathBuf>,
        /// Let series too short to judge pass.
        #[arg(long)]
        allow_unjudged: bool,
    },
    /// Write an offline HTML page of a spec's history: each series over
    /// commits, its noise band, change points, and a pull request's value.
    Report {
        /// The spec's name.
        spec: String,
        #[arg(long, default_value = HISTORY_DIR)]
        dir: PathBuf,
        /// The HTML file to write.
        #[arg(short, long)]
        output: PathBuf,
        /// A pull request's results, drawn as the last mark.
        #[arg(long)]
        pr: Option<PathBuf>,
        /// Link commits: an https:// prefix the commit is appended to, e.g.
        /// https://github.com/OWNER/REPO/commit/
        #[arg(long)]
        commit_url: Option<String>,
    },
    /// Export a spec's history for the trackers teams already run.
    Export {
        /// The spec's name.
        spec: String,
        #[arg(long, default_value = HISTORY_DIR)]
        dir: PathBuf,
        #[arg(long, value_enum)]
        format: HistoryExportFormat,
        /// Write here instead of stdout.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
}

/// `history check --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HistoryCheckFormat {
    Table,
    Markdown,
    Json,
}

/// `history export --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HistoryExportFormat {
    /// Bencher Metric Format JSON (`bencher run --adapter json`).
    Bmf,
    /// github-action-benchmark's custom JSON, the metrics where smaller is
    /// better (`tool: customSmallerIsBetter`): latencies, error rate.
    GithubSmallerIsBetter,
    /// github-action-benchmark's custom JSON, the metrics where bigger is
    /// better (`tool: customBiggerIsBetter`): throughput.
    GithubBiggerIsBetter,
    /// OpenMetrics text, for a Prometheus Pushgateway.
    Openmetrics,
    /// One row per commit, point and metric.
    Csv,
}

#[derive(Debug, Clone, clap::Args)]
pub struct ProbeArgs {
    /// How long to sample, seconds.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Sampling interval.
    #[arg(long, default_value = "100ms")]
    pub interval: crate::spec::Duration,
    /// Only these GPUs: indices or UUIDs, comma-separated (default: all).
    #[arg(long, value_delimiter = ',')]
    pub gpu_ids: Vec<String>,
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    pub format: OutputFormat,
}

/// Which points to run.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Select {
    /// Only these points: IDs, slugs, or slug prefixes ending in `*`
    /// (quoted in a shell: 'sim.llama-8b.*'). A bare name is exact.
    #[arg(long, num_args = 1..)]
    pub only: Vec<String>,
    /// This machine's share of the points: slice:K/N (round robin) or hash:K/N (by point).
    #[arg(long)]
    pub partition: Option<Partition>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// The spec file (TOML).
    pub spec: PathBuf,
    #[command(flatten)]
    pub select: Select,
    /// Directory for results.json, logs and per-request records
    /// (default: results/<spec name>-<UTC time>). A symbolic link, here or
    /// where a file of the run goes in it, is refused (exit 2): nothing is
    /// written through a link infer-bench did not make.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Judge against this baseline after the run (the pull-request command);
    /// without a value, the spec's `regression.baseline` (default
    /// baselines/<spec name>.json). With --format json, stdout holds the
    /// verdicts (the results are in --out).
    #[arg(long, num_args = 0..=1, value_name = "BASELINE")]
    pub baseline: Option<Option<PathBuf>>,
    /// Read the baseline from this git revision (e.g. origin/main) rather
    /// than the working tree, so a pull request cannot edit what it is
    /// judged against; the baseline's path comes from the spec as it is at
    /// that revision. Implies --baseline.
    #[arg(long, value_name = "REF")]
    pub baseline_ref: Option<String>,
    /// Let points that could not be judged (INSUFFICIENT, INVALID,
    /// INCOMPARABLE, drift, missing) pass; by default they fail (exit 4).
    #[arg(long)]
    pub allow_unjudged: bool,
    /// Let the spec start its servers (`launch`): runs the spec's command on
    /// this machine and fills the `{env.NAME}` placeholders its `allow_env`
    /// lists. Without it a spec that launches exits 2 before anything starts.
    /// Give it for specs you trust, never for a pull request's own spec.
    #[arg(long, env = "INFER_BENCH_ALLOW_LAUNCH", value_parser = clap::builder::BoolishValueParser::new())]
    pub allow_launch: bool,
    /// Also write every request to requests.jsonl, streamed to disk, with
    /// its response id and Unix send time to join with a server's logs;
    /// `--requests=events` adds each output event's time (`event_ms`).
    #[arg(
        long,
        value_enum,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "lines",
        value_name = "DETAIL"
    )]
    pub requests: Option<RequestDetail>,
    /// No progress on stderr (errors and warnings are still said); the
    /// summary or verdict still goes to stdout.
    #[arg(short, long, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Say more on stderr: per point, the dialect requests are written in
    /// (and how it was chosen), the connections opened before each run,
    /// and each run's window, counts and failures as it ends.
    #[arg(short, long)]
    pub verbose: bool,
    /// Run every simulator target in virtual time (as `[targets.NAME.sim]
    /// clock = "virtual"` does): a discrete-event simulation with an ideal
    /// client, no sleeping and no sockets, byte-identical statistics run to
    /// run, thousands of streams in seconds. Points on other targets run as
    /// usual. Generation requests only: a simulator point that sends
    /// embeddings, rerank or tensors is refused (exit 2).
    #[arg(long = "virtual")]
    pub virtual_time: bool,
    /// Run every simulator target in real time (a server on a socket,
    /// answered at wall-clock speed, measured by the real client), whatever
    /// its `clock` says: the HTTP path of a spec that is simulated in
    /// virtual time, such as the quickstart.
    #[arg(long = "real-time", conflicts_with = "virtual_time")]
    pub real_time: bool,
    /// Summary format on stdout.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    pub format: OutputFormat,
    /// Fail on INCONCLUSIVE and advisory INCOMPARABLE verdicts too (exit
    /// 4), and on pre-flight findings (exit 3).
    #[arg(long)]
    pub strict: bool,
    /// Load sharding: this process is agent K of N and sends arrivals
    /// K-1, K-1+N, K-1+2N, ... of each run (a closed loop: its share of the
    /// slots). Needs --start-at; `infer-bench merge` adds the agents' results.
    #[arg(long, value_name = "K/N", requires = "start_at")]
    pub agent: Option<String>,
    /// With --agent: the agreed UTC start of the first run, RFC 3339
    /// (e.g. 2026-12-03T10:00:00Z), the same for every agent.
    #[arg(long, value_name = "TIME", requires = "agent")]
    pub start_at: Option<String>,
    /// With --agent: the time given to each run before the next starts
    /// (default: warm-up + duration + 10s; required for points that end
    /// by request count).
    #[arg(long, value_name = "DURATION", requires = "agent")]
    pub slot: Option<crate::spec::Duration>,
    /// With --agent: how far in the past --start-at may be by this
    /// machine's clock before the run refuses to start.
    #[arg(long, value_name = "DURATION", default_value = "1s")]
    pub max_clock_skew: crate::spec::Duration,
    /// Fault injection for tests: the client spins this long before each
    /// send, so its dispatch lag shows a client that cannot keep up.
    #[arg(long, hide = true, value_name = "DURATION")]
    pub slow_client: Option<crate::spec::Duration>,
    /// Markdown verdict file (with --baseline), e.g. $GITHUB_STEP_SUMMARY;
    /// refused if it is a symbolic link (exit 2), as every output is.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// JUnit XML verdict file (with --baseline).
    #[arg(long)]
    pub junit: Option<PathBuf>,
}

/// What `run --requests` writes for each request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RequestDetail {
    /// One line per request with its times, counts and ids (`--requests`).
    Lines,
    /// The same, and every output event's time from the scheduled instant.
    Events,
}

#[derive(Debug, Clone, clap::Args)]
pub struct DiffArgs {
    /// A results file (results.json) or a run directory.
    pub results: PathBuf,
    /// The baseline file (default: the spec's `regression.baseline`).
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// Read the baseline from this git revision (e.g. origin/main); see
    /// `run --baseline-ref`.
    #[arg(long, value_name = "REF")]
    pub baseline_ref: Option<String>,
    /// Let points that could not be judged pass (by default, exit 4).
    #[arg(long)]
    pub allow_unjudged: bool,
    /// Verdict format on stdout.
    #[arg(long, value_enum, default_value_t = DiffFormat::Table)]
    pub format: DiffFormat,
    /// Also write the Markdown verdict here (e.g. $GITHUB_STEP_SUMMARY).
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// Also write JUnit XML here.
    #[arg(long)]
    pub junit: Option<PathBuf>,
    /// Exit 4 on INCONCLUSIVE and advisory INCOMPARABLE verdicts too.
    #[arg(long)]
    pub strict: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlanFormat {
    Table,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Table,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DiffFormat {
    Table,
    #[value(alias = "md")]
    Markdown,
    Json,
    Junit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    Html,
    #[value(alias = "markdown")]
    Md,
    Csv,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchemaKind {
    Spec,
    Results,
    Baseline,
}
