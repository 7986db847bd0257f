//! How a request reaches a server and how its answer is timed: the HTTP
//! client and its connections (`client`, `connect`), the event-stream
//! parser (`sse`), what one request measured (`record`), the transport
//! that sends a request and reads its answer on the clock (`http`), and
//! the request kinds it carries, each an implementation of [`Protocol`]
//! (`openai`: chat and completions; `responses`: OpenAI's Responses API;
//! `messages`: Anthropic's Messages API; `embeddings`, `rerank`;
//! `kserve`: KServe v2 tensors; `generate`: Triton's generate extension),
//! chosen by [`for_workload`]; and `answer`, the greedy request for a
//! quality prompt and the reading of its answer and log-probabilities.
//!
//! Two traits are the seams. [`Protocol`] is what a request kind knows:
//! where it is sent, how its body is written and how its answer (an event
//! stream, or one JSON or binary body) is read into events and usage.
//! [`Backend`] is what the load engine drives: prepare a request before its
//! send time, send it and fill in its record, open connections ahead. The
//! engine sees only [`Backend`]; [`http::HttpBackend`] implements it for
//! any [`Protocol`]. This crate knows nothing of pacing, statistics or
//! results files.

pub mod answer;
pub mod client;
pub mod connect;
pub mod embeddings;
pub mod error;
pub mod generate;
pub mod http;
pub mod kinds;
pub mod kserve;
pub mod messages;
pub mod openai;
pub mod record;
pub mod rerank;
pub mod responses;
pub mod sse;
pub mod structured;

use std::future::Future;

pub use client::ClientOptions;
pub use error::Error;
pub use http::{HttpBackend, Reading};
pub use kinds::for_workload;

pub use record::{
    ErrorClass, Failure, OutputEvent, RequestRecord, ServerTiming, TokenSource, Usage,
};

use infer_bench_workload::Prompt;

/// How a request kind carries the target's API key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// `Authorization: Bearer KEY` (OpenAI and the servers that copy it).
    Bearer,
    /// `x-api-key: KEY` (Anthropic).
    ApiKeyHeader,
}

/// A request ready to send: built before its send time so that building it
/// never counts as the client's delay.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub body: bytes::Bytes,
    pub input_tokens: u32,
    pub output_tokens: u32,
    /// The part of a mixed workload the request is from.
    pub part: u32,
    /// The images and audio its body carries.
    pub media: infer_bench_workload::MediaSent,
    /// What it counts beside itself (embeddings' inputs, rerank's
    /// documents).
    pub units: Units,
}

/// What one request counts beside itself: an embeddings request its
/// inputs, a rerank request its documents and their tokens (as built).
/// All zero for chat and completions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Units {
    pub inputs: u32,
    pub documents: u32,
    pub document_tokens: u32,
}

/// The bodies of one request, in bytes: what the client wrote (the request
/// body) and what it read (the response body, decoded from HTTP's
/// chunked framing; an error body only as far as it was read). Zero where
/// no body crossed a socket (the simulator in virtual time).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Payload {
    pub sent: u64,
    pub received: u64,
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
    fn warm(&self, n: usize) -> impl Future<Output = Result<(), WarmError>> + Send;

    /// Reads a whole (non-streamed) answer that a driver without sockets
    /// (the simulator in virtual time) has in hand, complete at `at`, into
    /// `rec` as [`send`](Backend::send) would have read it off the wire:
    /// the same limits, reader and failure classes.
    fn read_answer(&self, body: &[u8], rec: &mut RequestRecord, at: std::time::Instant);
}

/// Connections that could not all be opened before a run: how many failed
/// and an example of why. Not fatal; the point's warnings say it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{failed} of {asked} connections could not be opened before the run (GET {path}: {example}); the run opened the rest as it went"
)]
pub struct WarmError {
    pub failed: usize,
    pub asked: usize,
    /// The path asked to open them.
    pub path: String,
    /// One failure's sentence.
    pub example: String,
}

/// What one streamed event, or one whole answer, said: the protocol's
/// reading of it, before the transport stamps it into a record.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct EventInfo {
    /// It carries generated output (text, reasoning, tool calls or token ids).
    pub output: bool,
    /// Its output was reasoning only (`reasoning_content` or `reasoning`,
    /// no answer text, tool call or token ids).
    pub reasoning: bool,
    pub text_bytes: u32,
    pub token_ids: Option<u32>,
    pub finished: bool,
    pub usage: Option<Usage>,
    /// The server reported an error in the answer (its message).
    pub error: Option<String>,
    /// The stream's end marker (`[DONE]`).
    pub done: bool,
    /// The server's own timings, where it reports them (llama.cpp).
    pub server_timing: Option<ServerTiming>,
}

/// An answer, or one event of it, that its protocol could not read: why,
/// as the detail of the request's `malformed` failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unreadable(pub String);

/// What a request kind knows: where it goes, what its body is, how its
/// answer reads. Implementations are pure (no I/O, no clock): the
/// transport ([`http::HttpBackend`]) sends, stamps arrivals and enforces
/// timeouts and bounds, and asks the protocol only to write and read bytes.
///
/// Object-safe, so one transport carries any kind chosen at run time. A
/// streaming kind answers with server-sent events, each read by
/// [`Protocol::read_event`]; a non-streaming one (a whole JSON or binary
/// body, such as an embedding or a tensor) by [`Protocol::read_body`].
pub trait Protocol: Send + Sync + 'static {
    /// A short name for messages ("chat", "completions").
    fn name(&self) -> &'static str;

    /// The path requests are POSTed to, relative to the target's base URL
    /// (no leading slash).
    fn path(&self) -> &str;

    /// How the target's API key is sent.
    fn auth(&self) -> Auth {
        Auth::Bearer
    }

    /// Headers every request of this kind carries (the target's own
    /// `headers` win over these).
    fn headers(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    /// The `Content-Type` of request bodies.
    fn content_type(&self) -> &'static str {
        "application/json"
    }

    /// The body of a prompt's request.
    fn body(&self, prompt: &Prompt) -> Vec<u8>;

    /// The body as the transport sends it: by default [`Protocol::body`];
    /// a kind whose bodies are built ahead hands out a shared one.
    fn body_bytes(&self, prompt: &Prompt) -> bytes::Bytes {
        bytes::Bytes::from(self.body(prompt))
    }

    /// Whether answers come as an event stream (`text/event-stream`).
    fn streams(&self) -> bool;

    /// Whether a stream's clean end (the body's last chunk) completes it.
    /// Most kinds mark their end (a finish reason, `[DONE]`) and a stream
    /// that closes without one was cut short; Triton's generate marks
    /// none, so its close is the end.
    fn stream_ends_at_close(&self) -> bool {
        false
    }

    /// Reads one event's data. `reply`, when given, collects the answer's
    /// text; `id` takes the response's id if it is still unset.
    fn read_event(
        &self,
        data: &[u8],
        reply: Option<&mut crate::structured::Reply>,
        id: Option<&mut Option<String>>,
    ) -> Result<EventInfo, Unreadable>;

    /// Reads a whole (non-streamed) answer; by default as one event.
    fn read_body(
        &self,
        body: &[u8],
        reply: Option<&mut crate::structured::Reply>,
        id: Option<&mut Option<String>>,
    ) -> Result<EventInfo, Unreadable> {
        self.read_event(body, reply, id)
    }

    /// The message of an error response's body (its first useful line).
    fn error_message(&self, body: &[u8]) -> String {
        openai::error_body_message(body)
    }

    /// The path a `GET` opens connections with before a run (any status
    /// will do; its body is read to the end).
    fn warm_path(&self) -> &str {
        "models"
    }

    /// The classes a request of this kind can fail with: the transport's,
    /// and any of the kind's own answers.
    fn failure_classes(&self) -> &'static [ErrorClass];

    /// What a prompt's request counts beside itself: embeddings its
    /// inputs, rerank its documents (with their tokens); nothing for a
    /// kind that counts neither.
    fn units(&self, prompt: &Prompt) -> Units {
        let _ = prompt;
        Units::default()
    }
}
