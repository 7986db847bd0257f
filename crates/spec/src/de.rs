//! Small serde helpers shared by the typed spec elements: the ones the
//! results vocabulary defines (`metric`), so spec and results parse and
//! print typed strings the same way.

pub use infer_bench_results::metric::{fmt_number, from_str_visitor};
