//! Backends: how a prepared request reaches a server and how its response is
//! timed. `openai` speaks the OpenAI-compatible HTTP API (every target kind
//! ends up there: the simulator is an in-process server of the same API);
//! `sse` is its incremental stream parser; `connect` times the connects
//! each request waited for; `record` holds what one request measured. The
//! `Backend` trait is the seam the load engine drives, and `fake` is its
//! deterministic in-memory stand-in for engine tests (compiled for tests
//! only).

pub mod connect;
#[cfg(test)]
pub mod fake;
pub mod openai;
pub mod record;
pub mod sse;

use std::future::Future;

pub use record::{ErrorClass, Failure, RequestRecord, TokenSource, Usage};

use infer_bench_workload::Prompt;

/// A request ready to send: built before its send time so that building it
/// never counts as the client's delay.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub body: bytes::Bytes,
    pub input_tokens: u32,
    pub output_tokens: u32,
    /// The part of a mixed workload the request is from.
    pub part: u32,
}

/// Sends requests and times their responses.
pub trait Backend: Send + Sync + 'static {
    /// Builds the request for a prompt.
    fn prepare(&self, prompt: &Prompt) -> Prepared;

    /// Sends it and fills in `rec`: the send and arrival instants, token
    /// counts, and the failure class if it failed. Never panics, never
    /// returns early without a verdict on the request.
    fn send(&self, req: Prepared, rec: RequestRecord)
    -> impl Future<Output = RequestRecord> + Send;

    /// Opens up to `n` keep-alive connections before a run's clock starts,
    /// so that no measured request pays for a connect, and leaves them in
    /// the pool. Bounded by the connect timeout; a failure is not fatal
    /// (the run opens connections as it goes) and comes back as one
    /// sentence for the point's warnings.
    fn warm(&self, n: usize) -> impl Future<Output = Result<(), String>> + Send;
}
