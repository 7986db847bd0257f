//! The judge: compares results against a baseline and decides, per point,
//! metric and statistic, whether performance REGRESSED, IMPROVED, stayed
//! UNCHANGED, cannot be told apart yet (INCONCLUSIVE), may not be compared
//! (INCOMPARABLE) or lacks the data (INSUFFICIENT). `docs/regression.md`
//! describes the rule for users, and its "Design notes" how it differs
//! from the proposal it was built from.
//!
//! - [`stats`]: the statistics (Hodges-Lehmann shift, its distribution-free
//!   confidence interval, the noise band and the data-driven verdict). Pure
//!   functions, no I/O.
//! - [`baseline`]: the committed baseline file (`bless` writes it).
//! - [`fingerprint`]: a point's environment fingerprint and which of its
//!   keys must match.
//! - [`drift`]: the text diff shown when a point's configuration changed.
//! - [`rules`]: the judging rules a baseline pins, how a spec's differ, and
//!   the label of a gate.
//! - [`compare`]: the decisions, as a plain-data [`compare::Report`] that
//!   the exporters render.
//! - [`error`]: why a comparison or a bless cannot be made.
//! - [`capacity`]: the capacity a search found, against the baseline's.
//! - [`power`]: the power study of the gate (how often a real slowdown is
//!   REGRESSED, and an unchanged server too); the `power` example prints it.
//! - [`quality`]: how a candidate's greedy answers agree with a
//!   reference's (exact match, first difference, token agreement, KL of
//!   the next-token distributions) and the Wilson interval, as the results
//!   crate measures them.
//! - [`quality_gate`]: a point's quality figures judged against the
//!   baseline's, over the prompts.
//! - [`accuracy`]: task accuracy: answers scored against expected ones.
//! - [`analysis`]: the reading of a sweep for reports (capacity at SLO,
//!   knee, Pareto front, best configuration); it judges against no
//!   baseline.
//!
//! It works on results and baselines already read (plain data), never on
//! a live run, and does no I/O of its own.

pub mod accuracy;
pub mod analysis;
pub mod baseline;
pub mod capacity;
pub mod compare;
pub mod drift;
pub mod error;
pub mod fingerprint;
pub mod power;
pub mod quality;
pub mod quality_gate;
pub mod rules;
pub mod stats;

pub use error::{Error, Result};
pub(crate) use infer_bench_results::sorted_keys;
