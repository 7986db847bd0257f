//! Test servers and helpers for infer-bench's own tests (a dev-dependency
//! only; nothing here is in the release binary): the scripted
//! OpenAI-compatible server whose timing is known and recorded, headless
//! Chromium ([`chromium`]), the lock
//! that keeps timing tests from running at the same time, a fake
//! dcgm-exporter serving scripted GPU readings, git in a scratch
//! repository, the processes in /proc, a hostile server that answers with
//! endless or malformed responses (or a cycle of error statuses), a server that resets
//! connections before answering, a relay that counts the connections a
//! client opens, a raw HTTP/1.1 client that keeps the bytes and frames as
//! they arrived ([`wire`]), and the plans, points, results and baselines
//! that tests of the judge and of its renderings start from ([`fixtures`]).
//!
//! It sits above every crate of the workspace and may use any of them;
//! product crates take it as a dev-dependency only, so `cargo tree -e
//! normal -p infer-bench` never shows it.

pub mod chromium;
pub mod dcgm;
pub mod error;
pub mod fixtures;
pub mod git;
pub mod hostile;
pub mod pictures;
pub mod procs;
pub mod proxy;
pub mod readers;
pub mod reset;
pub mod scripted;
pub mod timing;
pub mod wire;

/// The runtime a test drives the engine and its servers on: two workers,
/// as on the 2-core machines the suite runs on, timers and I/O enabled.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime for the test")
}
