//! The server's own account of a point's requests, beside the client's:
//! Triton's per-model statistics (`/v2/models/{model}/stats`), read before
//! and after every run, their difference summed over the runs. It splits
//! a request's time into what the server spent queueing and computing and
//! the rest of what the client measured (the network, HTTP and the
//! tensors' serialization on both sides): the question "is it the GPU or
//! the waiting?".

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Means per request (milliseconds) and counts over a point's runs, as
/// the server counted them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ServerStages {
    /// Where the figures come from, e.g. "triton /v2/models/resnet/stats".
    pub source: String,
    /// Requests the server answered successfully, and failed.
    pub requests: u64,
    pub failures: u64,
    /// Items it inferred (a request of batch 8 counts 8).
    pub inferences: u64,
    /// Times it executed the model: fewer than requests when dynamic
    /// batching merged them.
    pub executions: u64,
    /// Mean time from the request's arrival to its answer, in the server.
    pub request_ms: f64,
    /// Of it: waiting in the scheduler's queue.
    pub queue_ms: f64,
    /// Copying inputs in, running the model, copying outputs out.
    pub compute_input_ms: f64,
    pub compute_infer_ms: f64,
    pub compute_output_ms: f64,
    /// The client's mean latency over the requests the server counted
    /// (its successful measured requests and warm-ups), less `request_ms`
    /// (the server's mean over the same): the way in and out. Absent when
    /// the counts differ too much to compare (another client on the
    /// model). Earlier results took the client's mean over the measured
    /// requests alone, which a slow warm-up set below zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outside_ms: Option<f64>,
}

impl ServerStages {
    /// Queue and the three compute stages.
    pub fn compute_ms(&self) -> f64 {
        self.compute_input_ms + self.compute_infer_ms + self.compute_output_ms
    }
}
