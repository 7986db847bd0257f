//! The built-in simulator's model of an inference server: what a real GPU
//! serving a real model would take for each step, and how a vLLM-style
//! scheduler batches requests. Pure and deterministic: no I/O, no clock, no
//! randomness. `perf` prices one engine step (a roofline over the catalogue's
//! data-sheet figures); `engine` runs continuous batching in virtual time and
//! keeps the counters the simulator exports as Prometheus metrics. The
//! OpenAI-compatible HTTP server that drives the engine in real time lives
//! beside them; `network` prices a vision or encoder network's executions,
//! which the server serves over KServe v2; `answers` is what the model
//! answers when asked greedily, per precision; `structured` what it answers
//! a request for JSON under a schema or offering tools. Formulas, constants, sources and the checks against public
//! measurements: `docs/simulator.md`.

pub mod answers;
pub mod cluster;
pub mod engine;
pub mod error;
pub mod fit;
pub mod gpu;
pub mod http;
pub mod network;
pub mod perf;
pub mod profile;
#[cfg(test)]
mod properties;
pub mod request;
pub mod server;
pub mod structured;

pub use error::Error;
