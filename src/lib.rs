//! infer-bench: declarative, reproducible benchmarks of LLM inference
//! servers. Data flows one way: spec -> plan -> run -> results -> judge /
//! export. `main.rs` only parses arguments and calls `cli::main`.

pub mod analysis;
pub mod app;
pub mod backend;
pub mod catalog;
pub mod cli;
pub mod cost;
pub mod error;
pub mod export;
pub mod gate;
pub mod hist;
pub mod httpserv;
pub mod insight;
pub mod judge;
pub mod merge;
pub mod metric;
pub mod plan;
pub mod results;
pub mod run;
pub mod scripted;
pub mod selfbench;
pub mod sim;
pub mod spec;
pub mod telemetry;
pub mod workload;
