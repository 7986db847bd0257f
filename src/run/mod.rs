//! Running a plan: the load engine, the recorder, and (in `point`) the
//! orchestration of points, runs, servers and results files.

pub mod engine;
pub mod recorder;
