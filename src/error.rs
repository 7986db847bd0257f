//! The tool's top-level error and its exit codes, documented in one place.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | passed: every point judged, nothing regressed, every SLO met |
//! | 1 | a confirmed regression or an SLO failure |
//! | 2 | the spec or the command line is wrong, or there is no baseline |
//! | 3 | infrastructure: target unreachable, server failed to start, no request succeeded, GPU required but absent |
//! | 4 | could not judge a point, or the spec's rules differ from the baseline's (`--strict`: INCONCLUSIVE too) |

use std::process::ExitCode;

pub use infer_bench_engine::error::{Error, Result};
pub use infer_bench_judge::exit::{EXIT_FAILED, EXIT_INFRA, EXIT_OK, EXIT_UNJUDGED, EXIT_USAGE};

/// The exit code for an error that stopped a command.
pub fn exit_code(e: &Error) -> u8 {
    match e {
        Error::Spec(_) | Error::Usage(_) | Error::Format { .. } | Error::Workload(_) => EXIT_USAGE,
        Error::Io { .. } | Error::Infra(_) => EXIT_INFRA,
        Error::Interrupted(_) => 130,
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
