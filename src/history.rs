//! `history`: the commands that keep and read the history of main
//! (`record`, `import`, `check`, `report`, `export`). `app` dispatches here;
//! the format, store, series and verdicts are `infer_bench_history`, the
//! outputs `export::history`.

use std::path::{Path, PathBuf};

use crate::cli::{HistoryCheckFormat, HistoryCommand, HistoryExportFormat};
use crate::error::{EXIT_OK, Error, Outcome, Result, Usage};
use crate::export;
use crate::judge::baseline::{Baseline, Bless, refusal};
use crate::results::Results;
use crate::spec::{self, Regression};
use infer_bench_history::check::{self, Settings};
use infer_bench_history::record::{Record, RecordError, Source};
use infer_bench_history::series::series;
use infer_bench_history::store::{Loaded, Store, Written};

/// Runs one `history` command.
pub fn execute(command: HistoryCommand) -> Result<Outcome> {
    match command {
        HistoryCommand::Record {
            results,
            commit,
            time,
            dir,
        } => record(&results, commit.as_deref(), time.as_deref(), &dir),
        HistoryCommand::Import {
            baselines,
            results,
            dir,
        } => import(&baselines, &results, &dir),
        HistoryCommand::Check {
            specs,
            dir,
            format,
            markdown,
            allow_unjudged,
        } => check_cmd(&specs, &dir, format, markdown.as_deref(), allow_unjudged),
        HistoryCommand::Report {
            spec,
            dir,
            output,
            pr,
            commit_url,
        } => report(&spec, &dir, &output, pr.as_deref(), commit_url.as_deref()),
        HistoryCommand::Export {
            spec,
            dir,
            format,
            output,
        } => export_cmd(&spec, &dir, format, output.as_deref()),
    }
}

/// The `[regression]` table of the spec a results file was run from.
fn regression_of(results: &Results) -> Result<Regression> {
    spec::compile_regression(&results.spec.path, &results.spec.source).map_err(Error::Spec)
}

/// The record of a results file: its recordable points blessed into an
/// empty baseline (the same points `bless` takes), at `commit` and `time`.
fn record_of(results: &Results, commit: &str, time: &str, source: Source) -> Result<Record> {
    let regression = regression_of(results)?;
    let mut usable = results.clone();
    let mut refused = Vec::new();
    usable.points.retain(|p| match refusal(p) {
        None => true,
        Some(why) => {
            refused.push(format!("{}: {why}", p.id));
            false
        }
    });
    usable.searches.clear();
    for r in &refused {
        say!("note: not recorded: {r}");
    }
    let mut baseline = Baseline::new(&results.spec.name);
    baseline
        .bless(&usable, &[], time)
        .map_err(|_| RecordError::NothingToRecord(refused.join("; ")))
        .map_err(history_error)?;
    Record::from_baseline(&baseline, &regression, commit, time, source).map_err(history_error)
}

fn history_error(e: impl Into<infer_bench_history::store::StoreError>) -> Error {
    Error::History(e.into())
}

/// `history record RESULTS [--commit SHA] [--time T] [--dir DIR]`.
fn record(results: &Path, commit: Option<&str>, time: Option<&str>, dir: &Path) -> Result<Outcome> {
    let (results, _) = crate::inputs::read_results(results)?;
    let found = crate::git::commit(commit.unwrap_or("HEAD"), Path::new("."));
    let (commit, time, depth) = match (commit, time, found) {
        (c, t, Ok(head)) => (
            c.map_or(head.sha, str::to_string),
            t.map_or(head.time, str::to_string),
            head.depth,
        ),
        // Named on the command line, and not a commit git knows here.
        (Some(c), Some(t), Err(_)) => (c.to_string(), t.to_string(), None),
        (_, _, Err(e)) => return Err(e.into()),
    };
    let mut record = record_of(&results, &commit, &time, Source::Run)?;
    record.depth = depth;
    let written = Store::new(dir).write(&record).map_err(history_error)?;
    say!("{}", written_line(&written, &record));
    Ok(Outcome(EXIT_OK))
}

fn written_line(w: &Written, r: &Record) -> String {
    let (what, path) = match w {
        Written::New(p) => ("recorded", p),
        Written::Replaced(p) => ("recorded (replacing an earlier record of this commit)", p),
        Written::Unchanged(p) => ("already recorded", p),
    };
    format!(
        "{what}: {} point(s) of {} at {} -> {}",
        r.points.len(),
        r.spec,
        r.commit.chars().take(12).collect::<String>(),
        path.display()
    )
}

/// `history import [BASELINE...] [--results RESULTS...]`: every commit of
/// HEAD's history that changed each baseline file becomes a record (the
/// baseline as committed, judged by the rules it pins), and each results
/// file one more (its start time as the time, `run-<time>` as its commit).
fn import(baselines: &[PathBuf], results: &[PathBuf], dir: &Path) -> Result<Outcome> {
    let store = Store::new(dir);
    let baselines: Vec<PathBuf> = if baselines.is_empty() && results.is_empty() {
        committed_baselines()?
    } else {
        baselines.to_vec()
    };
    let mut count = 0usize;
    for path in &baselines {
        let commits = crate::git::changes_of(path)?;
        if commits.is_empty() {
            say!("note: {} has no commit in HEAD's history", path.display());
        }
        for c in commits {
            let text = match crate::git::show(&c.sha, path) {
                Ok(t) => t,
                // Deleted in that commit: nothing to record.
                Err(crate::git::GitError::Missing(_)) => continue,
                Err(e) => return Err(e.into()),
            };
            let shown = format!("{}:{}", &c.sha[..c.sha.len().min(12)], path.display());
            let baseline = match Baseline::parse(&text) {
                Ok(b) => b,
                Err(problem) => {
                    say!("note: {shown} is not a baseline this version reads ({problem}); skipped");
                    continue;
                }
            };
            let Some(regression) = pinned_rules(&baseline, path, &c.sha) else {
                say!(
                    "note: {shown} pins no [regression] rules and its spec cannot be read; skipped"
                );
                continue;
            };
            let mut record =
                Record::from_baseline(&baseline, &regression, &c.sha, &c.time, Source::Baseline)
                    .map_err(history_error)?;
            record.depth = c.depth;
            if record.points.is_empty() {
                continue;
            }
            let written = store.write(&record).map_err(history_error)?;
            say!("{}", written_line(&written, &record));
            count += 1;
        }
    }
    for file in results {
        let (r, _) = crate::inputs::read_results(file)?;
        let secs = infer_bench_history::record::parse_time(&r.started_at).map_err(history_error)?;
        let time = infer_bench_history::record::format_time(secs);
        let commit = format!("run-{}", time.replace([':', '-'], "").trim_end_matches('Z'));
        let record = record_of(&r, &commit, &time, Source::Results)?;
        let written = store.write(&record).map_err(history_error)?;
        say!("{}", written_line(&written, &record));
        count += 1;
    }
    say!("imported {count} record(s) into {}", dir.display());
    Ok(Outcome(EXIT_OK))
}

/// `baselines/*.json`, in name order.
fn committed_baselines() -> Result<Vec<PathBuf>> {
    let dir = Path::new("baselines");
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    out.sort();
    Ok(out)
}

/// The rules a committed baseline pins, or (an old baseline) those of the
/// spec as it was at that commit, found by the spec's name in `specs/`.
fn pinned_rules(baseline: &Baseline, path: &Path, sha: &str) -> Option<Regression> {
    if let Some(v) = &baseline.rules {
        return serde_json::from_value(v.clone()).ok();
    }
    let spec_path = path
        .parent()?
        .parent()
        .unwrap_or(Path::new("."))
        .join("specs")
        .join(format!("{}.toml", baseline.spec));
    let text = crate::git::show(sha, &spec_path).ok()?;
    spec::compile_regression(&spec_path.display().to_string(), &text).ok()
}

/// The specs a command reads: those named, or every one in the store.
fn specs_of(store: &Store, named: &[String]) -> Result<Vec<String>> {
    if !named.is_empty() {
        return Ok(named.to_vec());
    }
    let all = store.specs().map_err(history_error)?;
    if all.is_empty() {
        return Err(Usage::NoHistory {
            dir: store.root.clone(),
        }
        .into());
    }
    Ok(all)
}

/// A spec's records, with a note for each file passed over.
fn load(store: &Store, spec: &str) -> Result<Loaded> {
    let loaded = store.load(spec).map_err(history_error)?;
    for s in &loaded.skipped {
        say!("note: {}: skipped: {}", s.path.display(), s.why);
    }
    Ok(loaded)
}

/// `history check [SPEC...]`.
fn check_cmd(
    specs: &[String],
    dir: &Path,
    format: HistoryCheckFormat,
    markdown: Option<&Path>,
    allow_unjudged: bool,
) -> Result<Outcome> {
    let store = Store::new(dir);
    let settings = Settings {
        allow_unjudged,
        ..Settings::default()
    };
    let mut exit = EXIT_OK;
    let mut md = String::new();
    for name in specs_of(&store, specs)? {
        let loaded = load(&store, &name)?;
        let all = series(&loaded.records);
        let report = check::check(&name, loaded.records.len(), &all, &settings);
        exit = exit.max(report.exit_code);
        let text = match format {
            HistoryCheckFormat::Table => export::history::check::table(&report),
            HistoryCheckFormat::Markdown => {
                export::history::check::markdown(&report, &all, export::history::check::MAX_BYTES)
            }
            HistoryCheckFormat::Json => export::history::check::json(&report),
        };
        export::stdout(&text).map_err(|e| Error::io("<stdout>", e))?;
        if markdown.is_some() {
            md.push_str(&export::history::check::markdown(
                &report,
                &all,
                export::history::check::MAX_BYTES,
            ));
        }
    }
    if let Some(path) = markdown {
        infer_bench_results::files::write_atomic(path, md.as_bytes())?;
    }
    Ok(Outcome(exit))
}

/// `history report SPEC -o FILE [--pr RESULTS] [--commit-url URL]`.
fn report(
    spec: &str,
    dir: &Path,
    output: &Path,
    pr: Option<&Path>,
    commit_url: Option<&str>,
) -> Result<Outcome> {
    if let Some(u) = commit_url {
        export::history::page::commit_url(u).map_err(Usage::CommitUrl)?;
    }
    let store = Store::new(dir);
    let loaded = load(&store, spec)?;
    let all = series(&loaded.records);
    let report = check::check(spec, loaded.records.len(), &all, &Settings::default());
    let pr = match pr {
        Some(p) => {
            let (r, _) = crate::inputs::read_results(p)?;
            Some(record_of(
                &r,
                "pull-request",
                &r.started_at,
                Source::Results,
            )?)
        }
        None => None,
    };
    let html = export::history::page::html(spec, &all, &report, pr.as_ref(), commit_url);
    infer_bench_results::files::write_atomic(output, html.as_bytes())?;
    say!("wrote {}", output.display());
    Ok(Outcome(EXIT_OK))
}

/// `history export SPEC --format F [-o FILE]`.
fn export_cmd(
    spec: &str,
    dir: &Path,
    format: HistoryExportFormat,
    output: Option<&Path>,
) -> Result<Outcome> {
    let store = Store::new(dir);
    let loaded = load(&store, spec)?;
    use export::history::trackers::{self, Direction};
    let records = &loaded.records;
    let text = match format {
        HistoryExportFormat::Bmf => trackers::bmf(records),
        HistoryExportFormat::GithubSmallerIsBetter => {
            trackers::github_action_benchmark(records, Direction::SmallerIsBetter)
        }
        HistoryExportFormat::GithubBiggerIsBetter => {
            trackers::github_action_benchmark(records, Direction::BiggerIsBetter)
        }
        HistoryExportFormat::Openmetrics => trackers::openmetrics(records),
        HistoryExportFormat::Csv => trackers::csv(records),
    };
    match output {
        Some(p) => infer_bench_results::files::write_atomic(p, text.as_bytes())?,
        None => export::stdout(&text).map_err(|e| Error::io("<stdout>", e))?,
    }
    Ok(Outcome(EXIT_OK))
}

/// The records of `spec_name` that `against = "history"` judges by: from
/// the folder `dir`, or, with `git_ref`, from that folder as it is at the
/// revision (so a pull request cannot edit the history it is judged by).
pub fn records_for_gate(spec_name: &str, dir: &Path, git_ref: Option<&str>) -> Result<Vec<Record>> {
    let loaded = match git_ref {
        None => Store::new(dir).load(spec_name).map_err(history_error)?,
        Some(rev) => {
            let folder = dir.join(spec_name);
            let mut files = Vec::new();
            for path in crate::git::files_at(rev, &folder)? {
                let text = crate::git::show(rev, &path)?;
                let below = path.strip_prefix(dir).unwrap_or(&path).to_path_buf();
                files.push((below, text.into_bytes()));
            }
            infer_bench_history::store::load_files(spec_name, files)
        }
    };
    for s in &loaded.skipped {
        say!("note: history: {}: skipped: {}", s.path.display(), s.why);
    }
    say!(
        "judging against the history in {}{}: {} record(s) of {spec_name}",
        dir.display(),
        git_ref.map(|r| format!(" at {r}")).unwrap_or_default(),
        loaded.records.len()
    );
    Ok(loaded.records)
}

/// The references of `results` in `records` (see
/// `infer_bench_history::reference`).
pub fn references(records: &[Record], results: &Results) -> crate::judge::compare::References {
    infer_bench_history::reference::references(
        records,
        results,
        &infer_bench_history::changepoint::Settings::default(),
    )
}
