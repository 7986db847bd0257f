//! The `infer-bench` binary: parses the command line (and sets how the
//! terminal is drawn from it), runs the command
//! through the library, maps the outcome to an exit code. Everything else
//! is in the library. An error is printed through the run's redactor: a
//! connect error may quote a URL, a server's reply may quote the key;
//! and through the terminal's guard, as all it prints on stderr.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = infer_bench::cli::Cli::parse();
    infer_bench::app::set_look(&cli);
    match infer_bench::app::execute(cli.command) {
        Ok(outcome) => outcome.into(),
        Err(e) => {
            infer_bench::export::stderr_line(
                &infer_bench_results::redact::global().text(&e.to_string()),
            );
            infer_bench::error::Outcome::of(&e).into()
        }
    }
}
