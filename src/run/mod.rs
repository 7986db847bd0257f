//! Running a plan: the load engine (one run of one point), the recorder
//! (statistics), the servers points run against (external, simulated,
//! launched), the workload material each point reads once before it
//! runs, and the orchestration of points, runs and results files.

pub mod engine;
pub mod environment;
pub mod launch;
pub mod point;
pub mod progress;
pub mod recorder;
pub mod servers;
pub mod workload;
