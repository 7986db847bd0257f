//! Wires each command to the stages: spec -> plan -> run -> results ->
//! judge / export. Tests call `execute` in-process.

use crate::cli::{Command, PlanFormat, SchemaKind};
use crate::error::{EXIT_OK, Error, Outcome, Result};
use crate::export;
use crate::plan::Plan;
use crate::spec;

/// Runs one command.
pub fn execute(command: Command) -> Result<Outcome> {
    match command {
        Command::Validate { specs } => validate(&specs),
        Command::Plan {
            spec,
            format,
            select,
        } => {
            let spec = spec::load(&spec)?;
            let plan = Plan::build(&spec)?.select(select.partition, &select.only);
            let text = match format {
                PlanFormat::Table => export::plan::table(&spec, &plan),
                PlanFormat::Json => export::plan::json(&spec, &plan),
            };
            write_stdout(&text)?;
            Ok(Outcome(EXIT_OK))
        }
        Command::Schema { kind } => {
            let text = match kind {
                SchemaKind::Spec => spec::schema::spec_schema_text(),
                SchemaKind::Results => {
                    return Err(not_built("schema results", "the results format"));
                }
            };
            write_stdout(&text)?;
            Ok(Outcome(EXIT_OK))
        }
        Command::Catalog => {
            write_stdout(&export::catalog())?;
            Ok(Outcome(EXIT_OK))
        }
        Command::Run(_) => Err(not_built("run", "the load engine")),
        Command::Diff(_) => Err(not_built("diff", "the regression judge")),
        Command::Bless { .. } => Err(not_built("bless", "baselines")),
        Command::Report { .. } => Err(not_built("report", "reports")),
        Command::Merge { .. } => Err(not_built("merge", "scale-out")),
    }
}

fn not_built(cmd: &str, what: &str) -> Error {
    Error::Usage(format!(
        "`infer-bench {cmd}` is not built yet: {what} arrives in a later release"
    ))
}

fn write_stdout(text: &str) -> Result<()> {
    export::stdout(text).map_err(|e| Error::io("<stdout>", e))
}

/// Validates every spec, reporting all of them; fails if any failed.
fn validate(paths: &[std::path::PathBuf]) -> Result<Outcome> {
    let mut all = Vec::new();
    let mut ok = Vec::new();
    for path in paths {
        match spec::load(path).and_then(|s| Plan::build(&s).map(|p| (s, p))) {
            Ok((s, p)) => ok.push(format!(
                "{}: ok ({}, {} point{})",
                path.display(),
                s.name,
                p.points.len(),
                if p.points.len() == 1 { "" } else { "s" }
            )),
            Err(e) => all.extend(e.0),
        }
    }
    for line in &ok {
        eprintln!("{line}");
    }
    if all.is_empty() {
        Ok(Outcome(EXIT_OK))
    } else {
        Err(Error::Spec(spec::SpecErrors(all)))
    }
}
