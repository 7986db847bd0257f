//! infer-bench: declarative, reproducible benchmarks of LLM inference
//! servers. Data flows one way: spec -> plan -> run -> results -> judge /
//! export, one crate per stage (docs/architecture.md draws the graph). This
//! crate is the command line and its wiring: `cli` defines the commands,
//! `app` runs them through the stages, `init` writes a starter spec, `gate` is `run --baseline`,
//! `history` keeps and reads the history of main, `inputs` reads the
//! results a command names, `git` reads a baseline at a revision (and the
//! commits `history` records), `consent` refuses side effects a spec was
//! not allowed, `paths` keeps a spec's output paths in the tree,
//! `selfbench` measures the client's own cost, `error` maps outcomes to
//! exit codes. The stages are re-exported under their old module names so
//! that tests and scripts have one path to each.

/// `eprintln!` through the terminal's last guard
/// ([`infer_bench_export::stderr_line`]): every line the command line says
/// on stderr, none of them able to carry an escape or a workflow command
/// from text it quotes.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::export::stderr_line(&format!($($arg)*))
    };
}

pub mod app;
pub mod cli;
pub mod consent;
pub mod error;
pub mod gate;
pub mod git;
pub mod history;
pub mod init;
pub mod inputs;
pub mod paths;
pub mod progress;
pub mod selfbench;

pub use infer_bench_engine::{cost, insight, merge, run};
pub use infer_bench_export as export;
pub use infer_bench_judge as judge;
pub use infer_bench_judge::analysis;
pub use infer_bench_protocol as protocol;
pub use infer_bench_results::{hist, metric};
pub use infer_bench_sim as sim;
pub use infer_bench_sim::http as httpserv;
pub use infer_bench_spec as spec;
pub use infer_bench_spec::{catalog, plan, results};
pub use infer_bench_telemetry as telemetry;
pub use infer_bench_workload as workload;
