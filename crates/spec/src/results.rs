//! The results format (`infer_bench_results`) with this spec language's
//! point configuration in it: what `run` writes and `diff`, `bless`,
//! `report` and `merge` read. Every other type of the format is used from
//! `infer_bench_results` itself, so that each has one path.

use crate::plan::PointConfig;

/// A results file whose points carry their compiled configuration.
pub type Results = infer_bench_results::Results<PointConfig>;
/// One point of a results file, with its compiled configuration.
pub type PointResult = infer_bench_results::PointResult<PointConfig>;

/// The committed results schema (`schemas/results.schema.json`).
pub fn schema_text() -> String {
    infer_bench_results::schema_text::<PointConfig>()
}
