//! Quality beside speed: the agreement measures and the Wilson interval,
//! as the results crate defines them (`results::agreement`), for the
//! judge's quality gates and task accuracy.

pub use infer_bench_results::agreement::*;
