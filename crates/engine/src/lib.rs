//! The load engine: it turns a plan into results. It paces and records
//! requests and runs every point of a plan (`run`) against the servers it
//! names (external, simulated in this process or in virtual time,
//! launched), driving them through the protocol crate's `Backend` and
//! sampling them through the telemetry crate; it prices what ran (`cost`),
//! reads a run's timeline for hints (`insight`) and adds agents' and
//! shards' records with the recorder's own code (`merge`). It never judges
//! results against a baseline and never renders them, and it prints
//! nothing: what a person should see goes through `run::Observer`.

pub mod cost;
pub mod error;
pub mod insight;
pub mod merge;
pub mod run;

pub use error::{Error, Result};
