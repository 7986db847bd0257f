//! The history of main: what `infer-bench history` records, keeps, reads
//! back as series, and finds change points in. `docs/regression.md`
//! ("Watching main") describes it for users. Data flows one way: results
//! or a committed baseline -> [`record::Record`] -> [`store::Store`] ->
//! [`series::Series`] -> [`check::Report`] (and the exporters).
//!
//! - [`record`]: one commit's record and its file format.
//! - [`store`]: the folder of records (`bench-history/<spec>/<yyyy>/<commit>.json`).
//! - [`series`]: records read per point and metric, cut where they stop
//!   being comparable.
//! - [`changepoint`]: change-point detection over one series of levels
//!   (pure functions, no I/O), and in [`changepoint::study`] the synthetic
//!   histories that measure it (`docs/changepoint-study.md`).
//! - [`check`]: the verdict per series (`history check`).
//! - [`reference`]: main's recent level per point and gate, for the
//!   pull-request gate's `against = "history"`.

pub mod changepoint;
pub mod check;
pub mod record;
pub mod reference;
pub mod series;
pub mod store;
