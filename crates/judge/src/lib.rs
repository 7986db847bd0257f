//! The judge: compares results against a baseline and decides, per point,
//! metric and statistic, whether performance REGRESSED, IMPROVED, stayed
//! UNCHANGED, cannot be told apart yet (INCONCLUSIVE), may not be compared
//! (INCOMPARABLE) or lacks the data (INSUFFICIENT). `docs/regression.md`
//! describes the rule for users; `design/REGRESSION.md` is where it came
//! from.
//!
//! - [`stats`]: the statistics (Hodges-Lehmann shift, its distribution-free
//!   confidence interval, the noise band and the data-driven verdict). Pure
//!   functions, no I/O.
//! - [`baseline`]: the committed baseline file (`bless` writes it).
//! - [`fingerprint`]: a point's environment fingerprint and which of its
//!   keys must match.
//! - [`drift`]: the text diff shown when a point's configuration changed.
//! - [`rules`]: the judging rules a baseline pins, and how a spec's differ.
//! - [`compare`]: the decisions, as a plain-data [`compare::Report`] that
//!   the exporters render.
//! - [`power`]: the power study of the gate (how often a real slowdown is
//!   REGRESSED, and an unchanged server too); the `power` example prints it.

pub mod analysis;
pub mod baseline;
pub mod capacity;
pub mod compare;
pub mod drift;
pub mod exit;
pub mod fingerprint;
pub mod power;
pub mod rules;
pub mod stats;

pub(crate) use infer_bench_results::sorted_keys;
