//! Why a results, baseline or requests file could not be read or written,
//! and why a histogram's text could not be decoded.

use std::path::PathBuf;

/// A file of this crate's formats could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file given to read (results, a baseline) could not be read: it is
    /// missing, a folder, or unreadable (a usage error, where a failed
    /// write is the system's).
    #[error("error: {}: cannot read it: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file could not be written.
    #[error("error: {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A path to write is, or passes through, a symbolic link that
    /// infer-bench did not make (see `files`).
    #[error(
        "error: {}: refusing to write through the symbolic link {} (to {})\n  hint: remove the link, or write somewhere else",
        path.display(),
        link.display(),
        crate::outside::terminal(&target.to_string_lossy())
    )]
    Symlink {
        path: PathBuf,
        link: PathBuf,
        target: PathBuf,
    },
    /// The file is not what it should be.
    #[error("error: {}: {problem}", path.display())]
    Format {
        path: PathBuf,
        #[source]
        problem: FormatError,
    },
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

/// Which of this crate's files a text was read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Results,
    Baseline,
}

impl FileKind {
    /// "results" or "baseline", as in "results version 4".
    pub fn name(self) -> &'static str {
        match self {
            FileKind::Results => "results",
            FileKind::Baseline => "baseline",
        }
    }

    /// "results file" or "baseline", as in "not an infer-bench baseline".
    pub fn noun(self) -> &'static str {
        match self {
            FileKind::Results => "results file",
            FileKind::Baseline => "baseline",
        }
    }
}

/// Why a text is not a valid results or baseline file.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error(
        "not JSON: {}{}",
        .0,
        if .0.is_eof() { " (the file ends early: was it cut short?)" } else { "" }
    )]
    NotJson(#[source] serde_json::Error),
    /// Its `format` is not this kind's.
    #[error("not an infer-bench {} (no \"format\": \"{format}\")", kind.noun())]
    NotOurs {
        kind: FileKind,
        format: &'static str,
    },
    #[error(
        "written by a newer infer-bench ({} version {version}; this one reads up to {reads})",
        kind.name()
    )]
    Newer {
        kind: FileKind,
        version: u64,
        reads: u32,
    },
    #[error("invalid {}: {source}", kind.name())]
    Invalid {
        kind: FileKind,
        #[source]
        source: FieldError,
    },
    /// Larger than the most a file of its kind may be: refused before it
    /// is read (see `MAX_RESULTS_BYTES`).
    #[error(
        "{bytes} bytes ({}), more than the {limit} bytes ({}) an infer-bench {} may have; split the run (--partition) and read its parts apart",
        mib(*bytes),
        mib(*limit),
        kind.noun()
    )]
    TooLarge {
        kind: FileKind,
        bytes: u64,
        limit: u64,
    },
    /// More points than a results file may hold (see
    /// `MAX_RESULTS_POINTS`): counted before the points are read.
    #[error(
        "{points} points, more than the {limit} a results file may hold (as many as a spec's plan may have)"
    )]
    TooManyPoints { points: u64, limit: u64 },
    /// A histogram of the file that could not be read within its bounds;
    /// `at` is where it is (`points[0].histograms.ttft`).
    #[error("{at}: {source}")]
    Histogram {
        at: String,
        #[source]
        source: HistError,
    },
    #[error("points {first} and {second} have the same slug \"{slug}\"; keep one")]
    DuplicateSlug {
        first: String,
        second: String,
        slug: String,
    },
}

/// A value of a file that does not fit its field: the field's path
/// (`points[2].merged.window_s`, `.` for the whole file) and why.
#[derive(Debug, thiserror::Error)]
#[error("{}{source}", if path == "." { String::new() } else { format!("{path}: ") })]
pub struct FieldError {
    pub path: String,
    #[source]
    pub source: serde_json::Error,
}

/// Why a histogram's text (base64 of its V2+deflate serialization) could
/// not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum HistError {
    #[error("invalid base64: {0}")]
    Base64(#[source] base64::DecodeError),
    #[error("invalid histogram: {0:?}")]
    Histogram(hdrhistogram::serialization::DeserializeError),
    /// The bytes end before the header or the payload it declares.
    #[error("invalid histogram: it ends early")]
    Short,
    /// Not a V2 or V2+deflate serialization.
    #[error("invalid histogram: unknown cookie {0:#010x} (not hdrhistogram V2)")]
    Cookie(u32),
    /// The zlib stream of a V2+deflate histogram is broken.
    #[error("invalid histogram: cannot inflate it: {0}")]
    Inflate(#[source] std::io::Error),
    /// A range and precision no histogram can have.
    #[error(
        "invalid histogram: lowest trackable value {low}, highest {high} and {digits} significant digits are not a histogram's range"
    )]
    Range { low: u64, high: u64, digits: u32 },
    /// A range and precision whose counts array is larger than a file's
    /// histogram may be (`hist::MAX_COUNTS`).
    #[error(
        "invalid histogram: its range and precision need {counts} counts; a histogram read from a file may have at most {limit}"
    )]
    TooManyCounts { counts: u64, limit: u64 },
    /// A payload longer than the counts array it encodes can need: refused
    /// before it is allocated.
    #[error(
        "invalid histogram: it declares a payload of {declared} bytes; its range and precision ({counts} counts) need at most {most}"
    )]
    PayloadTooLong {
        declared: u64,
        most: u64,
        counts: u64,
    },
}

/// A size in MiB (or GiB past 1 GiB), for messages.
fn mib(bytes: u64) -> String {
    const MIB: f64 = (1u64 << 20) as f64;
    let m = bytes as f64 / MIB;
    if m >= 1024.0 {
        format!("{:.1} GiB", m / 1024.0)
    } else {
        format!("{m:.1} MiB")
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
