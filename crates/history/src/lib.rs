//! The history of main: what `infer-bench history` records, keeps, reads
//! back as series, and finds change points in. `docs/regression.md`
//! ("Watching main") describes it for users.
//!
//! - [`changepoint`]: change-point detection over one series of levels
//!   (pure functions, no I/O), and in [`changepoint::study`] the synthetic
//!   histories that measure it (`docs/changepoint-study.md`).

pub mod changepoint;
