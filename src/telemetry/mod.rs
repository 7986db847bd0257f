//! Telemetry beside the requests: the GPUs (through NVML, loaded at run
//! time so the binary runs where there is no driver) and the server's own
//! Prometheus metrics, sampled on the same monotonic clock as requests.
//!
//! `gpu` (inventory), `prom` (the text format), `scrape` (what is kept of
//! a scrape, per server family) and `series` (statistics and counter
//! arithmetic).

pub mod gpu;
pub mod prom;
pub mod scrape;
pub mod series;
