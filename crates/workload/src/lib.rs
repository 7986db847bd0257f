//! Workload generation: everything about *what* is sent and *when*, derived
//! deterministically from the spec's seed. Length sampling, prompt
//! synthesis (exact with a tokenizer), datasets and arrival schedules live
//! here. Files (a tokenizer, a dataset) are read once per point into a
//! [`Material`]; after that nothing does I/O, so the same seed gives the
//! same requests at the same offsets on every machine.

pub mod arrival;
pub mod dataset;
pub mod lengths;
pub mod message;
pub mod prompt;
pub mod tokenizer;
pub mod trace;

use std::path::Path;

pub use arrival::{Arrivals, Due};
pub use infer_bench_spec::seed;
pub use message::{Message, Role};
pub use prompt::{Material, Prompt, PromptGen};
pub use tokenizer::TokenCounter;

/// A problem with a workload's files: which file, where in it, what, and
/// what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadError {
    pub path: String,
    pub line: Option<usize>,
    pub col: Option<usize>,
    pub message: String,
    pub hint: Option<String>,
}

impl WorkloadError {
    /// About a whole file.
    pub fn file(path: &Path, message: impl Into<String>) -> WorkloadError {
        WorkloadError {
            path: path.display().to_string(),
            line: None,
            col: None,
            message: message.into(),
            hint: None,
        }
    }
    /// About one line of a file (1-based).
    pub fn line(path: &Path, line: usize, message: impl Into<String>) -> WorkloadError {
        WorkloadError {
            line: Some(line),
            ..WorkloadError::file(path, message)
        }
    }
    pub fn at_col(mut self, col: usize) -> WorkloadError {
        self.col = Some(col);
        self
    }
    pub fn with_hint(mut self, hint: impl Into<String>) -> WorkloadError {
        self.hint = Some(hint.into());
        self
    }
}

impl std::fmt::Display for WorkloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.path)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
            if let Some(c) = self.col {
                write!(f, ":{c}")?;
            }
        }
        write!(f, ": {}", self.message)?;
        if let Some(h) = &self.hint {
            write!(f, "\n  hint: {h}")?;
        }
        Ok(())
    }
}

impl std::error::Error for WorkloadError {}
