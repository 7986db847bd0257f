//! The tool's top-level error, and the one place it becomes an exit code
//! (the table of codes is `infer_bench_results::exit`).

use std::process::ExitCode;

pub use infer_bench_engine::error::{Error, Result};
pub use infer_bench_results::exit::{
    EXIT_FAILED, EXIT_INFRA, EXIT_INTERRUPTED, EXIT_OK, EXIT_UNJUDGED, EXIT_USAGE,
};

/// The exit code for an error that stopped a command.
pub fn exit_code(e: &Error) -> u8 {
    match e {
        Error::Spec(_) | Error::Usage(_) | Error::Format { .. } | Error::Workload(_) => EXIT_USAGE,
        Error::Io { .. } | Error::Infra(_) => EXIT_INFRA,
        Error::Interrupted(_) => EXIT_INTERRUPTED,
    }
}

/// The outcome of a command: its exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome(pub u8);

impl Outcome {
    /// The outcome of a command that stopped with `e`.
    pub fn of(e: &Error) -> Outcome {
        Outcome(exit_code(e))
    }
}

impl From<Outcome> for ExitCode {
    fn from(o: Outcome) -> ExitCode {
        ExitCode::from(o.0)
    }
}

#[cfg(test)]
mod tests {
    use infer_bench_results::exit::TABLE;

    /// The codes of the table under `heading` in a Markdown file.
    fn documented(file: &str, heading: &str) -> Vec<u8> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        let section = text
            .split_once(heading)
            .unwrap_or_else(|| panic!("{file} has no {heading}"))
            .1;
        section
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .filter_map(|l| l.split('|').nth(1)?.trim().parse().ok())
            .collect()
    }

    #[test]
    fn the_docs_list_the_exit_codes_of_the_table() {
        let codes: Vec<u8> = TABLE.iter().map(|(c, _)| *c).collect();
        assert_eq!(documented("README.md", "\n## Exit codes\n"), codes);
        assert_eq!(documented("docs/regression.md", "\n## Exit codes\n"), codes);
    }
}
