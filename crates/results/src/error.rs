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
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
