//! The load engine and everything that touches the system under test
//! while a plan runs: the backends that speak to servers (`backend`), the
//! engine that paces and records requests and runs points (`run`), GPU and
//! server telemetry (`telemetry`), cost (`cost`), the reading of a run's
//! timeline (`insight`), and `merge`, which adds agents' and shards'
//! records with the recorder's own code. It turns a plan into results; it
//! never judges them against a baseline or renders them.

pub mod backend;
pub mod cost;
pub mod error;
pub mod insight;
pub mod merge;
pub mod run;
pub mod telemetry;

pub use error::{Error, Result};
