//! The `infer-bench` binary: parses the command line, runs the command
//! through the library, maps the outcome to an exit code. Everything else
//! is in the library.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = infer_bench::cli::Cli::parse();
    match infer_bench::app::execute(cli.command) {
        Ok(outcome) => outcome.into(),
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(infer_bench::error::exit_code(&e))
        }
    }
}
