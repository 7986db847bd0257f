//! The tool's top-level error and its exit codes, documented in one place.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | everything judged passed (INCONCLUSIVE / INCOMPARABLE are advisory unless `--strict`) |
//! | 1 | a confirmed regression or an SLO failure |
//! | 2 | the spec or the command line is wrong |
//! | 3 | infrastructure: target unreachable, server failed to start, GPU required but absent |
//! | 4 | with `--strict`: something could not be judged |

use std::path::PathBuf;
use std::process::ExitCode;

use crate::spec::SpecErrors;

pub const EXIT_OK: u8 = 0;
pub const EXIT_FAILED: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_INFRA: u8 = 3;
pub const EXIT_UNJUDGED: u8 = 4;

/// Everything that can stop a command.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Spec(#[from] SpecErrors),
    /// The command line asks for something impossible.
    #[error("error: {0}")]
    Usage(String),
    /// A file could not be read or written.
    #[error("error: {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A results or baseline file is not what it should be.
    #[error("error: {}: {message}", path.display())]
    Format { path: PathBuf, message: String },
    /// The world outside: a server, a GPU, the network.
    #[error("error: {0}")]
    Infra(String),
    /// A workload's file (tokenizer, dataset) is missing or malformed.
    #[error("error: {0}")]
    Workload(#[from] crate::workload::WorkloadError),
    /// The run was interrupted (Ctrl-C); finished points were kept.
    #[error("interrupted: {0}")]
    Interrupted(String),
}

impl Error {
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Spec(_) | Error::Usage(_) | Error::Format { .. } | Error::Workload(_) => {
                EXIT_USAGE
            }
            Error::Io { .. } | Error::Infra(_) => EXIT_INFRA,
            Error::Interrupted(_) => 130,
        }
    }

    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

/// The outcome of a command that completed: its exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome(pub u8);

impl From<Outcome> for ExitCode {
    fn from(o: Outcome) -> ExitCode {
        ExitCode::from(o.0)
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
