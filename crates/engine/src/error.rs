//! Why a command stopped: the engine's error, which the CLI maps to an
//! exit code (the table is in the `infer-bench` crate's `error` module).

use std::path::PathBuf;

use infer_bench_spec::SpecErrors;

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
    Workload(#[from] infer_bench_workload::WorkloadError),
    /// The run was interrupted (Ctrl-C); finished points were kept.
    #[error("interrupted: {0}")]
    Interrupted(String),
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

impl From<infer_bench_results::Error> for Error {
    fn from(e: infer_bench_results::Error) -> Error {
        match e {
            infer_bench_results::Error::Io { path, source } => Error::Io { path, source },
            infer_bench_results::Error::Format { path, problem } => Error::Format {
                path,
                message: problem.to_string(),
            },
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
