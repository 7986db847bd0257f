//! Why GPUs or a server's metrics could not be read: the one error of this
//! crate. A failed sample or scrape during a point is recorded in the
//! results (its sentence, and a count), never fatal; only `telemetry.gpu =
//! "required"` makes an absent GPU stop a run ([`Error::Required`]).

use std::collections::BTreeMap;
use std::sync::Arc;

/// Why GPUs or a server's metrics could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// NVML could not be loaded (no driver on this machine).
    #[error("NVML is not available ({0})")]
    NvmlUnavailable(Arc<nvml_wrapper::error::NvmlError>),
    #[error("NVML is loaded but lists no GPU")]
    NvmlListsNoGpu,
    /// A target's `gpu_ids` names a GPU this machine does not have.
    #[error("gpu_ids names GPU \"{id}\", which this machine does not have (it has {have})")]
    UnknownGpu { id: String, have: GpuList },
    /// A source with no GPU, for the reason it was made with (a null
    /// source in tests).
    #[error("{0}")]
    NoGpu(String),

    /// A dcgm-exporter sampler was asked for where the target names none.
    #[error("the target has no gpu_metrics_url")]
    NoGpuMetricsUrl,
    #[error("{url} lists no GPU (no DCGM_FI_* series with a gpu or UUID label)")]
    ExporterListsNoGpu { url: String },
    /// A target's `gpu_ids` names a GPU its dcgm-exporter does not list
    /// (with the labels of `gpu_metrics_match`, where it has some).
    #[error(
        "gpu_ids names GPU \"{id}\", which {url} does not list{} (it lists {listed})",
        if *.with_labels { " with the labels of gpu_metrics_match" } else { "" }
    )]
    ExporterLacksGpu {
        url: String,
        id: String,
        with_labels: bool,
        listed: GpuList,
    },
    #[error(
        "no GPU of {url} carries {} (it lists {listed})",
        labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect::<Vec<_>>().join(", ")
    )]
    NoGpuMatches {
        url: String,
        labels: BTreeMap<String, String>,
        listed: GpuList,
    },
    /// A scrape that lists none of the GPUs the sampler was opened on.
    #[error("{url}: none of the GPUs read is listed")]
    GpusGone { url: String },

    /// A GET of a metrics URL failed.
    #[error("GET {url}: {problem}")]
    Fetch { url: String, problem: FetchError },
    /// A metrics text that is not the Prometheus text format (`url`, where
    /// the message is to name it).
    #[error(
        "{}the metrics text is malformed: {source}",
        url.as_ref().map(|u| format!("{u}: ")).unwrap_or_default()
    )]
    Malformed {
        url: Option<String>,
        #[source]
        source: ParseError,
    },
    /// The text of a virtual-time simulator's modelled GPUs is malformed.
    #[error("the modelled GPU text is malformed: {0}")]
    ModelledMalformed(#[source] ParseError),
    #[error("cannot start the scraper's runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("cannot read the CA certificate {path}: {source}")]
    CaCert {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The scraper's HTTP client could not be built (a header, key or CA
    /// certificate the HTTP stack refuses).
    #[error(transparent)]
    Client(#[from] infer_bench_protocol::Error),
    /// A failure a scripted metrics source plays back (tests).
    #[error("{0}")]
    Scripted(&'static str),

    /// `telemetry.gpu = "required"`, and a target has no GPU to measure.
    #[error(
        "GPU telemetry is required (telemetry.gpu = \"required\"), but {}\n  hint: {}",
        absence.why(target),
        absence.hint(target)
    )]
    Required { target: String, absence: Absence },
}

/// Why a target has no GPU to measure, for [`Error::Required`].
#[derive(Debug)]
pub enum Absence {
    /// The built-in simulator, whose GPUs are modelled.
    Simulated,
    /// Its dcgm-exporter at `url` gives none.
    Exporter { url: String, why: Box<Error> },
    /// Its `gpu_ids` names a GPU this machine does not have.
    NotHere(Box<Error>),
    /// This machine has none to sample.
    NoGpu(Box<Error>),
}

impl Absence {
    fn why(&self, t: &str) -> String {
        match self {
            Absence::Simulated => format!(
                "target `{t}` is the built-in simulator, whose GPUs are modelled, not measured"
            ),
            Absence::Exporter { url, why } => {
                format!("target `{t}` has no GPU to read at {url}: {why}")
            }
            Absence::NotHere(why) => format!("target `{t}` names a GPU that is not here: {why}"),
            Absence::NoGpu(why) => format!("target `{t}` has no GPU to sample: {why}"),
        }
    }

    fn hint(&self, t: &str) -> String {
        match self {
            Absence::Simulated => "`required` asks for measured GPUs, which need a real server on a real GPU; for simulated targets set telemetry.gpu = \"auto\" (the default, which records the modelled GPUs) or \"off\"".to_string(),
            Absence::Exporter { url, .. } => format!(
                "check that dcgm-exporter serves {url} (curl it) and that targets.{t}.gpu_ids and gpu_metrics_match name GPUs it lists, or set telemetry.gpu = \"auto\" to record the absence instead"
            ),
            Absence::NotHere(_) => {
                format!("fix targets.{t}.gpu_ids, or leave it out to sample every GPU")
            }
            Absence::NoGpu(_) => "run on a machine with an NVIDIA GPU and driver (NVML), or set telemetry.gpu = \"auto\" to record the absence instead".to_string(),
        }
    }
}

impl Error {
    /// A GET that found nobody answering yet (refused, timed out, a 5xx):
    /// what a restarting exporter does for a while, worth retrying.
    pub fn is_unreachable(&self) -> bool {
        match self {
            Error::Fetch { problem, .. } => match problem {
                FetchError::TimedOut | FetchError::Connect | FetchError::BodyBroke(_) => true,
                FetchError::Status(s) => s.is_server_error(),
                FetchError::Request(_) | FetchError::TooLarge | FetchError::NotUtf8 => false,
            },
            _ => false,
        }
    }
}

/// Why a GET of a metrics URL failed.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("timed out")]
    TimedOut,
    #[error("cannot connect")]
    Connect,
    #[error("{0}")]
    Request(reqwest::Error),
    #[error("HTTP {0}")]
    Status(reqwest::StatusCode),
    #[error("the body broke off ({0})")]
    BodyBroke(reqwest::Error),
    #[error("the metrics text is over 16 MiB")]
    TooLarge,
    #[error("the metrics text is not UTF-8")]
    NotUtf8,
}

/// The GPUs a source lists, as a message names them ("none", or
/// "0 (GPU-8f1c...), 1 (GPU-...)").
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GpuList(pub Vec<String>);

impl std::fmt::Display for GpuList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&self.0.join(", "))
        }
    }
}

/// Why a text is not a valid Prometheus exposition: the line (1-based)
/// and what is wrong on it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {problem}")]
pub struct ParseError {
    pub line: usize,
    pub problem: Syntax,
}

/// What is wrong on a line of a Prometheus exposition. `name` is the
/// metric's, `key` the label's; an excerpt is cut at 40 characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Syntax {
    #[error("# {keyword} names an invalid metric name \"{name}\"")]
    InvalidName { keyword: String, name: String },
    #[error("second # HELP line for {0}")]
    SecondHelp(String),
    #[error(
        "unknown metric type \"{ty}\" for {name} (counter, gauge, histogram, summary or untyped)"
    )]
    UnknownType { ty: String, name: String },
    #[error("second # TYPE line for {0}")]
    SecondType(String),
    #[error("# TYPE for {0} comes after its first sample")]
    TypeAfterSample(String),
    #[error("expected a metric name at the start of \"{excerpt}\"")]
    NoName { excerpt: String },
    #[error("expected a label name or '}}' in {name}")]
    LabelName { name: String },
    #[error("expected '=' after label {key} in {name}")]
    NoEquals { key: String, name: String },
    #[error("expected '\"' to open the value of label {key} in {name}")]
    NoQuote { key: String, name: String },
    #[error("the value of label {key} in {name} is not closed")]
    Unclosed { key: String, name: String },
    #[error(
        "invalid escape \\{} in label {key} of {name}",
        escaped.map(String::from).unwrap_or_default()
    )]
    BadEscape {
        escaped: Option<char>,
        key: String,
        name: String,
    },
    #[error("label {key} appears twice in {name}")]
    DuplicateLabel { key: String, name: String },
    #[error("expected ',' or '}}' after label {key} in {name}")]
    AfterLabel { key: String, name: String },
    #[error("expected a space before the value of {name}")]
    NoSpace { name: String },
    #[error("\"{value}\" is not a number (the value of {name})")]
    NotNumber { value: String, name: String },
    #[error("\"{timestamp}\" is not a timestamp in milliseconds (after {name})")]
    NotTimestamp { timestamp: String, name: String },
    #[error("unexpected \"{excerpt}\" after the sample of {name}")]
    Trailing { excerpt: String, name: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
