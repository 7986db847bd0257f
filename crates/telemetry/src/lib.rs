//! Telemetry beside the requests: the GPUs (through NVML, loaded at run
//! time so the binary runs where there is no driver) and the server's own
//! Prometheus metrics, sampled on the same monotonic clock as requests,
//! each on a thread of its own, during every point.
//!
//! `gpu` (inventory, `GpuSampler` and its sources), `dcgm` (GPUs read
//! from a dcgm-exporter's Prometheus text), `prom` (the text
//! format), `scrape` (what is kept of a scrape, per server family),
//! `periodic` (the sampling thread), `series` (statistics and counter
//! arithmetic), `session` (one point's telemetry, start to results) and
//! `probe` (a short standalone GPU check). `error` says why something
//! could not be read.

pub mod dcgm;
pub mod error;
pub mod gpu;
pub mod periodic;
pub mod probe;
pub mod prom;
pub mod scrape;
pub mod series;
pub mod session;

pub use error::{Error, Result};
