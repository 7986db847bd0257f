//! Telemetry beside the requests: the GPUs (through NVML, loaded at run
//! time so the binary runs where there is no driver) and the server's own
//! Prometheus metrics, sampled on the same monotonic clock as requests.

pub mod gpu;
