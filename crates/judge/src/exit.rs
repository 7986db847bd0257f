//! The process exit codes a verdict maps to. The `infer-bench` crate's
//! `error` module documents the table; the judge needs the codes because a
//! verdict report records the exit code it stands for.

pub const EXIT_OK: u8 = 0;
pub const EXIT_FAILED: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_INFRA: u8 = 3;
pub const EXIT_UNJUDGED: u8 = 4;
