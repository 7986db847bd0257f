//! The judge: compares results against a baseline and decides, per point,
//! metric and statistic, whether performance REGRESSED, IMPROVED, stayed
//! UNCHANGED or cannot be told apart yet (INCONCLUSIVE). See
//! `design/REGRESSION.md` for the rule this implements.
//!
//! - [`stats`]: the statistics (Hodges-Lehmann shift, its distribution-free
//!   confidence interval, the noise band and the data-driven verdict). Pure
//!   functions, no I/O.

pub mod stats;
