//! Why a workload's files cannot be used: the one error of this crate
//! (which file, where in it, what, and what to do about it), and the
//! typed reasons a tokenizer is refused.

use std::path::Path;

/// A problem with a workload's files: which file, where in it, what, and
/// what to do about it. Shown as `path[:line[:col]]: message`, then the
/// hint on a line of its own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}{}: {message}{}", location(*line, *col), hint.as_ref().map(|h| format!("\n  hint: {h}")).unwrap_or_default())]
pub struct WorkloadError {
    pub path: String,
    pub line: Option<usize>,
    pub col: Option<usize>,
    pub message: String,
    pub hint: Option<String>,
}

/// `:line` or `:line:col`, or nothing.
fn location(line: Option<usize>, col: Option<usize>) -> String {
    match (line, col) {
        (Some(l), Some(c)) => format!(":{l}:{c}"),
        (Some(l), None) => format!(":{l}"),
        (None, _) => String::new(),
    }
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

/// Why the bytes of a `tokenizer.json` give no tokenizer.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    /// The `tokenizers` crate cannot read it (its message is shown without
    /// any long quote of the file).
    #[error(
        "not a tokenizer.json: {}",
        infer_bench_spec::files::sanitize_message(&.0.to_string())
    )]
    NotTokenizer(tokenizers::Error),
    #[error("cannot turn truncation off: {0}")]
    Truncation(tokenizers::Error),
}
