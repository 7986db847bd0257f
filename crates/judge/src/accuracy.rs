//! Task accuracy: answers scored against expected ones, as the results
//! crate defines the scorers (`results::accuracy`).

pub use infer_bench_results::accuracy::*;
