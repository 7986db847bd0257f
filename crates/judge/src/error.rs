//! Why the judge cannot do what it was asked: the one error of this crate.
//! Points it cannot judge are not errors: they are verdicts, with the
//! reason (`compare`).

pub use crate::baseline::BlessError;

/// Why a comparison or a bless cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The rules the baseline pins cannot be read (a hand-edited file).
    #[error("the baseline's `rules` cannot be read: {0}")]
    UnreadableRules(#[source] serde_json::Error),
    /// `bless` refused the results.
    #[error(transparent)]
    Bless(#[from] BlessError),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
